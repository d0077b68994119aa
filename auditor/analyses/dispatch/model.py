"""The dispatch analysis's results: settings, plans, routes, gates and families."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Sequence

from ...index.index import ClassKey, FuncKey
from ...model.findings import Hop, StepLoss
from ..capture import FrozenStep
from ..partial_eval import Decision
from .outcomes import Rejection, StepRaise


class Verdict(str, Enum):
    THREADED = "threaded"
    CONSTANT = "constant — eagle-style by design"
    LOST = "lost"  # rendered "lost at <finding id>"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Setting:
    """The concrete configuration a plan is made for."""

    runner: str
    k: int | None  # num_speculative_tokens; None: not given (``--speculative-config`` without it)
    method: str | None = "mtp"  # None: not given (``--speculative-config`` without it: vLLM's default decides)
    platform: str = "cuda"
    architecture: str | None = None  # a registered draft architecture (--arch)
    fields: tuple[tuple[str, Any], ...] = ()  # draft hf-config fields (--set)
    target_config: str | None = None  # the target's config.json text (--hf-config)
    # Issue 18: further speculative-config options (``--speculative-config``: draft_sample_method,
    # use_local_argmax_reduction, parallel_drafting, ...), set on the speculative config as given.
    options: tuple[tuple[str, Any], ...] = ()
    # Issue 18: the process environment (``--env NAME=VALUE``): the variables set, and no other
    # vLLM reads; empty: not given (unknown).
    env: tuple[tuple[str, str], ...] = ()
    # The environment is known even where ``env`` is empty (``--clean-env``: no vLLM variable set
    # beyond ``env``); without it an empty ``env`` is an unknown environment.
    env_given: bool = False
    # Issue 18: K as the speculative config's construction derives it when ``k`` is not given
    # (vLLM: from the draft's ``n_predict``); the plan is made with it. Never the user's.
    k_derived: int | None = None

    @property
    def environ(self) -> dict[str, str] | None:
        """The process environment as the question gives it; None: not known."""
        return dict(self.env) if self.env or self.env_given else None

    @property
    def planned_k(self) -> int | None:
        """The K a plan is made with: as given, else as the construction derives it."""
        return self.k if self.k is not None else self.k_derived

    @property
    def draft_steps(self) -> int:
        """The draft steps a plan lists: K, or none when K is not known."""
        return max(self.planned_k or 0, 0)


CUT = "cut: "  # the ``depends_on`` of a decision that stands for a cut of the evaluator


@dataclass(frozen=True)
class DecisionRow:
    path: str
    line: int
    function: str
    condition: str
    value: bool | None
    fields: tuple[str, ...]
    depends_on: str = ""
    taken: bool | None = None

    @classmethod
    def of(cls, d: Decision) -> "DecisionRow":
        return cls(d.path, d.line, d.function, d.condition, d.value, d.fields, d.depends_on, d.taken)

    @property
    def cut(self) -> str | None:
        """The evaluator's cut this row stands for (None: a guard of the code)."""
        return self.depends_on[len(CUT):] if self.depends_on.startswith(CUT) else None

    def describe(self) -> str:
        """How a route's condition reads: the guard and the side taken, or the cut named."""
        return cut_condition((self.cut,)) if self.cut is not None else f"{self.condition} is {self.taken}"


def route_condition(d: Decision) -> bool:
    """Whether a decision on a factory run is part of the route's condition: a guard left
    unknown that reads the configuration, or a cut (either may decide another drafter)."""
    return d.value is None and (bool(d.fields) or d.depends_on.startswith(CUT))


@dataclass(frozen=True)
class StepPlan:
    step: int
    forward_layer: int | None
    head_layer: int | None
    verdict: str
    why: str
    lost: StepLoss | None = None  # set on a "lost at ..." step
    # A forward that iterates its layer container (``for layer in self.layers``) instead of
    # selecting one layer by the step runs every layer of it, in order: those layers (None:
    # it selects one, ``forward_layer``, or how many it builds is unknown).
    stack: tuple[int, ...] | None = None

    @property
    def forward_layers(self) -> tuple[int, ...] | None:
        """Every layer the step's forward runs, in order: the stack, else the one selected
        (None: unknown)."""
        return forward_layers(self.forward_layer, self.stack)


@dataclass(frozen=True)
class ForcedStep:
    step: int
    forward_layer: int | None
    head_layer: int | None
    stack: tuple[int, ...] | None = None  # as :attr:`StepPlan.stack`

    @property
    def forward_layers(self) -> tuple[int, ...] | None:
        return forward_layers(self.forward_layer, self.stack)


