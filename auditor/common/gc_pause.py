"""Pausing CPython's cyclic garbage collector around work that allocates a large, long-lived
heap (a scan, a ``layers`` question)."""

from __future__ import annotations

import functools
import gc
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def cyclic_gc_paused(func: F) -> F:
    """A scan allocates hundreds of thousands of small records (decoded facts, memo
    entries) and frees almost none of them before it ends, so CPython's cyclic collector,
    triggered by allocation counts, would walk the whole growing heap again and again
    (measured on vLLM 0.30.0 with vllm-ascend, warm cache: about 3.0 s -> 1.0 s without
    it). Reference counting still frees everything acyclic; the collector resumes after."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return func(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return wrapper  # type: ignore[return-value]
