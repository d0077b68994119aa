"""Pausing CPython's cyclic garbage collector around work that allocates a large, long-lived
heap (a scan, a ``layers`` question)."""

from __future__ import annotations

import functools
import gc
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

# Set by the command line's own process (auditor.cli.app.main with no argv): it ends after one command.
_process_ends_after_command = False


def process_ends_after_command() -> None:
    global _process_ends_after_command
    _process_ends_after_command = True


def paused_until_exit() -> None:
    """For a command that builds one large heap and whose process then ends (``layers``): the
    collector is not resumed after it. Resumed, its first collection walks every object
    allocated while it was paused (the whole heap of the scan, now garbage): about half a
    second on a new ``layers`` question, freeing nothing the exit does not. Only in the
    command line's own process; a caller in a longer-lived process (tests) is unaffected."""
    if _process_ends_after_command:
        gc.disable()


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
