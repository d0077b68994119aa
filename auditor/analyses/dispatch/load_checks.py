"""A drafter's checks while it is built and while it loads the draft model (issue 18:
``use_local_argmax_reduction`` with a draft model that has no ``get_top_tokens`` is rejected
by ``load_model``: ``if self.use_local_argmax_reduction: if not hasattr(self.model,
"get_top_tokens"): raise ValueError(...)``; parallel drafting with a draft config that has no
mask token is rejected by the constructor: ``if self.parallel_drafting:
self._init_parallel_drafting_params()``, whose ``else`` arm raises).

The guarded raises of the drafter's constructors that run (the most derived ``__init__``, and
its base's while each calls ``super().__init__``; ``when`` "build") and of its load methods
(``drafter-load-methods``, vLLM's ``load_model``; ``when`` "load") are evaluated over the
configuration, as the speculative config's validation is, and so are those of the drafter's
methods they call on ``self`` (outside loops; a call under ``if`` arms, outside code that may
not run, leads the callee's raises with those arms' tests), transitively, each resolved in
the drafter. A raise whose every test is decided the way that reaches it rejects the
configuration, with vLLM's message as written and file:line; a test decided against it drops
it; an undecided one leaves the plan and is named in its notes.

What a test reads of the drafter (``self.<attr>``) is its attribute's single definition in
the constructors (``FunctionFact.attr_defs``), evaluated over the configuration: for a load
method, the most derived one's; inside a constructor, the last one that ran before the line
(its own lines, its bases' run entire at its ``super().__init__``, its callers' lines before
theirs), and unknown when a ``self`` method called on the way, or the method holding the
test, assigns it. The attribute holding the model a registry loader built
(``TypeProvider.attr_types`` gives ``REGISTRY``) is the plan's draft model class after the
load, unknown while the drafter is built. A local the test reads is its single definition
when the facts place it before the test (a ``self.<a>.<b>`` chain or a ``getattr(x, "name",
default)`` whose every read is outside arms, loops and code that may not run, the first
before the test); any other local is unknown.

Of that model, only presence is modelled, and only for what the test asks of it: a name is
present when the class (with its bases) defines it as a method or class attribute or assigns
``self.<name>``; it is absent only when it is a head method (``head-methods``: vLLM's model
interface, which torch's ``nn.Module`` does not define) and every base of the class outside
the scanned tree is one that defines none (``head-free-bases``: ``nn.Module``, ``Protocol``,
...); anything else is unknown.

The module-level functions the load methods always call (:meth:`LoadChecks._module_runs`)
are run whole, a configured loader's call returning the plan's draft model as an object of
its class: a raise on every path rejects (vLLM 0.34.0's ``load_eagle_model`` ->
``share_target_lm_head`` with ``draft_lm_head_quantization`` and a draft that keeps its own
heads).
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import TYPE_CHECKING, Hashable

from ...facts.extract import CallFact, ExprFact, FunctionFact, GuardedRaise, PAttr, PCall, PConst, PExpr, PName
from ...index.index import ClassKey, FuncKey
from ...index.self_calls import self_callee
from ..partial_eval import Evaluator, Instance, Obj, Path, Unknown, Value, truth
from ..partial_eval.values import _Absent, structural_key
from ..types import REGISTRY
from .constructors import LOCAL_DEPTH, constructor_path
from .outcomes import Rejection
from .spec_fields import raise_of
from .part import DispatchPart
from .syntax import expr_names, expr_nodes, name_chain, self_reads

if TYPE_CHECKING:
    from .provider import DispatchProvider


#: a raise's site: the function holding it, and per enclosing test (the callers' arms that
#: lead to it first) the function it is written in, the test, whether it is an ``else`` arm,
#: and where the test is read (the raise's line, or the line of the call that leads on)
Test = tuple[FuncKey, FunctionFact, PExpr, bool, int]
#: when a method runs: after the drafter is built (``None``), or inside its ``i``-th
#: constructor (:meth:`LoadChecks.constructors`), up to line ``x`` of it, through the
#: methods called on the way (from the constructor's callee to this one)
When = tuple[int, int, tuple[FunctionFact, ...]] | None
#: a method to check: its key and facts, the tests its callers' arms lead to it with, and when it runs
Site = tuple[FuncKey, FunctionFact, tuple[Test, ...], When]


class LoadChecks(DispatchPart):
    def __init__(self, provider: "DispatchProvider") -> None:
        super().__init__(provider)
        # (drafter, the build root's structure) -> (the root, its built state): the last few configurations'
        self._built_memo: dict[tuple[ClassKey, Hashable], tuple[Obj, dict[str, Value]]] = {}
        self._construction_memo: dict[ClassKey, list[Site]] = {}

    def rejections(self, drafter: ClassKey, model: ClassKey | None, root: Obj) -> list[Rejection]:
        """The raises of ``drafter``'s constructors and load methods that this configuration reaches."""
        return self.checks(drafter, model, root)[0]

    def checks(self, drafter: ClassKey, model: ClassKey | None, root: Obj) -> tuple[list[Rejection], list[str]]:
        """The raises of ``drafter``'s constructors (``when`` "build") and load methods
        ("load") this configuration reaches, and a note per raise a test of which is
        undecided (the plan stands)."""
        out: list[Rejection] = []
        notes: list[str] = []
        ev = self.evaluator()
        ctors = self.constructors(drafter)
        loaded = self._reached_methods(drafter, [(k, f, (), None) for k, f in self._load_methods(drafter)], ctors)
        reads: list[str] = []  # reads of an attribute the loaded model lacks, on the way for this configuration
        for phase, sites in (("build", self._construction(drafter)), ("load", loaded)):
            for key, fn, outer, when in sites:
                lacking = self._lacking_reads(ev, drafter, model, fn) if phase == "load" and model is not None else []
                for r in (*fn.raises, *lacking):
                    at: When = (when[0], r.line, ()) if when is not None and key == ctors[when[0]][0] else when
                    tests: list[Test] = [*outer, *((key, fn, g, n, r.line) for g, n in zip(r.guards, r.negated))]
                    t = self._decided(ev, drafter, model, root, ctors, at, tests, fn, r, len(outer))
                    if t and r in lacking:
                        reads.append(f"{key[0]}:{r.line} {r.exc}")
                    elif t:
                        out.append(Rejection(key[0], r.line, key[1], r.exc, phase))
                    elif t is None:
                        notes.append(f"{key[0]}:{r.line} ({phase})")
        if not out and model is not None:
            out += self._module_runs(drafter, model, root, loaded)
        notes = list(dict.fromkeys(notes))
        said = [f"{len(notes)} raise(s) of the drafter while it is built or loads depend on what this "
                f"configuration leaves unknown: {', '.join(notes)}"] if notes else []
        if reads:
            # (other code may set the attribute on the model first: the evaluator does not follow
            # every write to it, so this is said, not a rejection)
            said.append("the drafter's load reads an attribute no class of the draft model defines, unless other code "
                        f"sets it on the model first: {'; '.join(dict.fromkeys(reads))}")
        return out, said

    def _reached_methods(self, drafter: ClassKey, entries: list[Site],
                         ctors: list[tuple[FuncKey, FunctionFact]]) -> list[Site]:
        """``entries`` and the drafter's methods they call on ``self`` or ``super()`` (outside loops and code
        that may not run; under ``if`` arms, those arms' tests lead the callee's raises'),
        transitively, each resolved in the drafter (an override wins). A method called from
        a constructor runs inside it, up to the call's line."""
        todo = list(entries)
        seen: set[tuple[FuncKey, tuple[tuple[FuncKey, int, bool], ...]]] = set()
        out: list[Site] = []
        while todo:
            key, fn, outer, when = todo.pop(0)
            ident = (key, tuple((t[0], t[4], t[3]) for t in outer))
            if ident in seen or len(outer) > _MAX_TESTS:
                continue
            seen.add(ident)
            out.append((key, fn, outer, when))
            arms = {b.id: b for b in fn.branches}
            for c in fn.calls:
                if not (c.func and len(c.func) == 2 and c.func[0] in ("self", "super()")) or c.loops:
                    continue
                if c.branches and (c.skippable or any(arms.get(b) is None or arms[b].guard is None for b in c.branches)):
                    continue
                # The method the drafter runs for ``self.m()`` (``super().m()``: the next one in its MRO).
                found = self_callee(self.index, drafter, key, c.func)
                if found is None or c.func[1] == "__init__":
                    continue
                callee_key, callee = found
                lead: tuple[Test, ...] = tuple((key, fn, g, arms[b].negated, c.line) for b in c.branches
                                               if (g := arms[b].guard) is not None)
                inner: When = None
                if when is not None:
                    inner = ((when[0], c.line, (callee,)) if key == ctors[when[0]][0]
                             else (when[0], when[1], (*when[2], callee)))
                todo.append((callee_key, callee, (*outer, *lead), inner))
        return out

    def _lacking_reads(self, ev: Evaluator, drafter: ClassKey, model: ClassKey, fn: FunctionFact) -> list[GuardedRaise]:
        """The reads ``self.<a>.<name>`` of a load method, ``self.<a>`` holding the model the
        registry loader built, of an attribute no class of the model's whole MRO has (none
        defines it, no method sets it on ``self`` or registers it as a buffer, parameter or
        sub-module), outside loops and code that may not run: each raises AttributeError as
        CPython words it, under the tests of the ``if`` arms around it, unless code the drafter
        runs first sets it on the model (not followed: :meth:`checks` says so in a note, it does
        not reject)."""
        arms = {b.id: b for b in fn.branches}
        out: list[GuardedRaise] = []
        for read in fn.attr_reads:
            if read.loops or read.skippable or len(read.chain) != 3 or REGISTRY not in self.types.attr_types(drafter, read.chain[1]):
                continue
            if any(arms.get(b) is None or arms[b].guard is None for b in read.branches):
                continue
            if not isinstance(ev.world.class_attr(model, read.chain[2], True), _Absent):
                continue
            guards = tuple(g for b in read.branches if (g := arms[b].guard) is not None)
            out.append(GuardedRaise(read.line, f"AttributeError(\"'{model[1]}' object has no attribute '{read.chain[2]}'\")",
                                    guards, tuple(arms[b].negated for b in read.branches)))
        return out

    def _module_runs(self, drafter: ClassKey, model: ClassKey, root: Obj, sites: list[Site]) -> list[Rejection]:
        """The load methods' calls of module-level functions of the tree (each call the method
        always makes: outside loops, ``if`` arms and code that may not run, in a method reached
        without a test on the way; resolved and bound to the function's signature as the call
        graph does), each function run whole by the evaluator with the call's arguments (a
        literal; ``self.<attr>`` as :meth:`attr_value` reads it; anything else unknown) and the
        configured loaders' calls returning the plan's draft model (an object of its class): a
        raise on every path, with no cut on the way but callees that raise on some paths,
        rejects the configuration at load (vLLM 0.34.0: ``load_eagle_model`` ->
        ``share_target_lm_head`` raises for ``draft_lm_head_quantization`` with a draft model
        that keeps its own heads)."""
        calls = self.loops.calls
        out: list[Rejection] = []
        seen: set[FuncKey] = set()
        for key, fn, outer, _ in sites:
            if outer:
                continue
            for ci, c in enumerate(fn.calls):
                if c.func is None or c.loops or c.branches or c.skippable or c.star_args or c.star_kwargs:
                    continue
                if c.func[-1] in self.config.loaders:
                    continue  # (the load itself: what it returns is the draft model)
                found = [t for t in calls.targets(key, fn, drafter, ci) if not t.bound and t.ctx is None]
                if len(found) != 1 or found[0].func in seen:
                    continue
                fkey = found[0].func
                seen.add(fkey)
                ev = self.evaluator(loaded=Instance(model, 0))
                callee = ev.world.function(fkey)
                bound = calls.bind_site(c, fn, found[0])
                if callee is None or not callee.body or bound.extra_positional or bound.unknown_keywords:
                    continue
                args = {name: self._argument(ev, drafter, model, root, fn, src.expr)
                        for name, src in bound.params.items() if name in callee.param_names}
                # (the arguments copied: the run may change them, the plan's configuration stays)
                found_raise = raise_of(fkey, ev.run(fkey, callee, copy.deepcopy(args)))
                if found_raise is not None:
                    out.append(replace(found_raise, when="load"))
        return out

    def _argument(self, ev: Evaluator, drafter: ClassKey, model: ClassKey, root: Obj, caller: FunctionFact,
                  e: ExprFact) -> Value:
        """A call's argument as :meth:`_module_runs` reads it: a literal, ``self.<attr>`` of the
        drafter as :meth:`attr_value` reads it, anything else unknown."""
        if e.has_literal:
            return e.literal
        ch = e.chain
        if ch is not None and len(ch) == 2 and ch[0] == "self" and "self" in caller.param_names:
            return self.attr_value(ev, drafter, ch[1], (), model, root)
        return Unknown(e.text)

    def _load_methods(self, drafter: ClassKey) -> list[tuple[FuncKey, FunctionFact]]:
        """The load methods (``drafter-load-methods``), each resolved in the drafter."""
        out: list[tuple[FuncKey, FunctionFact]] = []
        for name in dict.fromkeys(self.config.drafter_load_methods):
            found = self.index.method(drafter, name)
            if found is not None:
                owner, fn = found
                out.append(((owner[0], f"{owner[1]}.{name}"), fn))
        return out

    def _decided(self, ev: Evaluator, drafter: ClassKey, model: ClassKey | None, root: Obj,
                 ctors: list[tuple[FuncKey, FunctionFact]], when: When, tests: list[Test], fn: FunctionFact,
                 r: GuardedRaise, own: int) -> bool | None:
        """Whether every test is decided the way that reaches the raise (True), one is decided
        against it (False), or else (None)."""
        unsure = False
        for i, (key, f, g, neg, line) in enumerate(tests):
            p = self._path(ev, drafter, model, root, ctors, when, key, f, g, line)
            t = truth(ev.eval(g, p, key))
            if t is None and neg and i >= own and other_arm_raises(fn, r, i - own):
                continue  # ``if g: raise ...`` before: rejected by one of the two
            if t is not None and t == neg:
                return False
            unsure = unsure or t is None
        return None if unsure else True

    def _path(self, ev: Evaluator, drafter: ClassKey, model: ClassKey | None, root: Obj,
              ctors: list[tuple[FuncKey, FunctionFact]], when: When, key: FuncKey, fn: FunctionFact, test: PExpr,
              line: int) -> Path:
        """The path test ``test`` of ``fn`` (read at ``line``) is evaluated on: the locals it
        reads that ``fn`` assigns once, where the facts place the value before ``line``
        (:func:`_runs_before`), through each other; ``self`` holding the attributes these read
        (:meth:`attr_value`, or inside a constructor :meth:`_built_value`). Any other local is
        left to the evaluator (unknown)."""
        env: dict[str, Value] = {}
        defs: dict[str, PExpr] = {}

        def resolve(name: str, depth: int) -> None:
            v = fn.local_defs.get(name)
            if name in defs or v is None or depth >= LOCAL_DEPTH or not _runs_before(fn, v, line):
                return
            defs[name] = v
            for n in expr_names(v):
                resolve(n, depth + 1)

        for n in expr_names(test):
            resolve(n, 0)
        exprs = [test, *defs.values()]
        attrs = list(dict.fromkeys(a for e in exprs for a in self_reads(e)))
        guards = tuple(exprs)
        fields = {a: (self.attr_value(ev, drafter, a, guards, model, root) if when is None
                      else self._built_value(ev, drafter, a, root, ctors, when)) for a in attrs}
        env["self"] = Obj("self", fields)
        order = list(defs)
        done: set[str] = set()

        def bind(name: str) -> None:
            if name in done:
                return
            done.add(name)
            for n in expr_names(defs[name]):
                if n in defs:
                    bind(n)
            env[name] = ev.eval(defs[name], Path(copy.deepcopy(env)), key)

        for n in order:
            bind(n)
        return Path(copy.deepcopy(env))

    def _built_value(self, ev: Evaluator, drafter: ClassKey, attr: str, root: Obj,
                     ctors: list[tuple[FuncKey, FunctionFact]], when: tuple[int, int, tuple[FunctionFact, ...]]) -> Value:
        """``self.<attr>`` while constructor ``when[0]`` runs, at its line ``when[1]``: the last
        assignment that ran before, when it is the attribute's single definition in its
        constructor (an assignment of the constructor's own: ``FunctionFact.attr_defs``), and
        no ``self`` method those constructors call before, nor a method on the way from the
        constructor to the test, assigns it; else unknown."""
        unknown = Unknown(f"self.{attr}")
        if REGISTRY in self.types.attr_types(drafter, attr) or any(_assigns(f, attr) for f in when[2]):
            return unknown
        for j, lo, hi in _segments(ctors, when[:2]):
            kj, fj = ctors[j]
            lines = [a.line for a in fj.attr_assigns if a.target == ("self", attr) and lo < a.line < hi]
            callees = [c.func[1] for c in fj.calls
                       if c.func and len(c.func) == 2 and c.func[0] == "self" and lo < c.line < hi and c.func[1] != "__init__"]
            if any(_assigns(m[1], attr) for m in (self.index.method(drafter, n) for n in callees) if m is not None):
                return unknown
            if not lines:
                continue
            v = fj.attr_defs.get(attr)
            if v is None:
                return unknown
            env: dict[str, Value] = {p: root for p in fj.param_names if p == self.roles["root"]}
            return ev.eval(v, constructor_path(ev, kj, fj, env, v, max(lines)), kj)
        return unknown

    def attr_value(self, ev: Evaluator, drafter: ClassKey, attr: str, guards: tuple[PExpr, ...], model: ClassKey | None,
              root: Obj) -> Value:
        """``self.<attr>`` of the drafter once it is built, as its load methods and draft loop
        read it: the draft model the plan loads, for the attribute a registry loader's result
        is stored in; its value once built (:meth:`built_value`) when only the constructors
        and the methods they call may assign it; else unknown (a method called after the
        build may set it)."""
        if REGISTRY in self.types.attr_types(drafter, attr):
            return self._model(model, _asked(attr, guards), root, (drafter, attr)) if model is not None \
                else Unknown(f"self.{attr}")
        if not self.writers(drafter, attr) <= self.ran_methods(drafter):
            return Unknown(f"self.{attr}")
        return self.built_value(ev, drafter, attr, root)

    def built_value(self, ev: Evaluator, drafter: ClassKey, attr: str, root: Obj) -> Value:
        """``self.<attr>`` at the end of the drafter's constructors (what methods called later
        write is the caller's to rule out): the one assignment the constructors and the
        methods they call hold, when it is a constructor's unconditional statement
        (``FunctionFact.attr_defs``), evaluated there when that gives a value; else its value
        at the end of the constructors' run (:meth:`built_state`)."""
        ran = self.ran_methods(drafter)
        statements = sum(1 for c in self.index.mro(drafter) for name, m in self.index.methods(c).items()
                         if (c[0], f"{c[1]}.{name}") in ran for a in m.attr_assigns if a.target == ("self", attr))
        if statements == 1:
            for key, fn in self.constructors(drafter):
                v = fn.attr_defs.get(attr)
                if v is None:
                    continue
                env: dict[str, Value] = {p: root for p in fn.param_names if p == self.roles["root"]}
                got = ev.eval(v, constructor_path(ev, key, fn, env, v, fn.end_line + 1), key)
                if not isinstance(got, Unknown):
                    return got
                break  # (the whole run may know it: a base's parameter its caller passes a literal)
        # (a copy: the state is shared by the plans of one configuration)
        return copy.deepcopy(self.built_state(drafter, root).get(attr, Unknown(f"self.{attr}")))

    def ran_methods(self, drafter: ClassKey) -> frozenset[FuncKey]:
        """The constructors that run and the drafter's methods they call on ``self`` or
        ``super()`` (:meth:`_construction`)."""
        return frozenset(k for k, *_ in self._construction(drafter))

    def _construction(self, drafter: ClassKey) -> list[Site]:
        """The constructors that run, each inside the one before it, and the drafter's methods
        they call (:meth:`_reached_methods`), as the build phase of :meth:`checks` walks them;
        facts only, kept per drafter."""
        hit = self._construction_memo.get(drafter)
        if hit is None:
            ctors = self.constructors(drafter)
            built: list[Site] = [(k, f, (), (i, f.end_line + 1, ())) for i, (k, f) in enumerate(ctors)]
            hit = self._construction_memo[drafter] = self._reached_methods(drafter, built, ctors)
        return hit

    def writers(self, drafter: ClassKey, attr: str) -> set[FuncKey]:
        """The methods of the drafter's MRO that assign ``self.<attr>`` and may run on it: the
        one the drafter resolves for each name, and a base's that an override reaches by
        ``super()``."""
        mro = self.index.mro(drafter)
        supered = {c.func[1] for k in mro for m in self.index.methods(k).values() for c in m.calls
                   if c.func and len(c.func) == 2 and c.func[0] == "super()"}
        out: set[FuncKey] = set()
        for c in mro:
            for name, m in self.index.methods(c).items():
                if not _assigns(m, attr):
                    continue
                found = self.index.method(drafter, name)
                if found is not None and found[0] != c and name not in supered:
                    continue  # overridden, never reached through super(): it does not run on this drafter
                out.add((c[0], f"{c[1]}.{name}"))
        return out

    def built_state(self, drafter: ClassKey, root: Obj) -> dict[str, Value]:
        """The drafter's attributes at the end of its constructors' run for this configuration:
        its most derived ``__init__`` run whole by the evaluator (``self`` an object of the
        drafter's class, the build-root parameter a copy of ``root``, any other parameter
        unknown; its bases' constructors and its methods as the calls reach them), the paths
        that do not raise joined (an attribute they leave different is unknown). Empty when
        every path raises or no constructor of the tree runs."""
        memo = self._built_memo
        # (the configuration's structure: plans of one configuration share the run)
        shape: Hashable = structural_key(root)
        key = (drafter, shape if shape is not None else ("object", id(root)))
        hit = memo.get(key)
        if hit is not None and (shape is not None or hit[0] is root):
            return hit[1]
        fields: dict[str, Value] = {}
        ctors = self.constructors(drafter)
        ev = self.evaluator()
        fn = ev.world.function(ctors[0][0]) if ctors else None
        if fn is not None and fn.body:
            this = Obj(f"{drafter[1]}(...)", cls=drafter)
            args: dict[str, Value] = {p: copy.deepcopy(root) for p in fn.param_names if p == self.roles["root"]}
            args["self"] = this
            joined = ev.run_joined(ctors[0][0], fn, args)
            built = joined.env.get("self")
            if joined.raised is None and isinstance(built, Obj):
                fields = dict(built.fields)
        if len(memo) >= _BUILT_MEMO:
            memo.pop(next(iter(memo)))
        memo[key] = (root, fields)
        return fields

    def constructors(self, cls: ClassKey) -> list[tuple[FuncKey, FunctionFact]]:
        """The constructors that run, most derived first: each base's while the one before
        calls ``super().__init__``."""
        out: list[tuple[FuncKey, FunctionFact]] = []
        after: ClassKey | None = None
        while True:
            found = self.index.method(cls, "__init__", after)
            if found is None:
                return out
            owner, fn = found
            out.append(((owner[0], f"{owner[1]}.__init__"), fn))
            if not any(c.func == ("super()", "__init__") for c in fn.calls):
                return out
            after = owner

    def _model(self, model: ClassKey, asked: list[str], root: Obj | None = None,
               holder: tuple[ClassKey, str] | None = None) -> Obj:
        """The draft model as far as presence goes: a field per name the test asks of it;
        None for an attribute its constructors set to None for this configuration
        (:meth:`.head_reads.HeadReads.is_none`, the model built with ``root``; ``holder``:
        the drafter's attribute that holds it)."""
        mro = self.index.mro(model)
        present: set[str] = set(self.types.self_attributes(model))
        for c in mro:
            present.update(self.index.methods(c))
            cf = self.index.class_fact(c)
            if cf is not None:
                present.update(cf.class_attrs)
        complete = all(self.bases_known(c) for c in mro)
        fields: dict[str, Value] = {}
        for n in asked:
            if n in present and root is not None and n in self.types.self_attributes(model) \
                    and self.provider.head_reads.model_attr_is_none(model, n, root, (holder,) if holder else ()):
                fields[n] = None
            elif n in present:
                fields[n] = Unknown(f"{model[1]}.{n}")
            elif not (complete and n in self.config.head_methods):
                fields[n] = Unknown(f"{model[1]}.{n}", maybe_absent=True)
        return Obj(model[1], fields, closed=True)

    def bases_known(self, cls: ClassKey) -> bool:
        """Every base of ``cls`` is a class of the tree or a base without head methods."""
        cf = self.index.class_fact(cls)
        if cf is None:
            return False
        known = len(self.index.bases(cls))
        outside = [b for b in cf.bases if ".".join(b) not in self.config.head_free_bases]
        return known >= len(outside)


