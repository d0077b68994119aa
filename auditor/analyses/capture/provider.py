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
from .model import CompiledClass, FrozenStep, GraphWrapper, Installation, LoopCapture


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
