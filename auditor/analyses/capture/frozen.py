"""Frozen steps: a draft loop's per-step value reaches a layer selection only through a
captured region whose key leaves it out, or through a compiled ``forward`` that does not
mark it dynamic."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...facts.extract import CallFact
from ...index.index import ClassKey
from ...model.findings import Hop
from ..loops import FORWARD_METHODS, LoopEntry, LoopResult, LoopSelection, StepKind
from .model import FreezeKind, FrozenStep, Installation
from .part import CapturePart

if TYPE_CHECKING:
    from .provider import CaptureProvider


class Freezing(CapturePart):
    def __init__(self, provider: CaptureProvider) -> None:
        super().__init__(provider)
        self._frozen: list[FrozenStep] | None = None

    def _call_at(self, hop: Hop, callee: str | None) -> CallFact | None:
        fn = self.index.function((hop.path, hop.function))
        if fn is None:
            return None
        at = [c for c in fn.calls if c.line == hop.line and c.func]
        if callee is not None:
            named = [c for c in at if c.func and c.func[-1] == callee]
            if named:
                return named[0]
        return at[0] if len(at) == 1 else (at[0] if at else None)

    def _receiver_path(self, entry: LoopEntry) -> tuple[str, ...] | None:
        """The attribute path, from ``self`` of the loop's class, of the object each hop
        calls into, up to the function that makes the entry call."""
        path: tuple[str, ...] = ()
        for hop in entry.hops[1:-1]:
            callee = hop.note.rpartition(".")[2] if hop.note.startswith("calls ") else None
            call = self._call_at(hop, callee)
            fn = self.index.function((hop.path, hop.function))
            if call is None or fn is None or not call.func:
                return None
            if call.func[0] == "super()":
                continue
            recv = self.provider.installer.self_path(fn, call.func[:-1]) if len(call.func) > 1 else None
            if recv is None:
                return None
            path += recv
        return path

    @staticmethod
    def _step_signature(call: CallFact, param: str) -> set[str]:
        sig = {f"{param}={kw.value.text}" for kw in call.keywords if kw.name == param}
        sig |= {f"**{d.text}" for d in call.star_kwargs}
        return sig

    def _through(self, result: LoopResult, entry: LoopEntry) -> list[tuple[tuple[str, ...], Hop]]:
        """Object calls that carry the entry's step value: the entry call itself when it
        calls an object (not a named method), and calls in the same function that pass
        the step through the same argument (``self.runner(**inputs)`` beside
        ``model(**inputs)``). Each with its attribute path from the loop's ``self``."""
        base = self._receiver_path(entry)
        if base is None:
            return []
        hop = entry.call_hop
        fn = self.index.function((hop.path, hop.function))
        if fn is None:
            return []
        entry_call = self._call_at(hop, None if entry.method in FORWARD_METHODS else entry.method)
        if entry_call is None:
            return []
        out: list[tuple[tuple[str, ...], Hop]] = []
        if entry.method in FORWARD_METHODS and entry_call.func and entry_call.func[-1] != entry.method:
            slot = self.provider.installer.self_path(fn, entry_call.func)
            if slot:
                out.append((base + slot, hop))
        sig = self._step_signature(entry_call, entry.param)
        if sig:
            for call in fn.calls:
                if call is entry_call or not call.func or not sig & self._step_signature(call, entry.param):
                    continue
                slot = self.provider.installer.self_path(fn, call.func)
                if slot:
                    out.append((base + slot, self.hop((hop.path, hop.function), call.line, f"calls {'.'.join(call.func)}")))
        return out

    def _related(self, a: ClassKey | None, b: ClassKey | None) -> bool:
        if a is None or b is None:
            return False
        return a == b or a in self.index.mro(b) or b in self.index.mro(a)

    def _rebased(self, root: ClassKey | None, slot: tuple[str, ...]) -> list[tuple[ClassKey, str]]:
        if root is None or not slot:
            return []
        if len(slot) == 1:
            return [(root, slot[0])]
        objs = [o for o, _ in self.calls.objects_of_chain(root, slot[:-1], None)]
        return [(o, slot[-1]) for o in objs]

    def _installed_at(self, root: ClassKey | None, slot: tuple[str, ...]) -> list[Installation]:
        """Installations stored where an object call goes: the same attribute path from a
        related ``self`` if any; else the same attribute on an object of a related class."""
        insts = self.provider.installer.installations()
        exact = [i for i in insts if i.slot == slot and self._related(i.root, root)]
        if exact:
            return exact
        mine = self._rebased(root, slot)
        out = []
        for i in insts:
            theirs = self._rebased(i.root, i.slot)
            if any(a == b and self._related(o, p) for o, a in mine for p, b in theirs):
                out.append(i)
        return out

    def frozen_in(self, result: LoopResult, root: ClassKey | None) -> list[FrozenStep]:
        """Frozen steps of one draft loop (explored with ``self`` of ``root``, e.g. the drafter
        a plan builds): what ``layers --engine-mode compiled`` applies to a plan."""
        out: list[FrozenStep] = []
        for param in self.params:
            out.extend(self._graph_frozen(result, root, param))
            out.extend(self._compile_frozen(result, param))
        return out

    def frozen_steps(self) -> list[FrozenStep]:
        if self._frozen is None:
            out: list[FrozenStep] = []
            for result in self.loops.loop_results():
                root = self.types.defining_class(result.func)
                for param in self.params:
                    out.extend(self._graph_frozen(result, root, param))
                    out.extend(self._compile_frozen(result, param))
            self._frozen = out
        return self._frozen

    def _varying_selection(self, result: LoopResult, entry: LoopEntry) -> LoopSelection | None:
        for s in result.selections:
            if s.model_class == entry.model_class and s.method == entry.method and s.kind is StepKind.VARYING:
                return s
        return None

    def _outside(self, result: LoopResult, model_class: ClassKey, method: str) -> tuple[str, ...]:
        return tuple(sorted({s.method for s in result.selections
                             if s.model_class == model_class and s.kind is StepKind.VARYING and s.method != method}))

    def _graph_frozen(self, result: LoopResult, root: ClassKey | None, param: str) -> list[FrozenStep]:
        out: list[FrozenStep] = []
        seen: set[tuple[Installation, ClassKey]] = set()
        for entry in result.entries:
            if entry.param != param or entry.kind is not StepKind.VARYING or not entry.accepts:
                continue
            selection = self._varying_selection(result, entry)
            if selection is None:
                continue
            sel = selection.hops
            for slot, call_hop in self._through(result, entry):
                for inst in self._installed_at(root, slot):
                    if param in inst.key_includes or (inst, entry.model_class) in seen:
                        continue
                    seen.add((inst, entry.model_class))
                    cut = next((i for i, h in enumerate(sel) if (h.path, h.line) == (entry.call_hop.path, entry.call_hop.line)), None)
                    hops = sel if cut is None else sel[:cut] + (call_hop,) + sel[cut + 1:]
                    out.append(FrozenStep(FreezeKind.GRAPH, param, result.func, result.loop.line, entry.model_class,
                                          entry.method, selection.container, hops, installation=inst,
                                          outside=self._outside(result, entry.model_class, entry.method)))
        return out

    def _compile_frozen(self, result: LoopResult, param: str) -> list[FrozenStep]:
        out: list[FrozenStep] = []
        seen: set[tuple[ClassKey, ClassKey]] = set()
        for s in result.selections:
            if s.kind is not StepKind.VARYING or s.method not in FORWARD_METHODS:
                continue
            if not any(e.param == param and e.model_class == s.model_class and e.kind is StepKind.VARYING
                       for e in result.entries):
                continue
            for hop in s.hops[1:]:
                if hop.function.rpartition(".")[2] != "forward":
                    continue
                owner = self.types.defining_class((hop.path, hop.function))
                if owner is None:
                    continue
                candidates = [owner]
                if owner in self.index.mro(s.model_class):
                    candidates.insert(0, s.model_class)
                comp = next((c for c in (self.provider.compilation.compiled(k) for k in candidates) if c is not None), None)
                if comp is None or comp.dynamic(param):
                    continue
                if (comp.cls, s.model_class) not in seen:
                    seen.add((comp.cls, s.model_class))
                    out.append(FrozenStep(FreezeKind.COMPILE, param, result.func, result.loop.line, s.model_class,
                                          s.method, s.container, s.hops, compiled=comp,
                                          outside=self._outside(result, s.model_class, s.method)))
                break
        return out