def _asked(attr: str, guards: tuple[PExpr, ...]) -> list[str]:
    """The names the guards ask of ``self.<attr>``: its attributes, and those ``hasattr`` /
    ``getattr`` name."""
    def is_it(e: object) -> bool:
        return isinstance(e, PAttr) and e.attr == attr and isinstance(e.value, PName) and e.value.id == "self"

    out: list[str] = []
    for g in guards:
        for e in expr_nodes(g):
            if isinstance(e, PAttr) and is_it(e.value):
                out.append(e.attr)
            elif (isinstance(e, PCall) and isinstance(e.func, PName) and e.func.id in ("hasattr", "getattr")
                  and len(e.args) >= 2 and is_it(e.args[0]) and isinstance(e.args[1], PConst)
                  and isinstance(e.args[1].value, str)):
                out.append(e.args[1].value)
    return list(dict.fromkeys(out))


#: how many configurations' built drafter states :meth:`LoadChecks.built_state` keeps
_BUILT_MEMO = 64

#: the most tests a raise's site gathers through its callers' arms
_MAX_TESTS = 16


def _runs_before(fn: FunctionFact, v: PExpr, line: int) -> bool:
    """A local's single value is one the facts place: a ``self.<a>.<b>...`` chain, or
    ``getattr(x, "name", default)`` of a name or chain, every read of which (the chain's
    ``self.<a>.<b>``; the ``getattr`` call with that name) ``fn`` makes outside ``if`` arms,
    loops and code that may not run, the first before ``line``. (A value written once but
    read only under an arm may be unbound: it is not placed.)"""
    ch = name_chain(v)
    reads: list[tuple[int, bool]]  # (line, conditional) of each read
    if ch is not None and ch[0] == "self" and len(ch) >= 3:
        reads = [(r.line, bool(r.loops or r.branches or r.skippable)) for r in fn.attr_reads if r.chain == ch[:3]]
    elif (isinstance(v, PCall) and isinstance(v.func, PName) and v.func.id == "getattr" and len(v.args) in (2, 3)
          and name_chain(v.args[0]) is not None and isinstance(v.args[1], PConst) and isinstance(v.args[1].value, str)):
        name, of = v.args[1].value, name_chain(v.args[0])

        def same(c: CallFact) -> bool:
            return (c.func == ("getattr",) and len(c.args) in (2, 3) and c.args[0].chain == of
                    and c.args[1].has_literal and c.args[1].literal == name)

        reads = [(c.line, bool(c.loops or c.branches or c.skippable)) for c in fn.calls if same(c)]
    else:
        return False
    return bool(reads) and not any(cond for _, cond in reads) and min(n for n, _ in reads) < line