def forward_layers(forward_layer: int | None, stack: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """The layers a step's forward runs: a stack it iterates, else the layer it selects."""
    if stack is not None:
        return stack
    return None if forward_layer is None else (forward_layer,)


@dataclass(frozen=True)
class ForcedPlan:
    """A plan's *forced* view: the layer selected when the loop hands the model step i
    (made by :mod:`auditor.services.forced_plan`)."""

    steps: tuple[ForcedStep, ...]
    why: str


@dataclass(frozen=True)
class ClosedGates:
    """A plan whose every step is constant, and the gate conditions its configuration
    evaluated to False: a finding that a gate never opens for the model (MTP006) may
    explain the constant step instead of "by design"."""

    conditions: tuple[str, ...]


@dataclass(frozen=True)
class EngineView:
    """A plan under one engine mode (issue 18, ``layers --engine-mode``)."""

    mode: str  # "compiled": torch.compile and CUDA graphs, vLLM's default
    steps: tuple[StepPlan, ...]
    frozen_steps: tuple[int, ...]  # steps whose layer differs from the eager plan
    findings: tuple[str, ...]  # fingerprints of the findings that explain it (named by the services layer)
    why: str
    frozen: tuple[FrozenStep, ...] = ()  # where the step stops mattering on this route
    # Issue 18: "rejected" when a start-up pass of this mode runs a step whose assert fails
    # (:mod:`.startup`); None: the plan's own outcome.
    outcome: str | None = None
    rejections: tuple[Rejection, ...] = ()


@dataclass(frozen=True)
class RunnerChoice:
    """Whether vLLM uses the plan's runner for its configuration and environment (issue 18):
    the runner's selector (``runner-selectors``, vLLM's ``VllmConfig.use_v2_model_runner``) run by
    the partial evaluator over the question. ``used`` None: not derived (``depends_on`` says on
    what, or there is no selector in the tree)."""

    used: bool | None
    selector: Hop | None = None  # where vLLM decides; None: no selector in the tree
    depends_on: tuple[str, ...] = ()
    why: str = ""
    assumed: tuple[str, ...] = ()  # the ``runner-choice-assumptions`` the decision read
    # The choice raises on every path (an environment value vLLM cannot parse): the engine
    # config is rejected there.
    rejection: Rejection | None = None

    def as_json(self) -> dict[str, Any]:
        return {"used": self.used, "depends_on": list(self.depends_on), "why": self.why, "assumed": list(self.assumed),
                "selector": None if self.selector is None else {"path": self.selector.path, "line": self.selector.line,
                                                                "function": self.selector.function}}


@dataclass(frozen=True)
class Plan:
    setting: Setting
    architecture: str | None
    proposer: ClassKey | None
    proposer_site: Hop | None
    loop: Hop | None
    model_class: ClassKey | None
    num_mtp_layers: int | None
    layer_field: str | None
    steps: tuple[StepPlan, ...]
    decisions: tuple[DecisionRow, ...]
    alternatives: tuple[ClassKey, ...] = ()  # other drafters an unknown branch could build
    notes: tuple[str, ...] = ()
    # Issue 18: "plan", "rejected" (a validation raises before any step), "raises" (an
    # assert on the route fails at a draft step) or "unknown" (no K the construction derives,
    # or no drafter the factory run can tell: whether and how it serves is not derived).
    outcome: str = "plan"
    rejections: tuple[Rejection, ...] = ()
    step_raise: StepRaise | None = None
    compiled: EngineView | None = None  # the plan under torch.compile and CUDA graphs
    closed_gates: ClosedGates | None = None
    runner_choice: RunnerChoice | None = None  # whether vLLM uses this runner here

    @property
    def runner_used(self) -> bool | None:
        return None if self.runner_choice is None else self.runner_choice.used

    @property
    def raises_at_step(self) -> int | None:
        return self.step_raise.step if self.step_raise is not None else None

    def rejected_steps(self, why: str) -> tuple[StepPlan, ...]:
        """The plan's steps, each ``rejected`` for ``why`` (vLLM never drafts them)."""
        return tuple(StepPlan(s.step, None, None, "rejected", why) for s in self.steps)

    def outcome_json(self) -> dict[str, Any]:
        """The outcome keys of the layers JSON contract (docs/layers.md)."""
        r = self.step_raise
        return {
            "outcome": self.outcome,
            "rejections": [x.as_json() for x in self.rejections],
            "raises_at_step": self.raises_at_step,
            "raise": None if r is None else {"step": r.step, "path": r.path, "line": r.line, "function": r.function,
                                             "message": r.message},
        }


class _Conditioned:
    """What a route says of the guards it is taken under (its ``conditions``)."""

    conditions: tuple[DecisionRow, ...]

    def describe(self) -> str:
        return " and ".join(d.describe() for d in self.conditions)

    @property
    def cuts(self) -> tuple[str, ...]:
        return tuple(c for d in self.conditions if (c := d.cut) is not None)


@dataclass(frozen=True)
class Route(_Conditioned):
    """A drafter a runner's factory can build for an MTP method, whatever the draft
    config and K; ``conditions`` are the guards it depends on (value unknown), with the
    side the route takes."""

    runner: str
    drafter: ClassKey
    site: Hop
    conditions: tuple[DecisionRow, ...]


@dataclass(frozen=True)
class ModelRoute(_Conditioned):
    """A drafter a runner's factory builds for one MTP draft architecture (and so for its
    registered model classes); ``conditions``: the guards left unknown, with the side taken."""

    runner: str
    architecture: str
    models: tuple[ClassKey, ...]
    drafter: ClassKey
    site: Hop
    conditions: tuple[DecisionRow, ...]


def route_alternatives(routes: "Sequence[Route | ModelRoute]") -> str:
    """The conditions of the first two routes, each with the drafter it builds ("... (V2
    builds X) or ... (V1 builds Y), or N more"): how findings and reachability rows say
    when a gated route runs."""
    alts = [f"{rt.describe()} ({rt.runner.upper()} builds {rt.drafter[1]})" for rt in routes[:2]]
    more = f", or {len(routes) - 2} more" if len(routes) > 2 else ""
    return " or ".join(alts) + more


def route_cuts(routes: Sequence[Route | ModelRoute]) -> tuple[str, ...]:
    """The cuts of the evaluator that decide any of ``routes``. As in a plan (one option
    past a cut makes every step unknown), a cut on one of them leaves unknown which drafter
    a configuration gets, so whether and how code those routes run runs for it is unknown."""
    return tuple(sorted({c for rt in routes for c in rt.cuts}))


def cut_condition(cuts: tuple[str, ...]) -> str:
    """How a condition names the cuts that decide a route."""
    return f"past a cut of the evaluator ({'; '.join(cuts)})"


def paired_when(condition: str, routes: Sequence[Route | ModelRoute]) -> Pairing:
    """A pairing on ``routes`` (reached when ``condition``, "" for always), with their cuts;
    where no guard is left and every route is decided past a cut, the cut is the condition
    (a finding or row names it, never nothing)."""
    cuts = route_cuts(routes)
    if not condition and routes and all(rt.cuts for rt in routes):
        condition = cut_condition(cuts)
    return Pairing(True, condition, cuts)


@dataclass(frozen=True)
class Pairing:
    """How a function of a drafter class is paired with MTP draft models by dispatch."""

    paired: bool  # some MTP route builds a drafter whose class hierarchy holds it
    condition: str  # "" when reached unconditionally (or not a drafter's code); else when it is reached
    cuts: tuple[str, ...] = ()  # a route that runs it is decided past these cuts: what runs is unknown

    def when(self) -> str:
        """How a finding says when its code runs: "; reached only when …" (nothing when
        always), then the cuts that leave unknown which drafter a configuration gets."""
        out = f"; reached only when {self.condition}" if self.condition else ""
        if self.cuts and self.condition != cut_condition(self.cuts):
            out += f"; which drafter runs it is unknown {cut_condition(self.cuts)}"
        return out


@dataclass(frozen=True)
class Gate:
    """A factory branch that builds ``proposer`` when ``predicate`` holds, and the
    draft hf-config field the predicate reads with a default."""

    factory: FuncKey
    line: int
    condition: str
    predicate: FuncKey
    field: str
    default: str
    read_line: int
    proposer: ClassKey


@dataclass(frozen=True)
class Family:
    """One branch of a config-override function that picks draft architectures."""

    override: FuncKey
    line: int
    condition: str
    architectures: tuple[str, ...]
    sets: frozenset[str]  # hf-config fields the branch writes
    literal_writes: tuple[tuple[str, Any], ...] = ()  # fields it sets to literals, and fields its guard compares to one
