"""The one render dispatcher: a report kind's renderers by format name."""

from __future__ import annotations

from typing import Callable, Mapping, TypeVar

T = TypeVar("T")


def render_as(renderers: Mapping[str, Callable[[T], str]], doc: T, fmt: str, kind: str) -> str:
    """``doc`` rendered by ``renderers[fmt]``; an unknown format is a ``ValueError`` naming ``kind``."""
    renderer = renderers.get(fmt)
    if renderer is None:
        raise ValueError(f"unknown {kind} format {fmt!r}")
    return renderer(doc)
