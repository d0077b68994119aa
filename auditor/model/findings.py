"""Result types shared by the engine, the rules and every output format.

Everything here is plain data with a stable JSON form (``to_json``/``from_json``),
so reports can be diffed, cached and compared across releases.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from typing import Any

JSON_SCHEMA_VERSION = 1


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"

    @property
    def rank(self) -> int:
        return {"error": 3, "warning": 2, "note": 1}[self.value]


@dataclass(frozen=True)
class Hop:
    """One step of a finding's call chain: where it is and what happens there."""

    path: str
    line: int
    function: str
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Hop":
        return cls(data["path"], int(data["line"]), data["function"], data.get("note", ""))


@dataclass(frozen=True)
class ClassRef:
    """A class identified by the file that defines it (names repeat across platform copies)."""

    path: str
    name: str

    def __str__(self) -> str:
        return f"{self.path}::{self.name}"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "name": self.name}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ClassRef":
        return cls(data["path"], data["name"])


class Meaning(str, Enum):
    """What a finding says about the step, as a rule declares it (``Rule.meaning``): what
    analyses may rely on, instead of rule codes."""

    STEP_LOST = "step-lost"  # the step is lost at this site on its way to the layer selection
    CANNOT_TAKE = "cannot-take"  # a class on the path cannot accept the step
    STEP_FROZEN = "step-frozen"  # a capture (compile, CUDA graph) freezes the step
    GATE_CLOSED = "gate-closed"  # a dispatch gate never opens for the classes listed (issue 18)
    # the step is constant on purpose (EAGLE-style drafting): when such a report goes away,
    # the behaviour changed; nothing was fixed (lint, issue 18 item 10)
    BY_DESIGN = "by-design"


