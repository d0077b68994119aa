"""``history --layers``: what it produces, per release and per architecture x runner.
Plain data (no git, no analysis, no rendering)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

LAYER_HISTORY_FORMAT_VERSION = 1
UNKNOWN_VERDICT = "unknown"


@dataclass(frozen=True)
class PlanCell:
    """One architecture x runner plan of one release, reduced to what the history compares."""

    architecture: str
    runner: str
    drafter: Optional[str]
    model_class: Optional[str]
    num_mtp_layers: Optional[int]
    forward: tuple[Optional[int], ...]  # forward layer per draft step
    head: tuple[Optional[int], ...]  # head layer per draft step (None: one shared head)
    verdicts: tuple[str, ...]
    # per draft step, every layer of a stack the forward iterates instead of selecting one by
    # the step, in order (None: a selected layer, ``forward``, or unknown); () before it existed
    stacks: tuple[Optional[tuple[int, ...]], ...] = ()

    @property
    def known(self) -> bool:
        # an unknown branch picks the drafter: the layers are one possibility, not the answer
        return bool(self.verdicts) and UNKNOWN_VERDICT not in self.verdicts

    def _reaches(self, layers: tuple[Optional[int], ...], count: int) -> bool:
        n = self.num_mtp_layers or count
        if n < min(count, len(layers)):
            # The model builds fewer layers than the question's checkpoint has (a fixed-size
            # container): a step past them cannot run its own layer, whatever the loop hands.
            return False
        return self.known and bool(layers) and all(layer == i % n for i, layer in enumerate(layers))

    def forward_reaches(self, count: int) -> bool:
        return self._reaches(self.forward, count)

    def head_reaches(self, count: int) -> bool:
        return self._reaches(self.head, count)

    def to_json(self) -> dict[str, Any]:
        return {
            "architecture": self.architecture,
            "runner": self.runner,
            "drafter": self.drafter,
            "model_class": self.model_class,
            "num_mtp_layers": self.num_mtp_layers,
            "forward_layers": list(self.forward),
            "head_layers": list(self.head),
            "verdicts": list(self.verdicts),
            "forward_stacks": [None if st is None else list(st) for st in self.step_stacks()],
        }

    def step_stacks(self) -> tuple[Optional[tuple[int, ...]], ...]:
        """:attr:`stacks`, one per step (None for each step of a cell made before it existed)."""
        return self.stacks if len(self.stacks) == len(self.forward) else (None,) * len(self.forward)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "PlanCell":
        stacks = tuple(None if st is None else tuple(st) for st in doc.get("forward_stacks") or ())
        return cls(doc["architecture"], doc["runner"], doc["drafter"], doc["model_class"], doc["num_mtp_layers"],
                   tuple(doc["forward_layers"]), tuple(doc["head_layers"]), tuple(doc["verdicts"]), stacks)


@dataclass(frozen=True)
class LayerRelease:
    ref: str
    commit: str
    tree: str = ""  # git id of the vllm/ tree ("" when skipped)
    skipped: str = ""
    cells: tuple[PlanCell, ...] = ()
    from_cache: bool = False  # not part of any report


@dataclass(frozen=True)
class LayerRow:
    """One architecture x runner across the releases."""

    architecture: str
    runner: str
    cells: dict[str, Optional[PlanCell]]  # release ref -> plan (None: not registered there)
    forward_since: Optional[str]  # first release where every step i runs forward layer i
    head_since: Optional[str]  # first release where every step i runs head layer i
    forward_lost: tuple[str, ...]  # later releases where it no longer does
    head_lost: tuple[str, ...]
    shared_head: bool = False  # every plan has one shared head: no head layer to reach


@dataclass
class LayerHistory:
    repository: str
    k: int
    layers: int
    runners: tuple[str, ...]
    platform: str
    method: str
    releases: list[LayerRelease]
    timing: dict[str, Any] = field(default_factory=dict)  # not part of any report

    def scanned(self) -> list[LayerRelease]:
        return [r for r in self.releases if not r.skipped]

    def rows(self) -> list[LayerRow]:
        keys = sorted({(c.architecture, c.runner) for r in self.scanned() for c in r.cells})
        rows = []
        for arch, runner in keys:
            cells: dict[str, Optional[PlanCell]] = {}
            for rel in self.scanned():
                cells[rel.ref] = next((c for c in rel.cells if (c.architecture, c.runner) == (arch, runner)), None)
            f_since, f_lost = _since(cells, lambda c: c.forward_reaches(self.layers))
            h_since, h_lost = _since(cells, lambda c: c.head_reaches(self.layers))
            known = [c for c in cells.values() if c is not None and c.known]
            shared = bool(known) and all(h is None for c in known for h in c.head)
            rows.append(LayerRow(arch, runner, cells, f_since, h_since, f_lost, h_lost, shared and h_since is None))
        return rows


def _since(cells: dict[str, Optional[PlanCell]], reaches: Callable[[PlanCell], bool]) -> tuple[Optional[str], tuple[str, ...]]:
    first: Optional[str] = None
    lost: list[str] = []
    for ref, cell in cells.items():
        ok = cell is not None and reaches(cell)
        if ok and first is None:
            first = ref
        elif first is not None and not ok:
            lost.append(ref)
    return first, tuple(lost)
