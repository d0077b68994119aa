"""The provider framework: each analysis is a :class:`Provider` that declares the
providers it depends on, keeps its own memo, and is created once per scan by
:class:`Analyses` (the way libcst's metadata providers compose).

Providers are queried lazily — a question such as "which functions can this call
reach?" is answered, and memoised, when a rule or another provider first asks it —
but the dependency graph between providers is declared and acyclic, so data flows one
way: index -> types -> registry -> calls -> flow -> loops -> scope/reachability/graph.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, ClassVar, Generic, Hashable, TypeVar

from ..common.config import Config
from ..index.index import ClassKey, FuncKey, Index
from ..model.findings import Hop

P = TypeVar("P", bound="Provider")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass
class Limits:
    """Counts every time a depth or size limit cut a search short.

    The counts go into a scan's ``stats["limits_hit"]`` and are printed as a note, so a
    user knows when an answer may be incomplete.
    """

    hits: Counter[str] = field(default_factory=Counter)

    def hit(self, name: str) -> None:
        self.hits[name] += 1

    def as_dict(self) -> dict[str, int]:
        return dict(sorted(self.hits.items()))


class Provider:
    """One analysis. Subclasses list the providers they query in ``dependencies``."""

    dependencies: ClassVar[tuple[type["Provider"], ...]] = ()

    def __init__(self, analyses: "Analyses") -> None:
        self._analyses = analyses
        self.index: Index = analyses.index
        self.config: Config = analyses.config
        self.params: list[str] = list(analyses.config.threaded_params)
        self.limits: Limits = analyses.limits

    def dep(self, cls: type[P]) -> P:
        """A provider this one declared as a dependency."""
        if cls not in type(self).dependencies:
            raise TypeError(f"{type(self).__name__} queries {cls.__name__} without declaring it in dependencies")
        return self._analyses.get(cls)

    def hop(self, key: FuncKey, line: int, note: str) -> Hop:
        return Hop(key[0], line, key[1], note)


class Analyses:
    """The providers of one scan, created on first use, each exactly once."""

    def __init__(self, index: Index, config: Config) -> None:
        self.index = index
        self.config = config
        self.limits = Limits()
        self._providers: dict[type[Provider], Provider] = {}
        self._creating: list[type[Provider]] = []

    def get(self, cls: type[P]) -> P:
        found = self._providers.get(cls)
        if found is None:
            if cls in self._creating:
                cycle = " -> ".join(c.__name__ for c in [*self._creating, cls])
                raise TypeError(f"provider dependency cycle: {cycle}")
            self._creating.append(cls)
            try:
                for dependency in cls.dependencies:
                    self.get(dependency)
                found = cls(self)
            finally:
                self._creating.pop()
            self._providers[cls] = found
        assert isinstance(found, cls)
        return found


class FixpointMemo(Generic[K, V]):
    """Memo for recursive queries (a query may, through others, ask itself again).

    When a query meets itself on the stack, it gets the value computed so far (at first
    ``bottom``). With ``iterate`` (for monotone answers such as sets of types) the outer
    query is then recomputed until its value stops changing, and only then memoised.
    Without it (for witness answers such as "a path to a layer selection", where a path
    through the query itself is never needed) the cycle simply answers ``bottom``.
    Either way, queries that read an unfinished value of an outer query are not memoised
    (their result may change when the outer one finishes), so a result never depends on
    the order in which questions were asked.
    """

    def __init__(
        self, bottom: Callable[[], V], limits: Limits, name: str, max_rounds: int = 8, iterate: bool = True
    ) -> None:
        self._iterate = iterate
        self._bottom = bottom
        self._limits = limits
        self._name = name
        self._max_rounds = max_rounds
        self._done: dict[K, V] = {}
        self._partial: dict[K, V] = {}
        self._position: dict[K, int] = {}
        self._stack: list[K] = []
        self._low: list[int] = []  # per frame: lowest stack position of an unfinished query it read
        self._reentered: set[K] = set()

    def __contains__(self, key: K) -> bool:
        return key in self._done

    def query(self, key: K, compute: Callable[[], V]) -> V:
        done = self._done.get(key, _MISSING)
        if done is not _MISSING:
            return done  # type: ignore[return-value]
        pos = self._position.get(key)
        if pos is not None:  # a cycle: answer with what is known so far
            self._reentered.add(key)
            if self._low:
                self._low[-1] = min(self._low[-1], pos)
            return self._partial[key] if key in self._partial else self._bottom()
        pos = len(self._stack)
        self._position[key] = pos
        self._stack.append(key)
        self._low.append(pos)
        try:
            rounds = 0
            while True:
                self._reentered.discard(key)
                value = compute()
                if not self._iterate or key not in self._reentered:
                    break
                previous = self._partial.get(key, self._bottom())
                if value == previous:
                    break
                rounds += 1
                if rounds >= self._max_rounds:
                    self._limits.hit(f"{self._name} fixpoint rounds")
                    break
                self._partial[key] = value
        finally:
            self._stack.pop()
            del self._position[key]
            low = self._low.pop()
            self._partial.pop(key, None)
            self._reentered.discard(key)
        if low >= pos:
            self._done[key] = value  # depends on nothing unfinished
        elif self._low:
            self._low[-1] = min(self._low[-1], low)
        return value


_MISSING = object()

__all__ = ["Analyses", "ClassKey", "FixpointMemo", "FuncKey", "Limits", "Provider"]