def _assigns(fn: FunctionFact, attr: str) -> bool:
    return any(a.target == ("self", attr) for a in fn.attr_assigns)


def _segments(ctors: list[tuple[FuncKey, FunctionFact]], when: tuple[int, int]) -> list[tuple[int, int, int]]:
    """What ran before line ``x`` of constructor ``i``, latest first, as (constructor, after
    line, before line): its lines after its ``super().__init__`` call, the bases' run
    entire (each base's lines after its own call, the deeper bases', its lines before),
    its lines before the call, and its callers' lines before theirs."""
    def call(j: int) -> int | None:
        lines = [c.line for c in ctors[j][1].calls if c.func == ("super()", "__init__")]
        return min(lines) if lines else None

    def entire(j: int) -> list[tuple[int, int, int]]:
        if j >= len(ctors):
            return []
        s = call(j)
        if s is None or j + 1 >= len(ctors):
            return [(j, 0, _END)]
        return [(j, s, _END), *entire(j + 1), (j, 0, s)]

    i, x = when
    s = call(i)
    out = [(i, s, x), *entire(i + 1), (i, 0, s)] if s is not None and s < x and i + 1 < len(ctors) else [(i, 0, x)]
    for j in range(i - 1, -1, -1):
        sj = call(j)
        out.append((j, 0, sj if sj is not None else 0))
    return out


_END = 1 << 30


def other_arm_raises(fn: FunctionFact, r: GuardedRaise, i: int) -> bool:
    """Another raise of ``fn`` is reached when ``r``'s ``i``-th (negated) test holds, under the
    same outer tests (``if c: raise A`` then ``raise B``: one of the two runs whatever ``c``)."""
    want_guards, want_neg = r.guards[:i + 1], r.negated[:i] + (False,)
    return any(o is not r and o.guards == want_guards and o.negated == want_neg for o in fn.raises)
