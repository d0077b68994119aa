"""A drafter's checks while it loads the draft model (issue 18: ``use_local_argmax_reduction``
with a draft model that has no ``get_top_tokens`` is rejected by ``load_model``:
``if self.use_local_argmax_reduction: if not hasattr(self.model, "get_top_tokens"): raise
ValueError(...)``).

The guarded raises of the drafter's load methods (``drafter-load-methods``, vLLM's
``load_model``, and the drafter's methods they call unconditionally on ``self``) are evaluated over the configuration, as the speculative config's validation
is: a raise whose every enclosing test is decided the way that reaches it rejects the
configuration, with vLLM's message as written and file:line; an undecided test leaves the
plan. What the tests read of the drafter (``self.<attr>``) is its attribute's single
definition in the constructors that run (the most derived ``__init__``, and its base's while
each calls ``super().__init__``), evaluated over the configuration; the attribute holding the
model a registry loader built (``TypeProvider.attr_types`` gives ``REGISTRY``) is the plan's
draft model class.

Of that model, only presence is modelled, and only for what the test asks of it: a name is
present when the class (with its bases) defines it as a method or class attribute or assigns
``self.<name>``; it is absent only when it is a head method (``head-methods``: vLLM's model
interface, which torch's ``nn.Module`` does not define) and every base of the class outside
the scanned tree is one that defines none (``head-free-bases``: ``nn.Module``, ``Protocol``,
...); anything else is unknown.
"""

from __future__ import annotations

import copy

from ...facts.extract import FunctionFact, GuardedRaise, PAttr, PCall, PConst, PExpr, PName
from ...index.index import ClassKey, FuncKey
from ..partial_eval import Evaluator, Obj, Path, Unknown, Value, truth
from ..types import REGISTRY
from .constructors import constructor_path
from .outcomes import Rejection
from .part import DispatchPart
from .syntax import expr_nodes, self_reads


class LoadChecks(DispatchPart):
    def rejections(self, drafter: ClassKey, model: ClassKey | None, root: Obj) -> list[Rejection]:
        """The raises of ``drafter``'s load methods that this configuration reaches."""
        out: list[Rejection] = []
        ev = self.evaluator()
        for key, fn in self._load_methods(drafter):
            for r in fn.raises:
                attrs = list(dict.fromkeys(a for g in r.guards for a in self_reads(g)))
                fields = {a: self.attr_value(ev, drafter, a, r.guards, model, root) for a in attrs}
                p = Path({"self": Obj("self", fields)})
                if self._reached(ev, key, p, fn, r):
                    out.append(Rejection(key[0], r.line, key[1], r.exc, "load"))
        return out

    def _load_methods(self, drafter: ClassKey) -> list[tuple[FuncKey, FunctionFact]]:
        """The load methods, and the methods of the drafter they call unconditionally on
        ``self`` (outside any ``if`` arm or loop: a raise there is reached when its own
        tests are), transitively, each resolved in the drafter (an override wins)."""
        todo = list(self.config.drafter_load_methods)
        seen: set[str] = set()
        out: list[tuple[FuncKey, FunctionFact]] = []
        while todo:
            name = todo.pop(0)
            if name in seen:
                continue
            seen.add(name)
            found = self.index.method(drafter, name)
            if found is None:
                continue
            owner, fn = found
            out.append(((owner[0], f"{owner[1]}.{name}"), fn))
            todo += [c.func[1] for c in fn.calls
                     if c.func and len(c.func) == 2 and c.func[0] == "self" and not c.branches and not c.loops]
        return out

    @staticmethod
    def _reached(ev: Evaluator, key: FuncKey, p: Path, fn: FunctionFact, r: GuardedRaise) -> bool:
        for i, (g, neg) in enumerate(zip(r.guards, r.negated)):
            t = truth(ev.eval(g, Path(copy.deepcopy(p.env)), key))
            if t is None and neg and other_arm_raises(fn, r, i):
                continue  # ``if g: raise ...`` before: rejected by one of the two
            if t is None or t == neg:
                return False
        return True

    def attr_value(self, ev: Evaluator, drafter: ClassKey, attr: str, guards: tuple[PExpr, ...], model: ClassKey | None,
              root: Obj) -> Value:
        if REGISTRY in self.types.attr_types(drafter, attr):
            return self._model(model, _asked(attr, guards)) if model is not None else Unknown(f"self.{attr}")
        for key, fn in self.constructors(drafter):
            v = fn.attr_defs.get(attr)
            if v is None:
                continue
            env: dict[str, Value] = {p: root for p in fn.param_names if p == self.roles["root"]}
            p = constructor_path(ev, key, fn, env, v, fn.end_line + 1)
            return ev.eval(v, p, key)
        return Unknown(f"self.{attr}")

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

    def _model(self, model: ClassKey, asked: list[str]) -> Obj:
        """The draft model as far as presence goes: a field per name the test asks of it."""
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
            if n in present:
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


def other_arm_raises(fn: FunctionFact, r: GuardedRaise, i: int) -> bool:
    """Another raise of ``fn`` is reached when ``r``'s ``i``-th (negated) test holds, under the
    same outer tests (``if c: raise A`` then ``raise B``: one of the two runs whatever ``c``)."""
    want_guards, want_neg = r.guards[:i + 1], r.negated[:i] + (False,)
    return any(o is not r and o.guards == want_guards and o.negated == want_neg for o in fn.raises)
