"""Static facts rule MTP006 needs: factory branches guarded by a predicate that reads a
draft hf-config field with a default (gates), and the branches of the config-override
functions that pick draft architectures (families)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...facts.extract import FunctionFact, PAttr, PBool, PCall, PCompare, PConst, PDict, PExpr, PName, PSubscript, SAssign, SExpr, SIf, SReturn, Stmt
from ...index.index import ClassKey
from .model import Gate, Family
from .syntax import walk, stmt_exprs, subexprs, calls_in, strings
from .part import DispatchPart

if TYPE_CHECKING:
    from .provider import DispatchProvider


class GateFacts(DispatchPart):
    def __init__(self, provider: DispatchProvider) -> None:
        super().__init__(provider)
        self._gates: list[Gate] | None = None

    def gates(self) -> list[Gate]:
        """Factory branches guarded by a predicate method of the speculative config that
        reads a draft hf-config field with a default."""
        if self._gates is not None:
            return self._gates
        out: list[Gate] = []
        spec_cls = self.provider.location.spec_config_class()
        for _runner, keys in self.provider.location.factories().items():
            for fkey in keys:
                fn = self.index.function(fkey)
                if fn is None or spec_cls is None:
                    continue
                for s in walk(fn.body):
                    if not isinstance(s, SIf):
                        continue
                    built = [c for c in self._direct_builds(fkey[0], s.body) if self.provider.location.is_drafter(c)]
                    if not built:
                        continue
                    for call in calls_in(s.test):
                        if not isinstance(call.func, PAttr) or not self.is_role(call.func.value, "speculative"):
                            continue
                        found = self.index.method(spec_cls, call.func.attr)
                        if found is None:
                            continue
                        owner, pred = found
                        pkey = (owner[0], f"{owner[1]}.{call.func.attr}")
                        for fld, default, line in self._defaulted_reads(pred):
                            for cls in built:
                                out.append(Gate(fkey, s.line, s.text, pkey, fld, default, line, cls))
        self._gates = sorted(set(out), key=lambda g: (g.factory, g.line, g.field, g.proposer))
        return self._gates

    def count_gates(self) -> list[Gate]:
        """Gates whose field sizes the MTP layers of some draft model (a layer count, not
        e.g. ``model_type``)."""
        counts = {f for c in self.registry.model_classes() for f in self.reach.layer_count_fields(c)}
        return [g for g in self.gates() if g.field in counts]

    def _direct_builds(self, path: str, body: tuple[Stmt, ...]) -> list[ClassKey]:
        out = []
        for s in body:
            value = s.value if isinstance(s, (SReturn, SAssign)) else None
            if isinstance(value, PCall):
                cls = self.provider.location.resolve_class(path, value.func)
                if cls is not None:
                    out.append(cls)
        return out

    def is_role(self, e: PExpr, role: str) -> bool:
        name = self.roles.get(role)
        return (isinstance(e, PName) and e.id == name) or (isinstance(e, PAttr) and e.attr == name)

    def _defaulted_reads(self, fn: FunctionFact) -> list[tuple[str, str, int]]:
        """``getattr(<...>.hf_config, "F", default)`` in a predicate body: (F, default, line)."""
        out = []
        for s in walk(fn.body):
            for e in stmt_exprs(s):
                for call in calls_in(e):
                    if (isinstance(call.func, PName) and call.func.id == "getattr" and len(call.args) == 3
                            and isinstance(call.args[1], PConst) and isinstance(call.args[1].value, str)
                            and self.is_role(call.args[0], "hf")):
                        d = call.args[2]
                        out.append((call.args[1].value, repr(d.value) if isinstance(d, PConst) else "…", s.line))
        return out


class OverrideFamilies(DispatchPart):
    def __init__(self, provider: DispatchProvider) -> None:
        super().__init__(provider)
        self._families: list[Family] | None = None
        # per architecture: the override functions are located once, so this never changes
        self._arch_literals: dict[str, list[tuple[tuple[str, Any], ...]]] = {}
        self._branch_memo: list[tuple[tuple[tuple[str, Any], ...], list[str]]] | None = None

    def families(self) -> list[Family]:
        if self._families is not None:
            return self._families
        out: list[Family] = []
        for okey in self.provider.location.overrides():
            fn = self.index.function(okey)
            if fn is None:
                continue
            for s in walk(fn.body):
                if isinstance(s, SIf):
                    archs, sets = self._family_writes(s.body)
                    if archs:
                        lits = self._guard_literals(s.test) + self._literal_writes(s.body)
                        out.append(Family(okey, s.line, s.text, tuple(archs), frozenset(sets), tuple(lits)))
        self._families = out
        return out

    def _family_writes(self, body: tuple[Stmt, ...]) -> tuple[list[str], set[str]]:
        archs: list[str] = []
        sets: set[str] = set()
        fields = set(self.config.override_field)
        for s in walk(body):
            if isinstance(s, SExpr) and isinstance(s.value, PCall) and isinstance(s.value.func, PAttr) \
                    and s.value.func.attr == "update" and s.value.args and isinstance(s.value.args[0], PDict):
                d = s.value.args[0]
                for k, v in zip(d.keys, d.values):
                    if isinstance(k, PConst) and isinstance(k.value, str):
                        sets.add(k.value)
                        if k.value in fields:
                            archs.extend(strings(v))
            elif isinstance(s, SAssign):
                for t in s.targets:
                    if isinstance(t, PAttr):
                        sets.add(t.attr)
                    elif isinstance(t, PSubscript) and isinstance(t.index, PConst) and isinstance(t.index.value, str):
                        sets.add(t.index.value)
                        if t.index.value in fields:
                            archs.extend(strings(s.value))
                if isinstance(s.value, PDict):
                    for k, v in zip(s.value.keys, s.value.values):
                        if isinstance(k, PConst) and isinstance(k.value, str):
                            sets.add(k.value)
                            if k.value in fields:
                                archs.extend(strings(v))
        return list(dict.fromkeys(archs)), sets

    def _guard_literals(self, test: PExpr) -> list[tuple[str, Any]]:
        """``hf_config.model_type == "x"`` in the family's guard: the draft config has it."""
        out: list[tuple[str, Any]] = []
        for sub in subexprs(test):
            if (isinstance(sub, PCompare) and sub.ops == ("==",) and isinstance(sub.left, PAttr)
                    and self.provider.gate_facts.is_role(sub.left.value, "hf") and isinstance(sub.comparators[0], PConst)):
                out.append((sub.left.attr, sub.comparators[0].value))
        return out if not isinstance(test, PBool) or test.op == "and" else []

    def _literal_writes(self, body: tuple[Stmt, ...]) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for s in body:  # this branch's own statements, not nested ones
            if isinstance(s, SAssign) and isinstance(s.value, PConst):
                out += [(t.attr, s.value.value) for t in s.targets if isinstance(t, PAttr) and self.provider.gate_facts.is_role(t.value, "hf")]
            elif isinstance(s, SExpr) and isinstance(s.value, PCall) and isinstance(s.value.func, PAttr) \
                    and s.value.func.attr == "update" and self.provider.gate_facts.is_role(s.value.func.value, "hf") \
                    and s.value.args and isinstance(s.value.args[0], PDict):
                d = s.value.args[0]
                out += [(k.value, v.value) for k, v in zip(d.keys, d.values)
                        if isinstance(k, PConst) and isinstance(k.value, str) and isinstance(v, PConst)
                        and k.value not in self.config.override_field]
        return out

    def family_fields(self, arch: str) -> dict[str, Any]:
        """What the override code sets, as literals, for the family that picks ``arch``."""
        out: dict[str, Any] = {}
        for fam in self.families():
            if arch in fam.architectures and len(fam.architectures) == 1:
                out.update(dict(fam.literal_writes))
        return out

    def arch_literals(self, arch: str) -> list[tuple[tuple[str, Any], ...]]:
        """Per override branch that picks ``arch``, the fields fixed as literals on the way
        there: what the enclosing branches and this one write, and what their guards compare
        with a literal (``model_type == "x"``). Empty when no branch picks it."""
        memo = self._arch_literals.get(arch)
        if memo is not None:
            return memo
        out = [fixed for fixed, archs in self._branches() if arch in archs]
        self._arch_literals[arch] = list(dict.fromkeys(out))
        return self._arch_literals[arch]

    def _branches(self) -> list[tuple[tuple[tuple[str, Any], ...], list[str]]]:
        """Every branch of the override functions, in order: the fields fixed as literals on
        the way there (see :meth:`arch_literals`) and the architectures it picks. Walked
        once, for every architecture (as the per-architecture answers, never changes)."""
        if self._branch_memo is not None:
            return self._branch_memo
        out: list[tuple[tuple[tuple[str, Any], ...], list[str]]] = []

        def visit(stmts: tuple[Stmt, ...], inherited: dict[str, Any]) -> None:
            for s in stmts:
                if not isinstance(s, SIf):
                    continue
                here = dict(inherited)
                here.update(self._guard_literals(s.test))
                here.update(self._literal_writes(s.body))
                archs, _ = self._family_writes(s.body)
                out.append((tuple(sorted(here.items())), archs))
                visit(s.body, here)
                visit(s.orelse, inherited)

        for okey in self.provider.location.overrides():
            fn = self.index.function(okey)
            if fn is not None:
                visit(fn.body, {})
        self._branch_memo = out
        return out

    def writes_override_field(self, body: tuple[Stmt, ...]) -> bool:
        fields = set(self.config.override_field)
        for s in walk(body):
            for e in stmt_exprs(s):
                for sub in subexprs(e):
                    if isinstance(sub, PDict) and any(isinstance(k, PConst) and k.value in fields for k in sub.keys):
                        return True
            if isinstance(s, SAssign) and any(
                (isinstance(t, PAttr) and t.attr in fields)
                or (isinstance(t, PSubscript) and isinstance(t.index, PConst) and t.index.value in fields)
                for t in s.targets
            ):
                return True
        return False