@dataclass
class Finding:
    rule: str
    severity: Severity
    path: str
    line: int
    column: int
    function: str
    callee: str
    message: str
    trace: list[Hop] = field(default_factory=list)
    affected_classes: list[ClassRef] = field(default_factory=list)
    # Identity of the finding independent of line numbers: rule, file, enclosing
    # function, callee and the semantic key a rule chooses (never a line).
    fingerprint_key: str = ""
    fingerprint: str = ""
    # The callee as it enters the fingerprint (None: ``callee``). A rule whose ``callee``
    # lists what a call resolves to — one name per draft model family it can reach — gives
    # the call itself here (or "" when ``fingerprint_key`` already names it), so the id
    # never moves when the set of resolved targets or affected classes grows. Not in the JSON.
    callee_key: str | None = field(default=None, compare=False)
    suppressed: bool = False
    parameter: str = ""  # the threaded parameter the finding is about (the autofix threads it)
    root: str = ""  # issue 13: the scanned root the path is relative to ("vllm", "vllm-ascend"); "" without plugins
    # What the finding means for the step, stamped by the engine from its rule's declaration
    # unless the rule set it for this kind of its findings (MTP005's step bound to another
    # parameter is a lost step); not part of the JSON or of a finding's identity.
    meaning: Meaning | None = field(default=None, compare=False)

    def finalize(self) -> "Finding":
        callee = self.callee if self.callee_key is None else self.callee_key
        key = "|".join([self.rule, self.path, self.function, callee, self.fingerprint_key])
        self.fingerprint = hashlib.sha256(key.encode()).hexdigest()[:16]
        self.affected_classes = sorted(set(self.affected_classes), key=lambda c: (c.path, c.name))
        return self

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return (self.path, self.line, self.column, self.rule, self.fingerprint)

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "function": self.function,
            "callee": self.callee,
            "message": self.message,
            "trace": [h.to_json() for h in self.trace],
            "affected_classes": [c.to_json() for c in self.affected_classes],
            "fingerprint": self.fingerprint,
            **({"suppressed": True} if self.suppressed else {}),
            **({"parameter": self.parameter} if self.parameter else {}),
            **({"root": self.root} if self.root else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Finding":
        return cls(
            rule=data["rule"],
            severity=Severity(data["severity"]),
            path=data["path"],
            line=int(data["line"]),
            column=int(data["column"]),
            function=data["function"],
            callee=data["callee"],
            message=data["message"],
            trace=[Hop.from_json(h) for h in data.get("trace", [])],
            affected_classes=[ClassRef.from_json(c) for c in data.get("affected_classes", [])],
            fingerprint=data.get("fingerprint", ""),
            suppressed=bool(data.get("suppressed", False)),
            parameter=str(data.get("parameter", "")),
            root=str(data.get("root", "")),
        )


@dataclass(frozen=True)
class Problem:
    """A file the scan could not analyse (it is listed and skipped, never fatal)."""

    path: str
    kind: str  # "parse-error", "decode-error", "unreadable", "too-large", "symlink", ...
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Problem":
        return cls(data["path"], data["kind"], data["message"])


@dataclass(frozen=True)
class StepRaise:
    """An assert on a route that fails at draft step ``step`` (issue 18: an outcome of
    ``layers`` and of a reachability row alike, one fact)."""

    step: int
    path: str
    line: int
    function: str
    message: str
    # Every call of the draft model's forward makes it, whatever the call hands it (a read
    # of an attribute the per-layer module lacks, :mod:`..analyses.dispatch.forward_reads`):
    # a start-up pass that calls the forward raises it too. Not in the JSON form.
    any_call: bool = field(default=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"step": self.step, "path": self.path, "line": self.line, "function": self.function,
                "message": self.message}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepRaise:
        return cls(int(data["step"]), data["path"], int(data["line"]), data["function"], data["message"])


@dataclass(frozen=True)
class StepLoss:
    """Where a route's step is lost: the layer selection the step does not reach although
    the loop hands it on (``layers``' ``lost at path:line`` and a reachability row's
    ``lost`` verdict), and the functions on the selection paths that do not carry it there
    (a finding that loses the step in one of them explains it: the services layer names it,
    analyses never read rule output)."""

    on_path: frozenset[tuple[str, str]]  # (path, qualified function)
    path: str = ""  # the selection the step does not reach ("": not recorded, an older document)
    line: int = 0
    function: str = ""
    container: str = ""  # the layer container selected there ("self.layers")
    method: str = ""  # the draft model method it is reached through (forward, compute_logits, ...)

    @property
    def site(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def lost_at(self) -> str:
        """The verdict as ``layers`` gives it where no finding explains the loss."""
        return f"lost at {self.site}"

    @property
    def reason(self) -> str:
        return f"the step does not reach {self.container} in {self.function} ({self.site})"

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "function": self.function, "container": self.container,
                "method": self.method, "on_path": [list(f) for f in sorted(self.on_path)]}

    def explained_by(self, findings: list[Finding] | tuple[Finding, ...]) -> Finding | None:
        """The finding that loses the step on this path (``Meaning.STEP_LOST`` in one of its
        functions), the first by rule and place: the one a verdict names (``lost at <id>``)."""
        for f in sorted(findings, key=lambda f: (f.rule, f.path, f.line)):
            if f.meaning is Meaning.STEP_LOST and (f.path, f.function) in self.on_path:
                return f
        return None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepLoss:
        return cls(frozenset((str(p), str(f)) for p, f in data.get("on_path", [])), data["path"], int(data["line"]),
                   data["function"], data["container"], data.get("method", ""))


class ReachVerdict(str, Enum):
    """What one draft loop does with one MTP class's layers (the ``layers`` verdicts,
    configuration-free): the same routes, summarised."""

    THREADED = "threaded"  # step i selects layer i
    CONSTANT = "constant"  # every step selects layer 0
    UNKNOWN = "unknown"  # the step cannot be classified, or the route is decided past a cut
    RAISES = "raises"  # step i selects layer i until an assert on the step fails (``raises``)
    LOST = "lost"  # the loop hands the step on, a layer selection never gets it (``lost at``): see ``lost``


@dataclass
class LoopReach:
    """How one draft loop reaches one MTP model class."""

    loop: str  # "path:line Class.method"
    steps_reach_layers: bool  # True: step i selects layer i at every step; False: it does not (see verdict)
    detail: str
    trace: list[Hop] = field(default_factory=list)
    verdict: ReachVerdict | None = None  # None: THREADED or CONSTANT as steps_reach_layers says
    raises: StepRaise | None = None  # set with verdict RAISES: the first step an assert fails at
    lost: StepLoss | None = None  # set with verdict LOST: the selection the step does not reach
    lost_finding: str | None = None  # the fingerprint of the finding that loses it there (:meth:`cite_loss`)
    # A layer container the model iterates instead of selecting a layer by the step
    # (``Owner.attr``): every step runs all of its layers, in order (None: none).
    stack: str | None = None

    def __post_init__(self) -> None:
        if self.verdict is None:
            self.verdict = ReachVerdict.THREADED if self.steps_reach_layers else ReachVerdict.CONSTANT

    def to_json(self) -> dict[str, Any]:
        assert self.verdict is not None
        return {
            "loop": self.loop,
            "step_i_reaches_layer_i": self.steps_reach_layers,
            "verdict": self.verdict.value,
            "raise": self.raises.to_json() if self.raises is not None else None,
            "lost": {**self.lost.to_json(), "finding": self.lost_finding} if self.lost is not None else None,
            "detail": self.detail,
            "trace": [h.to_json() for h in self.trace],
            "forward_stack": self.stack,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "LoopReach":
        verdict = ReachVerdict(data["verdict"]) if data.get("verdict") else None
        raised = StepRaise.from_json(data["raise"]) if data.get("raise") else None
        lost = StepLoss.from_json(data["lost"]) if data.get("lost") else None  # absent before the verdict existed
        return cls(data["loop"], bool(data["step_i_reaches_layer_i"]), data["detail"],
                   [Hop.from_json(h) for h in data["trace"]], verdict, raised, lost,
                   data["lost"].get("finding") if lost is not None else None, data.get("forward_stack"))

    @property
    def lost_at(self) -> str | None:
        """The verdict's place as ``layers`` names it: the finding, else the selection's site."""
        if self.lost is None:
            return None
        return f"lost at {self.lost_finding}" if self.lost_finding else self.lost.lost_at

    def cite_loss(self, findings: list[Finding]) -> LoopReach:
        """This row naming the finding that loses its step (as a plan's ``lost at <id>``)."""
        if self.lost is None or self.verdict is not ReachVerdict.LOST:
            return self
        f = self.lost.explained_by(findings)
        if f is None:
            return self
        # The verdict names the finding in place of the site, as ``layers`` does.
        site = self.lost.lost_at
        rest = self.detail[len(site):] if self.detail.startswith(site) else f": {self.detail}"
        return replace(self, lost_finding=f.fingerprint,
                       detail=f"lost at {f.fingerprint} ({f.rule} at {f.path}:{f.line} {f.function}){rest}")


@dataclass
class ClassReachability:
    model_class: ClassRef
    architectures: list[str]
    layer_count_fields: list[str]
    loops: list[LoopReach] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "class": self.model_class.to_json(),
            "architectures": self.architectures,
            "layer_count_fields": self.layer_count_fields,
            "loops": [lp.to_json() for lp in self.loops],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ClassReachability":
        return cls(
            ClassRef.from_json(data["class"]),
            list(data["architectures"]),
            list(data["layer_count_fields"]),
            [LoopReach.from_json(lp) for lp in data["loops"]],
        )


@dataclass(frozen=True)
class ScanRoot:
    """Issue 13: one root of a scan with platform plugins (vLLM's, or a plugin's)."""

    name: str  # "vllm", or the plugin's distribution name ("vllm-ascend")
    location: str  # the directory (or release label) scanned
    packages: tuple[str, ...]  # the top-level packages it holds: paths under them belong to it
    plugin: bool

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "location": self.location, "packages": list(self.packages), "plugin": self.plugin}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ScanRoot":
        return cls(data["name"], data["location"], tuple(data["packages"]), bool(data["plugin"]))


@dataclass
class ScanResult:
    """Everything one scan produced; ``to_json`` is the documented ``--format json`` document."""

    root: str
    findings: list[Finding] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    reachability: list[ClassReachability] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    roots: list[ScanRoot] = field(default_factory=list)  # issue 13: empty without plugins
    lint: "LintChanges | None" = None  # only in a lint result: what the change fixed and changed by design

    def root_of(self, path: str) -> ScanRoot | None:
        top = path.split("/", 1)[0]
        return next((r for r in self.roots if top in r.packages), None)

    def sort(self) -> "ScanResult":
        self.findings.sort(key=Finding.sort_key)
        self.problems.sort(key=lambda p: (p.path, p.kind))
        self.reachability.sort(key=lambda r: (r.model_class.path, r.model_class.name))
        return self

    def to_json(self) -> dict[str, Any]:
        from .. import __version__

        return {
            "version": JSON_SCHEMA_VERSION,
            "tool": {"name": "mtp-audit", "version": __version__},
            "root": self.root,
            "findings": [f.to_json() for f in self.findings],
            "problems": [p.to_json() for p in self.problems],
            "reachability": [r.to_json() for r in self.reachability],
            "stats": self.stats,
            **({"roots": [r.to_json() for r in self.roots]} if self.roots else {}),
            **({"lint": self.lint.to_json()} if self.lint is not None else {}),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ScanResult":
        if data.get("version") != JSON_SCHEMA_VERSION:
            raise ValueError(f"unsupported scan result version {data.get('version')!r}")
        return cls(
            root=data["root"],
            findings=[Finding.from_json(f) for f in data["findings"]],
            problems=[Problem.from_json(p) for p in data["problems"]],
            reachability=[ClassReachability.from_json(r) for r in data["reachability"]],
            stats=dict(data.get("stats", {})),
            roots=[ScanRoot.from_json(r) for r in data.get("roots", [])],
            lint=LintChanges.from_json(data["lint"]) if "lint" in data else None,
        )


# --- lint (issue 18 item 10): what a change did besides the findings it introduces ---
#
# A finding of the base that the change makes disappear is one of three things:
#
# * **fixed** — a defect (the step lost, rejected, frozen, a gate that never opens) is gone;
# * **masked** — a defect is gone only because a finding the change introduced sits on its
#   route before it (the step is lost, rejected or constant there, or the route is no longer
#   taken): a compiled forward cannot freeze a step that no longer reaches it. Not a fix;
# * a **behaviour change** — a by-design report is gone because the behaviour it described
#   changed: a draft loop that ran EAGLE-style (layer 0 at every step, on purpose) now
#   threads the step (``eagle-style -> threaded``). That is a design decision for the
#   reviewers, not a fix, so it is listed on its own, with the loop, the MTP classes it
#   reaches, and per class which layer each step selects before and after.
#
# A by-design report the change *adds* where the loop used to thread the step is the
# opposite change (``threaded -> eagle-style``); it is listed here and is also a new finding.
# Everything here is plain data with a stable JSON form (``lint`` in JSON_FORMAT.md).

#: the kinds of behaviour change, as they appear in text and JSON
EAGLE_TO_THREADED = "eagle-style -> threaded"
THREADED_TO_EAGLE = "threaded -> eagle-style"
EAGLE_TO_UNREACHED = "eagle-style -> not reached"
EAGLE_TO_UNKNOWN = "eagle-style -> unknown"

#: what one draft step selects, per class and side (``StepChange.before``/``after``)
LAYER_I = "step i -> layer i"
LAYER_0 = "layer 0 at every step"
NOT_REACHED = "not reached"
STEP_UNKNOWN = "unknown"  # the side's reachability row says unknown (ReachVerdict.UNKNOWN)


@dataclass(frozen=True)
class StepChange:
    """Which layer each draft step of one loop selects in one MTP class, before and after."""

    model_class: ClassRef
    before: str  # LAYER_I, LAYER_0, STEP_UNKNOWN, NOT_REACHED or "lost at <id|path:line>" (LoopReach.lost_at)
    after: str  # the same, or "raises at step N" (an assert on the step fails there)
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

    @property
    def removed(self) -> bool:
        """Whether the change removed the report (the base's); else it added it (a new finding)."""
        return self.change != THREADED_TO_EAGLE

    def to_json(self) -> dict[str, Any]:
        return {"change": self.change, "finding": self.finding.to_json(), "steps": [s.to_json() for s in self.steps]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "BehaviourChange":
        return cls(data["change"], Finding.from_json(data["finding"]), [StepChange.from_json(s) for s in data["steps"]])


@dataclass(frozen=True)
class FindingRef:
    """A finding named by its rule and id (what masks a finding: one of the change's new ones)."""

    rule: str
    fingerprint: str

    def __str__(self) -> str:
        return f"{self.rule} {self.fingerprint}"

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "fingerprint": self.fingerprint}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "FindingRef":
        return cls(data["rule"], data["fingerprint"])


@dataclass
class Masked:
    """A defect of the base that is gone only because a finding the change introduced sits
    on its route before it: the step is lost, rejected or constant there, or the route is no
    longer taken (``lint_changes.masks``), so nothing is left to report where it was. Not a
    fix: the step still does not reach the layer."""

    finding: Finding  # the base's defect, as the base has it
    by: list[FindingRef] = field(default_factory=list)  # the new findings that hide it, sorted

    def sort_key(self) -> tuple[str, int, int, str, str]:
        return self.finding.sort_key()

    def to_json(self) -> dict[str, Any]:
        return {"finding": self.finding.to_json(), "by": [b.to_json() for b in self.by]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Masked":
        return cls(Finding.from_json(data["finding"]), [FindingRef.from_json(b) for b in data["by"]])


@dataclass
class LintChanges:
    """The part of a lint result that is not a new finding."""

    base: str  # the ref compared with
    fixed: list[Finding] = field(default_factory=list)  # the base's defects the change removes, as the base has them
    behaviour_changes: list[BehaviourChange] = field(default_factory=list)
    masked: list[Masked] = field(default_factory=list)  # the base's defects hidden by a new finding: not fixed

    def sort(self) -> "LintChanges":
        self.fixed.sort(key=Finding.sort_key)
        self.behaviour_changes.sort(key=BehaviourChange.sort_key)
        self.masked.sort(key=Masked.sort_key)
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "fixed": [f.to_json() for f in sorted(self.fixed, key=Finding.sort_key)],
            "behaviour_changes": [c.to_json() for c in sorted(self.behaviour_changes, key=BehaviourChange.sort_key)],
            "masked": [m.to_json() for m in sorted(self.masked, key=Masked.sort_key)],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "LintChanges":
        return cls(data["base"], [Finding.from_json(f) for f in data["fixed"]],
                   [BehaviourChange.from_json(c) for c in data["behaviour_changes"]],
                   [Masked.from_json(m) for m in data.get("masked", [])])
