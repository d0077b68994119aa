"""Draft loops: find every ``for`` loop over a draft-step count and follow its calls,
carrying which values vary per step, into every draft model class it reaches.

The result of one loop records where it enters a draft model (:class:`LoopEntry`:
which method, and whether the threaded parameter arrives varying, constant or absent)
and every layer selection it reaches there (:class:`LoopSelection`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum

from ..facts.extract import CallFact, ExprFact, FunctionFact, LoopFact, SubscriptFact
from ..index.index import ClassKey, FuncKey
from ..index.self_calls import self_call_closure
from ..model.findings import Hop
from .base import Analyses, Provider
from .calls import ArgSource, CallProvider, Callables, Obj, PassKind
from .flow import FlowProvider, selecting_subscripts, sources_for, taint
from .types import TypeProvider
from ..common.search_limits import limit

# Entry methods through which a draft model's forward pass runs (nn.Module semantics); a
# selection reached through one of them is the forward layer, elsewhere a head's.
FORWARD_METHODS = ("forward", "__call__")


class StepKind(str, Enum):
    """What a call site hands over for a threaded parameter, per draft step."""

    VARYING = "varying"  # changes with the draft step
    CONSTANT = "constant"  # the same value at every step
    ABSENT = "absent"  # not passed: the callee's default
    UNKNOWN = "unknown"  # the analysis cannot tell (a call's result, a value the loop reassigns)


# From the most to the least informative about a per-step step: a group or a class whose
# entries differ takes the first kind among theirs.
KIND_ORDER = (StepKind.VARYING, StepKind.UNKNOWN, StepKind.CONSTANT, StepKind.ABSENT)


@dataclass(frozen=True)
class LoopEntry:
    """A call from a draft loop (possibly through helpers) into a draft model's method."""

    loop_hop: Hop
    call_hop: Hop
    model_class: ClassKey
    method: str
    kind: StepKind  # for the threaded parameter ``param``
    param: str
    accepts: bool  # the callee can take the parameter
    hops: tuple[Hop, ...]
    callee: FuncKey


@dataclass(frozen=True)
class LoopSelection:
    model_class: ClassKey
    kind: StepKind
    hops: tuple[Hop, ...]
    container: str
    method: str  # the draft model entry method this selection was reached through
    ctx: ClassKey | None = None  # the class of ``self`` in the selecting function (the object built)
    # A read at a constant key of a container built from a literal (``self.layers["0"]`` of
    # ``nn.ModuleDict({"0": ...})``): the position of that entry, the same whatever the step
    # (``kind`` is then CONSTANT; types.Container.position). None: a selection by the step.
    position: int | None = None
    # For such a read: what arrives for the threaded step in the selecting function (an assert
    # on the step there fails at the steps the loop hands it, :meth:`.dispatch.outcomes`).
    step: StepKind | None = None


@dataclass
class LoopResult:
    func: FuncKey
    loop: LoopFact
    hop: Hop
    entries: list[LoopEntry] = field(default_factory=list)
    selections: list[LoopSelection] = field(default_factory=list)
    # What each function the loop calls (through helpers) receives for each threaded
    # parameter it declares: (function, parameter) -> kinds.
    arrivals: dict[tuple[FuncKey, str], set[StepKind]] = field(default_factory=dict)


@dataclass(frozen=True)
class EntryGroup:
    """The entries of one loop that enter the draft model at one call site."""

    entry: LoopEntry  # the first one (for its hops)
    kind: StepKind  # the first of KIND_ORDER among its entries' kinds
    kinds: frozenset[StepKind]
    classes: frozenset[ClassKey]


@dataclass
class _Frame:
    key: FuncKey
    fn: FunctionFact
    ctx: ClassKey | None
    varying: set[str]
    param_kinds: dict[str, StepKind]
    callables: Callables
    model_class: ClassKey | None
    entry_method: str
    attr_kinds: dict[str, StepKind]
    dict_kinds: dict[str, dict[str, StepKind]] = field(default_factory=dict)
    # Names whose per-step value the analysis cannot tell (reassigned in the loop from
    # something that does not follow the loop variable; derived from an unknown parameter).
    unknown: set[str] = field(default_factory=set)


