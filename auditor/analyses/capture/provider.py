"""The capture provider: holds the capture analysis's parts and answers for them (rule
MTP007, ``layers`` and the runtime plan ask it)."""

from __future__ import annotations

from ...facts.extract import CallFact, FunctionFact
from ...index.index import ClassKey, FuncKey
from ...model.findings import Hop
from ..base import Analyses, Provider
from ..calls import CallProvider
from ..loops import LoopProvider, LoopResult
from ..types import TypeProvider
from .compiled import Compilation
from .frozen import Freezing
from .graphs import GraphFinder
from .guards import GuardTexts
from .installs import Installer
from .model import CaptureAnswers, CompiledClass, FrozenStep, GraphWrapper, Installation, LoopCapture


class CaptureProvider(Provider):
    dependencies = (TypeProvider, CallProvider, LoopProvider)

    def __init__(self, analyses: Analyses) -> None:
        super().__init__(analyses)
        self.types = self.dep(TypeProvider)
        self.calls = self.dep(CallProvider)
        self.loops = self.dep(LoopProvider)
        self.graph_finder = GraphFinder(self)
        self.installer = Installer(self)
        self.guard_texts = GuardTexts(self)
        self.compilation = Compilation(self)
        self.freezing = Freezing(self)

    # -- loading ---------------------------------------------------------
    def prepare(self) -> None:
        """Load the files that define graph wrappers and those that install them, and
        compute every result (resolution may load files only before the freeze)."""
        self.graph_finder.load()
        # Callers of an installer method are looked for among the loaded files (the
        # speculators whose draft loops matter are loaded already): no third pass.
        self.frozen_steps()
        self.loop_captures()

    def answers(self) -> CaptureAnswers:
        """The answers found so far that depend on the files loaded when they were found."""
        g, c = self.graph_finder, self.compilation
        return CaptureAnswers(
            list(g._capture_files) if g._capture_files is not None else None,
            list(g._wrappers.items()) if g._wrappers is not None else None,
            list(self.installer._installations) if self.installer._installations is not None else None,
            list(c._loop_captures) if c._loop_captures is not None else None,
            list(c._compiled.items()), [(f, ctx, hop) for (f, ctx), hop in g._captures.items()])

    def restore(self, answers: CaptureAnswers) -> None:
        """Take :meth:`answers` of a scan of the same files (:mod:`auditor.engine.prepared`)."""
        g, c = self.graph_finder, self.compilation
        g._capture_files = list(answers.capture_files) if answers.capture_files is not None else None
        g._wrappers = dict(answers.wrappers) if answers.wrappers is not None else None
        self.installer._installations = list(answers.installations) if answers.installations is not None else None
        c._loop_captures = list(answers.loop_captures) if answers.loop_captures is not None else None
        c._compiled = dict(answers.compiled)
        g._captures = {(f, ctx): hop for f, ctx, hop in answers.captures}

    # -- what rule MTP007, `layers` and the runtime plan ask --------------
    def captures(self, func: FuncKey, ctx: ClassKey | None) -> Hop | None:
        return self.graph_finder.captures(func, ctx)

    def wrappers(self) -> dict[ClassKey, GraphWrapper]:
        return self.graph_finder.wrappers()

    def installations(self) -> list[Installation]:
        return self.installer.installations()

    def guards(self, fkey: FuncKey, fn: FunctionFact, ctx: ClassKey | None, call: CallFact) -> tuple[str, ...]:
        return self.guard_texts.guards(fkey, fn, ctx, call)

    def compiled(self, cls: ClassKey) -> CompiledClass | None:
        return self.compilation.compiled(cls)

    def loop_captures(self) -> list[LoopCapture]:
        return self.compilation.loop_captures()

    def frozen_steps(self) -> list[FrozenStep]:
        return self.freezing.frozen_steps()

    def frozen_in(self, result: LoopResult, root: ClassKey | None) -> list[FrozenStep]:
        return self.freezing.frozen_in(result, root)
