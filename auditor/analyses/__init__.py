"""The engine's analyses, one provider module each (see :mod:`auditor.analyses.base`)."""

from .base import Analyses, FixpointMemo, Limits, Provider
from .callgraph import GraphProvider
from .capture import CaptureProvider, CompiledClass, FreezeKind, FrozenStep, GraphWrapper, Installation, KeyKind, LoopCapture
from .dispatch import DispatchProvider
from .calls import ArgSource, Binding, CallProvider, PassKind, Target
from .flow import FlowProvider, Selection
from .loops import EntryGroup, LoopEntry, LoopProvider, LoopResult, LoopSelection, StepKind
from .plugins import Patch, PluginProvider, Registration
from .reachability import ReachabilityProvider
from .registry import RegistryProvider
from .scope import ScopeProvider
from .types import MODULE_CONTAINERS, REGISTRY, Container, TypeProvider

__all__ = [
    "MODULE_CONTAINERS", "REGISTRY", "Analyses", "ArgSource", "Binding", "CallProvider", "Container", "DispatchProvider", "EntryGroup",
    "FixpointMemo", "FlowProvider", "GraphProvider", "Limits", "LoopEntry", "LoopProvider", "LoopResult",
    "LoopSelection", "PassKind", "Provider", "ReachabilityProvider", "RegistryProvider", "ScopeProvider", "Selection",
    "StepKind", "Target", "TypeProvider",
    # issue 12 (capture/compile)
    "CaptureProvider", "CompiledClass", "FreezeKind", "FrozenStep", "GraphWrapper", "Installation", "KeyKind", "LoopCapture",
    # issue 13 (plugins)
    "Patch", "PluginProvider", "Registration",
]
