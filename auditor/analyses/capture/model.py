"""The capture analysis's results: graph wrappers, installations, compiled classes,
whole-loop captures and frozen steps."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from ...facts.extract import Chain
from ...index.index import ClassKey, FuncKey
from ...model.findings import Hop


class KeyKind(str, Enum):
    """How a graph wrapper builds the key of its graph cache."""

    BATCH = "batch"  # from the forward context only (batch shape): no call argument
    ARGUMENTS = "arguments"  # computed in the wrapper from the call's arguments
    KEY_FN = "key-fn"  # a function handed to the constructor, applied to the call's arguments


@dataclass(frozen=True)
class GraphWrapper:
    cls: ClassKey
    dispatch: FuncKey  # the method a call of an instance runs (``__call__``)
    capture: Hop  # where its call path captures
    replay: Hop | None  # where it replays
    key_kind: KeyKind
    key_text: str  # the key expression(s), as written
    key_fn_param: str | None  # KEY_FN: the constructor parameter holding the key function
    key_params: tuple[str, ...]  # threaded parameters the key reads from the call's arguments itself

    @property
    def name(self) -> str:
        return self.cls[1]


@dataclass(frozen=True)
class Installation:
    """One place a graph wrapper is built around a callable and stored."""

    wrapper: GraphWrapper
    site: FuncKey  # the function that runs the construction (or calls the installer)
    line: int
    col: int
    root: ClassKey | None  # ``self`` there
    slot: tuple[str, ...]  # attribute path from ``root`` where the wrapper is stored
    wrapped: str  # the wrapped callable, as written
    key_fn: str | None  # the key function passed (None: none)
    key_includes: tuple[str, ...]  # threaded parameters the effective key includes
    guards: tuple[str, ...]  # branch conditions that must hold to get here, outermost first
    via: tuple[Hop, ...]  # the installer call(s) and the construction

    @property
    def slot_text(self) -> str:
        return ".".join(self.slot) if self.slot else "?"

    def describe_key(self, param: str) -> str:
        """How this installation's graphs are keyed, said against ``param``."""
        w = self.wrapper
        if w.key_kind is KeyKind.KEY_FN and self.key_fn is None:
            return f"keyed by the batch only (no {w.key_fn_param} is passed)"
        if w.key_kind is KeyKind.KEY_FN:
            return f"keyed by {w.key_fn_param}={self.key_fn}, which does not read {param}"
        if w.key_kind is KeyKind.ARGUMENTS:
            return f"keyed by {w.key_text}, which does not read {param}"
        return "keyed by the batch only" if w.key_text else "captured once, with no key"

    def guard_text(self) -> str:
        # Conditions are joined with `and`; only an `or` inside one needs parentheses.
        return " and ".join(f"({g})" if " or " in re.sub(r"\[=.*?\]", "", g) else g for g in self.guards)


@dataclass(frozen=True)
class CompiledClass:
    cls: ClassKey  # the decorated class
    line: int
    decorator: str
    dynamic_args: tuple[str, ...] | None  # None: the decorator infers them (tensor-typed parameters)
    condition: str | None  # the decorator's enabling condition, if any

    def dynamic(self, param: str) -> bool:
        return self.dynamic_args is not None and param in self.dynamic_args


@dataclass(frozen=True)
class LoopCapture:
    """A method holding a draft loop is handed to a function that captures it whole."""

    site: FuncKey
    line: int
    captured: FuncKey
    capturer: FuncKey
    capture: Hop
    loop_line: int
    guards: tuple[str, ...]


class FreezeKind(str, Enum):
    GRAPH = "graph"
    COMPILE = "compile"


@dataclass(frozen=True)
class FrozenStep:
    """A draft loop's per-step value reaches a layer selection only through a region that
    does not see it: a graph replayed under a key without it, or a compiled forward."""

    kind: FreezeKind
    param: str
    loop: FuncKey
    loop_line: int
    model_class: ClassKey
    method: str  # the draft model entry method
    container: str
    hops: tuple[Hop, ...]  # loop -> ... -> the region -> the selection
    installation: Installation | None = None
    compiled: CompiledClass | None = None
    outside: tuple[str, ...] = ()  # entry methods outside the region that still get the step


@dataclass
class CaptureAnswers:
    """What the loading phase's capture analysis found (:meth:`.provider.CaptureProvider.answers`):
    the answers that depend on which files were loaded when they were found. A scan restored
    from :mod:`auditor.engine.prepared` is given them back instead of finding them again over
    all the files at once (which could reach others). None: not asked yet."""

    capture_files: list[str] | None
    wrappers: list[tuple[ClassKey, GraphWrapper]] | None
    installations: list[Installation] | None
    loop_captures: list[LoopCapture] | None
    compiled: list[tuple[ClassKey, CompiledClass | None]]
    captures: list[tuple[FuncKey, ClassKey | None, Hop | None]]


def negate(text: str) -> str:
    """``a == b`` -> ``a != b``; ``not x`` -> ``x``; else ``not (text)``."""
    if text.startswith("not ") and " and " not in text and " or " not in text:
        return text[4:]
    if text.count("==") == 1 and "!=" not in text and " and " not in text and " or " not in text:
        return text.replace("==", "!=")
    if text.count("!=") == 1 and "==" not in text and " and " not in text and " or " not in text:
        return text.replace("!=", "==")
    return f"not ({text})"


def chain_matches(chain: Chain | None, api: str) -> bool:
    if not chain:
        return False
    parts = tuple(api.split("."))
    return chain[-len(parts):] == parts
