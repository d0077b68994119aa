"""The base of the dispatch analysis's parts: each part answers one concern and reaches the
others through the provider that holds them all (``self.provider.<part>``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ...common.config import Config
from ...index.index import Index
from ..base import Limits
from ..capture import CaptureProvider
from ..partial_eval import Evaluator, Value
from ..loops import LoopProvider
from ..reachability import ReachabilityProvider
from ..registry import RegistryProvider
from ..types import TypeProvider
from .syntax import BodiesWorld

if TYPE_CHECKING:
    from .provider import DispatchProvider


class DispatchPart:
    """Shares the provider's index, configuration, limits and the providers it depends on."""

    def __init__(self, provider: DispatchProvider) -> None:
        self.provider = provider
        self.index: Index = provider.index
        self.config: Config = provider.config
        self.limits: Limits = provider.limits
        self.params: list[str] = provider.params
        self.roles: dict[str, str] = provider.roles
        self.types: TypeProvider = provider.types
        self.registry: RegistryProvider = provider.registry
        self.loops: LoopProvider = provider.loops
        self.reach: ReachabilityProvider = provider.reach
        self.capture: CaptureProvider = provider.capture

    def evaluator(self, hit: Callable[[str], None] | None = None,
                  environ: dict[str, str] | None = None, loaded: Value | None = None) -> Evaluator:
        """A fresh partial evaluator over the tree (its pure methods and sub-config getters as
        configured; a callee's statements extracted from its file when the facts keep none; a
        drafter built without running its constructor), whose cuts count against the provider's
        limits (or go to ``hit``); ``environ``: the process environment, when given; ``loaded``:
        what a call of a configured loader (``loaders``) returns, when pinned (the draft model)."""
        world = BodiesWorld(self.provider.bodies, self.config.pure_methods, self.config.sub_config_getters,
                            self.config.head_free_bases, self.provider.location.is_drafter)
        world.environ_vars = environ
        world.env_modules = frozenset(self.config.env_modules)
        world.env_table = self.provider.env_tables.values
        world.object_factories = frozenset(self.config.object_factories)
        if loaded is not None:
            world.pinned = (frozenset(self.config.loaders), loaded)
        return Evaluator(world, hit or self.limits.hit)