class LoopProvider(Provider):
    dependencies = (TypeProvider, CallProvider, FlowProvider)

    def __init__(self, analyses: Analyses) -> None:
        super().__init__(analyses)
        self.types = self.dep(TypeProvider)
        self.calls = self.dep(CallProvider)
        self.flow = self.dep(FlowProvider)
        self._results: list[LoopResult] | None = None
        counts = "|".join(re.escape(c) for c in self.config.draft_loop_counts)
        self._count_re = re.compile(rf"\b(?:{counts})\b")

    def functions(self) -> list[tuple[FuncKey, FunctionFact]]:
        """Every function and method of every file loaded so far, in a stable order."""
        out: list[tuple[FuncKey, FunctionFact]] = []
        for path, facts in self.index.loaded():
            for name, fn in sorted(facts.functions.items()):
                out.append(((path, name), fn))
            for cname, cls in sorted(facts.classes.items()):
                for mname, m in sorted(cls.methods.items()):
                    out.append(((path, f"{cname}.{mname}"), m))
        return out

    def draft_loops(self) -> list[tuple[FuncKey, FunctionFact, LoopFact]]:
        """Outermost loops whose iterable is a ``range`` over a draft-step count, and the
        ``range`` loops of a drafter's proposing code (:meth:`proposing_functions`)."""
        out: list[tuple[FuncKey, FunctionFact, LoopFact]] = []
        proposing = self.proposing_functions()
        for fkey, fn in self.functions():
            if self.index.replaced(fkey):
                continue  # patched away by a plugin
            out.extend((fkey, fn, loop) for loop in self.loops_in(fn, proposing=fkey in proposing))
        return out

    def proposing_functions(self) -> set[FuncKey]:
        """Methods a class's proposer entry (``proposer-entries``) reaches through
        ``self.m()`` calls, resolved in that class: the code that proposes draft tokens."""
        out: set[FuncKey] = set()
        for path, facts in self.index.loaded():
            for cname, cls in sorted(facts.classes.items()):
                if not any(e in cls.methods for e in self.config.proposer_entries):
                    continue
                key: ClassKey = (path, cname)
                for owner, name, _fn in self_call_closure(self.index, key, list(self.config.proposer_entries)):
                    out.add(self.index.method_key(owner, name))
        return out

    def loops_in(self, fn: FunctionFact, proposing: bool = False) -> list[LoopFact]:
        """The outermost draft loops of one function: loops over ``range`` of a draft-step
        count; in proposing code (``proposing``), also any other ``range`` loop, outside
        those, whose body runs the draft model — a tree drafter's loop over the levels of its
        token tree (``range(tree_depth - 1)``) is a draft loop whatever its count is called.
        Only loops that reach a draft model are kept as results (:meth:`loop_results`)."""
        matching = {lp.id for lp in fn.loops if "range" in lp.iter.text and self._count_re.search(lp.iter.text)}
        loops = [loop for loop in fn.loops if loop.id in matching and not matching.intersection(loop.parents)]
        if proposing:
            inside = {lp.id for lp in fn.loops if matching.intersection(lp.parents)}
            enclosing = {p for lp in fn.loops if lp.id in matching for p in lp.parents}
            other = {lp.id for lp in fn.loops if lp.iter.text.startswith("range(")
                     and lp.id not in matching | inside | enclosing}
            extra = [loop for loop in fn.loops if loop.id in other and not other.intersection(loop.parents)]
            if extra:
                return sorted(loops + extra, key=lambda lp: (lp.line, lp.col))
        return loops

    def loop_results(self) -> list[LoopResult]:
        """Every draft loop that reaches a draft model (computed once)."""
        if self._results is None:
            results = [self.explore_loop(*args) for args in self.draft_loops()]
            self._results = [r for r in results if r.entries]
        return self._results

    def explore_loop(self, fkey: FuncKey, fn: FunctionFact, loop: LoopFact, ctx: ClassKey | None = None) -> LoopResult:
        """``ctx``: the receiver's class when the loop runs in an instance of a subclass
        (a dispatch built that subclass); default: the class defining the loop."""
        loop_hop = self.hop(fkey, loop.line, f"draft loop: for … in {loop.iter.text}")
        result = LoopResult(fkey, loop, loop_hop)
        # Loop-carried counters (``step += 1``) change every iteration, as the loop variable does.
        varying = taint(fn, set(loop.targets) | set(loop.carried))
        unknown = taint(fn, set(loop.assigned) - varying) - varying
        frame = _Frame(fkey, fn, ctx or self.types.defining_class(fkey), varying, {}, {}, None, "", {}, unknown=unknown)
        seen: set[object] = set()
        for ci, call in enumerate(fn.calls):
            if loop.id in call.loops:
                self._walk(frame, ci, (loop_hop,), 0, result, seen)
        return result

    def _kind(self, frame: _Frame, expr: ExprFact | None) -> StepKind:
        if expr is None:
            return StepKind.ABSENT
        if frame.varying.intersection(expr.names):
            return StepKind.VARYING
        for n in expr.names:
            if n in frame.param_kinds:
                return frame.param_kinds[n]
        if frame.unknown.intersection(expr.names) or (expr.called is not None and not expr.constant):
            return StepKind.UNKNOWN  # a value the loop reassigns, or what a call returns
        return StepKind.CONSTANT

    def _walk(self, frame: _Frame, ci: int, hops: tuple[Hop, ...], depth: int, result: LoopResult, seen: set[object]) -> None:
        if depth > limit(self.config.search_limits, "draft loop call depth"):
            self.limits.hit("draft loop call depth")
            return
        call = frame.fn.calls[ci]
        if frame.model_class is None and not self._worth_following(frame, call):
            return
        targets = self.calls.resolve_site(frame.key, frame.fn, frame.ctx, ci, frame.callables, frame.model_class)
        for tgt in targets:
            callee = self.index.function(tgt.func)
            if callee is None:
                continue
            b = self.calls.bind_site(call, frame.fn, tgt)
            params = b.params
            # Dicts that arrived as parameters (run_pw_graph(model, inputs) -> model(**inputs)).
            for d in call.star_kwargs:
                ch = d.chain
                if ch and len(ch) == 1 and ch[0] in frame.dict_kinds:
                    if params is b.params:
                        params = dict(b.params)  # the binding is shared (bind_site)
                    for k in frame.dict_kinds[ch[0]]:
                        params.setdefault(k, ArgSource(ExprFact(text=f"{ch[0]}[{k!r}]"), PassKind.PARAM_DICT, ch[0], k))
            kinds: dict[str, StepKind] = {}
            for cparam, src in params.items():
                if src.how is PassKind.PARAM_DICT and src.dict_name is not None and src.dict_key is not None:
                    kinds[cparam] = frame.dict_kinds[src.dict_name][src.dict_key]
                else:
                    kinds[cparam] = self._kind(frame, src.expr)
            sub_frame_kinds = dict(kinds)
            if b.forwards_kwargs:
                for p in self.params:
                    if p in frame.param_kinds and p not in kinds:
                        kinds[p] = sub_frame_kinds[p] = frame.param_kinds[p]
            for p in self.params:
                if p in callee.param_names:
                    result.arrivals.setdefault((tgt.func, p), set()).add(kinds.get(p, StepKind.ABSENT))
            site = self.index.patch_site(tgt.func)  # a plugin's function patched onto the class
            call_hop = self.hop(frame.key, call.line, f"calls {tgt.func[1]}" + (f" (patched in at {site})" if site else ""))
            entering = tgt.model_class is not None and frame.model_class is None
            new_hops = hops + (call_hop,)
            # The draft model method the loop enters: a plugin's patch runs under the name it replaced.
            entry_method = (self.index.patched_name(tgt.func) or tgt.func[1].rpartition(".")[2]) if entering \
                else frame.entry_method
            if entering and tgt.model_class is not None:
                for p in self.params:
                    result.entries.append(
                        LoopEntry(result.hop, call_hop, tgt.model_class, entry_method, kinds.get(p, StepKind.ABSENT), p,
                                  self.calls.accepts(tgt.func, p), new_hops, tgt.func)
                    )
            callables, dict_kinds = self._handed_over(frame, params)
            # Side channel into the callee's object.
            attr_kinds = dict(frame.attr_kinds) if tgt.ctx == frame.ctx else {}
            for s in frame.fn.attr_assigns:
                t = s.target
                if len(t) >= 3 and t[0] == "self" and t[-1] in self.params:
                    objs = [o for o, _ in self.calls.objects_of_chain(frame.ctx, t[1:-1], frame.model_class)]
                    if tgt.ctx in objs:
                        attr_kinds[t[-1]] = self._kind(frame, s.value)
            model_class = tgt.model_class or frame.model_class
            varying_src = {p for p, k in sub_frame_kinds.items() if k is StepKind.VARYING}
            varying_src |= {"self." + p for p, k in attr_kinds.items() if k is StepKind.VARYING}
            state = (
                tgt.func, tgt.ctx, model_class, frozenset(sub_frame_kinds.items()), frozenset(attr_kinds.items()),
                frozenset((k, tuple(v)) for k, v in callables.items()),
                frozenset((k, frozenset(v.items())) for k, v in dict_kinds.items()),
            )
            if state in seen:
                continue
            seen.add(state)
            unknown_src = {p for p, k in sub_frame_kinds.items() if k is StepKind.UNKNOWN}
            unknown_src |= {"self." + p for p, k in attr_kinds.items() if k is StepKind.UNKNOWN}
            sub = _Frame(tgt.func, callee, tgt.ctx, taint(callee, varying_src), sub_frame_kinds, callables, model_class,
                         entry_method, attr_kinds, dict_kinds, taint(callee, unknown_src) if unknown_src else set())
            if model_class is not None:
                self._record_selections(sub, new_hops, result)
            for cj in range(len(callee.calls)):
                self._walk(sub, cj, new_hops, depth + 1, result, seen)

    def _handed_over(self, frame: _Frame, params: dict[str, ArgSource]) -> tuple[Callables, dict[str, dict[str, StepKind]]]:
        """Callables (modules) and dicts the caller hands to the callee as arguments."""
        callables: Callables = {}
        dict_kinds: dict[str, dict[str, StepKind]] = {}
        for cparam, src in params.items():
            ch = src.expr.chain
            if not ch:
                continue
            if ch[0] == "self" and len(ch) >= 2:
                objs: list[Obj] = self.calls.objects_of_chain(frame.ctx, ch[1:], frame.model_class)
                if objs:
                    callables[cparam] = objs
            elif len(ch) == 1 and ch[0] in frame.fn.dicts:
                dict_kinds[cparam] = {e.key: self._kind(frame, e.value) for e in frame.fn.dicts[ch[0]] if e.key is not None}
            elif len(ch) == 1 and ch[0] in frame.callables:
                callables[cparam] = frame.callables[ch[0]]
            elif len(ch) == 1 and ch[0] in frame.dict_kinds:
                dict_kinds[cparam] = frame.dict_kinds[ch[0]]
        return callables, dict_kinds

    def _worth_following(self, frame: _Frame, call: CallFact) -> bool:
        """Before the draft model is entered, a plain function call matters only if it
        receives something that can carry the step: a varying value, a module, a dict."""
        chain = call.func
        if not chain:
            return False
        head = chain[0]
        if head in ("self", "super()") or head in frame.callables or head in frame.fn.assigns:
            return True
        for e in [*call.args, *(kw.value for kw in call.keywords), *call.star_kwargs, *call.star_args]:
            if (frame.varying | frame.unknown).intersection(e.names) or any(n.startswith("self.") for n in e.names):
                return True
            ch = e.chain
            if ch and len(ch) == 1 and (ch[0] in frame.fn.dicts or ch[0] in frame.dict_kinds or ch[0] in frame.callables):
                return True
            if any(n in frame.param_kinds for n in e.names):
                return True
        return False

    def _record_selections(self, frame: _Frame, hops: tuple[Hop, ...], result: LoopResult) -> None:
        assert frame.model_class is not None
        for sub in selecting_subscripts(frame.fn):
            names = set(sub.index.names)
            kind: StepKind | None = None
            if frame.varying.intersection(names):
                kind = StepKind.VARYING
            else:
                for p in self.params:
                    # The parameter, or its side channel ``self.<p>`` read directly or through a
                    # local (``i = self.spec_step_idx % n`` then ``self.layers[str(base + i)]``):
                    # the kind of the one that reaches; both, with different kinds: unknown.
                    src = sources_for(frame.fn, p)
                    reach: set[StepKind] = set()
                    if src and taint(frame.fn, src).intersection(names):
                        reach.add(frame.param_kinds.get(p) or StepKind.ABSENT)
                    if taint(frame.fn, {"self." + p}).intersection(names):
                        reach.add(frame.attr_kinds.get(p) or frame.param_kinds.get(p) or StepKind.ABSENT)
                    if reach:
                        kind = reach.pop() if len(reach) == 1 else StepKind.UNKNOWN
                        if kind is StepKind.VARYING:
                            kind = StepKind.CONSTANT  # varying would have matched above
                        break
            position = step = None
            if kind is None:
                position = self._fixed_position(frame, sub)
                if position is None:
                    continue
                kind = StepKind.CONSTANT  # the same entry at every step, whatever the step
                step = self._arriving(frame)
            label = ".".join(sub.container)
            hop = self.hop(frame.key, sub.line, f"selects {label}[{sub.index.text}]")
            result.selections.append(LoopSelection(frame.model_class, kind, hops + (hop,), label, frame.entry_method,
                                                   frame.ctx, position, step))

    def _arriving(self, frame: _Frame) -> StepKind:
        """What the function of ``frame`` receives for the first threaded parameter."""
        p = self.params[0]
        if p in frame.varying or "self." + p in frame.varying:
            return StepKind.VARYING
        return frame.param_kinds.get(p) or frame.attr_kinds.get(p) or StepKind.ABSENT

    def _fixed_position(self, frame: _Frame, sub: SubscriptFact) -> int | None:
        """The position ``self.<attr>[<constant>]`` reads in a container the class builds from
        a literal (None: another index, a container of unknown keys, or a key it lacks)."""
        if frame.ctx is None or len(sub.container) != 2 or not (sub.index.constant and sub.index.has_literal):
            return None
        found = self.types.literal_container(frame.ctx, sub.container[1])
        return found.position(sub.index.literal) if found is not None else None

    def entry_groups(self, result: LoopResult, param: str) -> list[EntryGroup]:
        """Entries of one loop grouped by the call site that enters the draft model.

        A group's kind is what that call site hands over for ``param`` to the callees
        that can take it; groups no callee can take the parameter in are left out.
        """
        grouped: dict[tuple[str, int, str], list[LoopEntry]] = {}
        for e in result.entries:
            if e.param != param or not e.accepts:
                continue
            fn = self.index.function(e.callee)
            if fn is None:
                continue
            if param not in fn.param_names and self.flow.selects(e.callee, e.model_class, param) is None:
                continue
            grouped.setdefault((e.call_hop.path, e.call_hop.line, e.method), []).append(e)
        out = []
        for k in sorted(grouped):
            entries = grouped[k]
            kinds = frozenset(e.kind for e in entries)
            kind = next(s for s in KIND_ORDER if s in kinds or s is StepKind.ABSENT)
            out.append(EntryGroup(entries[0], kind, kinds, frozenset(e.model_class for e in entries)))
        return out
