"""Compilation and whole-loop capture: the compile decorator on a class or its nearest base,
and draft-loop methods handed whole to a function that captures a graph."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...facts.extract import FunctionFact
from ...index.index import ClassKey
from .model import CompiledClass, LoopCapture
from .part import CapturePart

if TYPE_CHECKING:
    from .provider import CaptureProvider


class Compilation(CapturePart):
    def __init__(self, provider: CaptureProvider) -> None:
        super().__init__(provider)
        self._loop_captures: list[LoopCapture] | None = None
        self._compiled: dict[ClassKey, CompiledClass | None] = {}
        counts = "|".join(re.escape(c) for c in self.config.draft_loop_counts)
        self._count_re = re.compile(rf"\b(?:{counts})\b")

    def compiled(self, cls: ClassKey) -> CompiledClass | None:
        """The compile decorator on ``cls`` or the nearest base that has one."""
        if cls in self._compiled:
            return self._compiled[cls]
        found: CompiledClass | None = None
        for c in self.index.mro(cls):
            cf = self.index.class_fact(c)
            if cf is None:
                continue
            for i, d in enumerate(cf.decorator_facts):
                if not d.func or d.func[-1] not in self.config.compile_decorators:
                    continue
                dynamic: tuple[str, ...] | None = None
                for arg in self.config.compile_dynamic_args:
                    if arg in d.dict_keys:
                        dynamic = (dynamic or ()) + d.dict_keys[arg]
                condition = next((kw.value.text for kw in d.keywords if kw.name in self.config.compile_condition_args), None)
                # The name, not the full text (shortened in facts): the arguments that
                # matter are reported separately.
                text = "@" + ".".join(d.func) + ("(…)" if d.called and d.keywords else "")
                found = CompiledClass(c, d.line, text, dynamic, condition)
                break
            if found is not None:
                break
        self._compiled[cls] = found
        return found

    def _draft_loop_line(self, fn: FunctionFact) -> int | None:
        for lp in fn.loops:
            if "range" in lp.iter.text and self._count_re.search(lp.iter.text):
                return lp.line
        return None

    def loop_captures(self) -> list[LoopCapture]:
        """Methods holding a draft loop that are handed (as ``self.m``) to a function whose
        call path captures a graph: the whole loop is recorded as one graph."""
        if self._loop_captures is None:
            out: list[LoopCapture] = []
            functions = self.provider.graph_finder.functions()
            # Names of methods that hold a draft loop: only these can be handed over whole.
            loop_methods = {k[1].rpartition(".")[2] for k, fn, ctx in functions
                            if ctx is not None and self._draft_loop_line(fn) is not None}
            for fkey, fn, ctx in functions:
                if ctx is None:
                    continue
                for ci, call in enumerate(fn.calls):
                    handed = [a for a in [*call.args, *(k.value for k in call.keywords)]
                              if a.chain and len(a.chain) == 2 and a.chain[0] == "self" and a.chain[1] in loop_methods]
                    if not handed:
                        continue
                    for a in handed:
                        assert a.chain is not None
                        found = self.index.method(ctx, a.chain[1])
                        if found is None:
                            continue
                        loop_line = self._draft_loop_line(found[1])
                        if loop_line is None:
                            continue
                        for tgt in self.calls.targets(fkey, fn, ctx, ci):
                            cap = self.provider.graph_finder.captures(tgt.func, tgt.ctx)
                            if cap is not None:
                                captured = (found[0][0], f"{found[0][1]}.{a.chain[1]}")
                                out.append(LoopCapture(fkey, call.line, captured, tgt.func, cap, loop_line,
                                                       self.provider.guard_texts.guards(fkey, fn, ctx, call)))
                                break
            self._loop_captures = sorted(set(out), key=lambda c: (c.site, c.line, c.captured))
        return self._loop_captures
