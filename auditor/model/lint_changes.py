"""What a change did besides the findings it introduces (``lint``, issue 18 item 10).

A finding of the base that the change makes disappear is one of two things:

* **fixed** — a defect (the step lost, rejected, frozen, a gate that never opens) is gone;
* a **behaviour change** — a by-design report is gone because the behaviour it described
  changed: a draft loop that ran EAGLE-style (layer 0 at every step, on purpose) now
  threads the step (``eagle-style -> threaded``). That is a design decision for the
  reviewers, not a fix, so it is listed on its own, with the loop, the MTP classes it
  reaches, and per class which layer each step selects before and after.

A by-design report the change *adds* where the loop used to thread the step is the
opposite change (``threaded -> eagle-style``); it is listed here and is also a new finding.
Everything here is plain data with a stable JSON form (``lint`` in JSON_FORMAT.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .findings import ClassRef, Finding

#: the kinds of behaviour change, as they appear in text and JSON
EAGLE_TO_THREADED = "eagle-style -> threaded"
THREADED_TO_EAGLE = "threaded -> eagle-style"
EAGLE_TO_UNREACHED = "eagle-style -> not reached"
EAGLE_TO_UNKNOWN = "eagle-style -> unknown"

#: what one draft step selects, per class and side (``StepChange.before``/``after``)
LAYER_I = "step i -> layer i"
LAYER_0 = "layer 0 at every step"
NOT_REACHED = "not reached"


@dataclass(frozen=True)
class StepChange:
    """Which layer each draft step of one loop selects in one MTP class, before and after."""

    model_class: ClassRef
    before: str  # LAYER_I, LAYER_0 or NOT_REACHED
    after: str
    detail: str = ""  # the linted side's reachability detail ("step i selects self.layers[i] (via forward)")
    # ids of the change's new findings about this class (a compiled forward that now freezes the step)
    related: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"class": self.model_class.to_json(), "before": self.before, "after": self.after,
                "detail": self.detail, "related": list(self.related)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "StepChange":
        return cls(ClassRef.from_json(data["class"]), data["before"], data["after"], data.get("detail", ""),
                   tuple(data.get("related", ())))


@dataclass
class BehaviourChange:
    """A by-design report (``finding``) that the change removed or added, and why it is a
    change of behaviour rather than a fix or a defect."""

    change: str  # EAGLE_TO_THREADED, THREADED_TO_EAGLE, EAGLE_TO_UNREACHED or EAGLE_TO_UNKNOWN
    finding: Finding  # the by-design report: the base's (removed) or the linted side's (added)
    steps: list[StepChange] = field(default_factory=list)  # sorted by class path, name

    def sort_key(self) -> tuple[str, int, str]:
        return (self.finding.path, self.finding.line, self.finding.fingerprint)

    def to_json(self) -> dict[str, Any]:
        return {"change": self.change, "finding": self.finding.to_json(), "steps": [s.to_json() for s in self.steps]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "BehaviourChange":
        return cls(data["change"], Finding.from_json(data["finding"]), [StepChange.from_json(s) for s in data["steps"]])


@dataclass
class LintChanges:
    """The part of a lint result that is not a new finding."""

    base: str  # the ref compared with
    fixed: list[Finding] = field(default_factory=list)  # the base's defects the change removes, as the base has them
    behaviour_changes: list[BehaviourChange] = field(default_factory=list)

    def sort(self) -> "LintChanges":
        self.fixed.sort(key=Finding.sort_key)
        self.behaviour_changes.sort(key=BehaviourChange.sort_key)
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "fixed": [f.to_json() for f in sorted(self.fixed, key=Finding.sort_key)],
            "behaviour_changes": [c.to_json() for c in sorted(self.behaviour_changes, key=BehaviourChange.sort_key)],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "LintChanges":
        return cls(data["base"], [Finding.from_json(f) for f in data["fixed"]],
                   [BehaviourChange.from_json(c) for c in data["behaviour_changes"]])
