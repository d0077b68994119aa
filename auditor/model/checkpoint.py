"""What a model checkpoint carries of its MTP layers (read by source/checkpoint.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

GB = 10**9


@dataclass(frozen=True)
class MtpLayer:
    index: int
    prefix: str  # e.g. "model.layers.61" or "mtp.layers.0"
    bytes: int
    tensors: int


@dataclass(frozen=True)
class Checkpoint:
    path: str
    files: list[str]
    total_bytes: int
    num_hidden_layers: int | None
    layers: list[MtpLayer] = field(default_factory=list)
    shared_mtp_bytes: int = 0  # MTP-module tensors outside any one layer (mtp.fc, mtp.norm, ...)
