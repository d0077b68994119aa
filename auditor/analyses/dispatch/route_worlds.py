"""The configuration a route is run over (issue 18): the speculative config of one method for a
draft config, standing for every configuration a user may give (K, the options: unknown), with
the fields only its construction sets (``init=False``) as its first statements decide them, and
the raise that rejects every such configuration (then the route is none)."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

from ...index.index import ClassKey
from ..partial_eval import Obj, Unknown, Value
from .declared import draft_model_config
from .outcomes import Rejection
from .part import DispatchPart

if TYPE_CHECKING:
    from .provider import DispatchProvider


class RouteWorlds(DispatchPart):
    def __init__(self, provider: "DispatchProvider") -> None:
        super().__init__(provider)
        self._internal_memo: dict[tuple[str, ClassKey | None], tuple[int, dict[str, Value]]] = {}
        # (method, what the draft class declares) -> (files held, the rejection of those routes)
        self._rejection_memo: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[int, Rejection | None]] = {}

    def open_world(self, method: str, hf: Obj) -> dict[str, Obj]:
        """The configuration a route is run over: the speculative config of ``method`` for a
        draft config ``hf`` (what it does not fix unknown), any K and options, with the fields its
        construction's first statements decide that no user gives (``init=False``) and the
        draft class's declared attributes on every platform alike."""
        r = self.roles
        draft = draft_model_config(self, hf, None)
        spec_cls = self.provider.location.spec_config_class()
        spec = Obj(r["speculative"], {r["method"]: method, r["draft"]: draft}, cls=spec_cls)
        for name, value in self._internal_fields(method, spec_cls).items():
            spec.fields.setdefault(name, value)
        return {"speculative": spec, "root": Obj(r["root"], roles={r["speculative"]: spec})}

    def route_rejection(self, method: str, world: dict[str, Obj]) -> Rejection | None:
        """The raise that rejects every configuration a route stands for (its :meth:`open_world`),
        as the construction run derives it, over what the draft model class declares
        (``draft-class-attrs``) and nothing else of the draft config (its architecture and fields
        unknown: a raise on every path then holds for every architecture declaring the same, one
        run for them all): a route loads a draft model, so the speculative config names a draft
        checkpoint (the method's default or the user's: some path, not None). None when some
        configuration passes, or the run cannot tell."""
        r = self.roles
        draft = world["speculative"].fields.get(r["draft"])
        declared = {a: draft.fields[a] for a in self.config.draft_class_attrs
                    if isinstance(draft, Obj) and a in draft.fields}
        key = (method, tuple(sorted((a, repr(v)) for a, v in declared.items())))
        held = len(self.index.facts)
        memo = self._rejection_memo.get(key)
        if memo is not None and (memo[0] == held or self.index.frozen):
            return memo[1]
        spec = copy.deepcopy(world["speculative"])
        spec.fields[r["draft"]] = Obj(r["draft"], {r["hf"]: Obj(r["hf"]), **copy.deepcopy(declared)})
        spec = self._any_given(spec)
        spec.fields[r.get("draft_name", "model")] = Unknown("the draft checkpoint's path (a route loads a draft)",
                                                           known_truth=True)
        # A cut there only keeps the route (no rejection derived): nothing the scan reports is
        # missing, so it is no search limit the scan's note counts.
        found = self.provider.spec_fields.construction(spec, method, on_limit=lambda _name: None).rejection
        self._rejection_memo[key] = (held, found)
        return found

    def _any_given(self, spec: Obj) -> Obj:
        """``spec`` standing for every configuration a user may give: each field of its class a
        user can set (not ``init=False``) and the route does not fix is unknown, not its default
        (K, the options)."""
        fields = self.provider.spec_fields
        internal = fields.internal_fields(spec.cls)
        for name in fields.init_fields(spec.cls):
            if name not in spec.fields and name not in internal:
                spec.fields[name] = Unknown(f"{name} (whatever a user gives)")
        return spec

    def _internal_fields(self, method: str, spec_cls: ClassKey | None) -> dict[str, Value]:
        """The fields of a route's configuration only the construction sets (``init=False``: a
        route stands for every option a user may give), as its first statements decide them for
        ``method`` over a draft config nothing is known of (so for every architecture alike)."""
        held = len(self.index.facts)
        memo = self._internal_memo.get((method, spec_cls))
        if memo is not None and memo[0] == held:
            return memo[1]
        r = self.roles
        internal = self.provider.spec_fields.internal_fields(spec_cls)
        found: dict[str, Value] = {}
        if internal:  # (no such field: nothing to run)
            spec = self._any_given(Obj(r["speculative"], {r["method"]: method,
                                                          r["draft"]: Obj(r["draft"], {r["hf"]: Obj(r["hf"])})},
                                       cls=spec_cls))
            found = {k: v for k, v in self.provider.spec_fields.construction(spec, method, rejection=False).fields.items()
                     if k in internal}
        self._internal_memo[(method, spec_cls)] = (held, found)
        return found

