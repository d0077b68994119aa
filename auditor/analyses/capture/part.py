"""The base of the capture analysis's parts: each answers one concern and reaches the
others through the provider that holds them (``self.provider.<part>``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common.config import Config
from ...index.index import FuncKey, Index
from ...model.findings import Hop
from ..base import Limits
from ..calls import CallProvider
from ..loops import LoopProvider
from ..types import TypeProvider

if TYPE_CHECKING:
    from .provider import CaptureProvider


class CapturePart:
    """Shares the provider's index, configuration, limits and the providers it depends on."""

    def __init__(self, provider: CaptureProvider) -> None:
        self.provider = provider
        self.index: Index = provider.index
        self.config: Config = provider.config
        self.limits: Limits = provider.limits
        self.params: list[str] = provider.params
        self.types: TypeProvider = provider.types
        self.calls: CallProvider = provider.calls
        self.loops: LoopProvider = provider.loops

    def hop(self, key: FuncKey, line: int, note: str) -> Hop:
        return Hop(key[0], line, key[1], note)
