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


class FixpointStack:
    """The stack of unfinished queries shared by memos whose queries call each other
    (``attr_types`` <-> ``returned_types``): a cycle through two memos is then one cycle,
    iterated to one fixpoint, and a query that read an unfinished one of *either* memo is
    not memoised — so no answer depends on which memo was asked first."""

    def __init__(self) -> None:
        self.frames: list[tuple[object, Hashable]] = []  # (memo, key), outermost first
        self.position: dict[tuple[object, Hashable], int] = {}
        self.low: list[int] = []  # per frame: lowest stack position of an unfinished query it read
        self.reentered: set[tuple[object, Hashable]] = set()
        self.partial: dict[tuple[object, Hashable], object] = {}

    def __bool__(self) -> bool:
        return bool(self.frames)


class FixpointMemo(Generic[K, V]):
    """Memo for recursive queries (a query may, through others, ask itself again).

    When a query meets itself on the stack, it gets the value computed so far (at first
    ``bottom``). With ``iterate`` (for monotone answers such as sets of types) the outer
    query is then recomputed until its value stops changing, and only then memoised.
    Without it (for witness answers such as "a path to a layer selection", where a path
    through the query itself is never needed) the cycle simply answers ``bottom``.
    Either way, queries that read an unfinished value of an outer query are not memoised
    (their result may change when the outer one finishes), so a result never depends on
    the order in which questions were asked. Memos whose queries call each other share
    one ``stack`` (:class:`FixpointStack`).
    """

    def __init__(
        self, bottom: Callable[[], V], limits: Limits, name: str, max_rounds: int = 8, iterate: bool = True,
        stack: FixpointStack | None = None,
    ) -> None:
        self._iterate = iterate
        self._bottom = bottom
        self._limits = limits
        self._name = name
        self._max_rounds = max_rounds
        self._done: dict[K, V] = {}
        self.stack = stack if stack is not None else FixpointStack()

    def __contains__(self, key: K) -> bool:
        return key in self._done

    def finished(self) -> dict[K, V]:
        """The memoised answers (each depends on nothing unfinished), in the order they were found."""
        return self._done

    def query(self, key: K, compute: Callable[[], V]) -> V:
        done = self._done.get(key, _MISSING)
        if done is not _MISSING:
            return done  # type: ignore[return-value]
        st = self.stack
        frame = (self, key)
        pos = st.position.get(frame)
        if pos is not None:  # a cycle: answer with what is known so far
            st.reentered.add(frame)
            if st.low:
                st.low[-1] = min(st.low[-1], pos)
            return st.partial[frame] if frame in st.partial else self._bottom()  # type: ignore[return-value]
        pos = len(st.frames)
        st.position[frame] = pos
        st.frames.append(frame)
        st.low.append(pos)
        try:
            rounds = 0
            while True:
                st.reentered.discard(frame)
                value = compute()
                if not self._iterate or frame not in st.reentered:
                    break
                previous = st.partial.get(frame, self._bottom())
                if value == previous:
                    break
                rounds += 1
                if rounds >= self._max_rounds:
                    self._limits.hit(f"{self._name} fixpoint rounds")
                    break
                st.partial[frame] = value
                # The queries that read the previous value were not memoised: recomputing
                # this one asks them again with the new value.
        finally:
            st.frames.pop()
            del st.position[frame]
            low = st.low.pop()
            st.partial.pop(frame, None)
            st.reentered.discard(frame)
        if low >= pos:
            self._done[key] = value  # depends on nothing unfinished
        elif st.low:
            st.low[-1] = min(st.low[-1], low)
        return value


_MISSING = object()

__all__ = ["Analyses", "ClassKey", "FixpointMemo", "FixpointStack", "FuncKey", "Limits", "Provider"]
