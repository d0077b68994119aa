"""lint and history (issue 18 item 10): sort the findings a change removes into *fixed* and
*behaviour changes*, and find the by-design reports it adds where the step used to be threaded.

:func:`classify` is the one place that decides what is fixed: ``lint`` calls it on the base
and the linted side, ``history``/``diff`` (:func:`auditor.services.history.compare.compare_scans`)
on each pair of consecutive revisions, so the two commands cannot disagree. Its rule,
:func:`by_design`, is also what baselines (:func:`auditor.services.baseline.sort_gone`)
and ``bisect`` (:mod:`auditor.services.history.bisect`) apply to a finding that went away.

Which findings are by design is what their rule declares (``Rule.meaning`` is
:attr:`Meaning.BY_DESIGN`), never a rule code. The layers each step selects come from the
two sides' layer-reachability tables (per MTP class, per draft loop), which every scan
computes. Where a class now selects by the step, the linted side's dispatch analysis says
whether an assert on the step fails first (``raises at step N``, as ``layers`` answers).
A finding on a file the later side could not read or parse is neither fixed nor changed:
nobody can tell (lint reports that file as MTP901, history lists it among the problems).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping, Sequence

from ..analyses.dispatch.outcomes import StepRaise
from ..engine.scan import RuleClass
from ..model.findings import (
    ClassReachability,
    ClassRef,
    Finding,
    LoopReach,
    Meaning,
    ScanResult,
    EAGLE_TO_THREADED,
    EAGLE_TO_UNKNOWN,
    EAGLE_TO_UNREACHED,
    LAYER_0,
    LAYER_I,
    NOT_REACHED,
    STEP_UNKNOWN,
    ReachVerdict,
    THREADED_TO_EAGLE,
    BehaviourChange,
    LintChanges,
    StepChange,
)

#: per class, per loop (path, function): how the loop reaches the class
LoopTable = dict[tuple[str, str], dict[tuple[str, str], LoopReach]]

#: draft steps 0..RAISE_STEPS-1 are checked for an assert that fails on the step
RAISE_STEPS = 8


#: the linted side's answer to "at which step does this loop's call into this class raise?"
Raises = Callable[[tuple[str, str], tuple[str, str], int], "StepRaise | None"]


RAISES_AT = "raises at step "


def raises_at(step: int) -> str:
    """``StepChange.after`` of a class whose code fails an assert on the step at ``step``."""
    return f"{RAISES_AT}{step}"


def meanings_of(rules: Sequence[RuleClass]) -> dict[str, Meaning | None]:
    """Rule code -> the meaning its rule declares (a cached result does not carry it)."""
    return {rule.code: getattr(rule, "meaning", None) for rule in rules}


def by_design(rule: object, meanings: Mapping[str, Meaning | None]) -> bool:
    """Whether ``rule``'s (a rule code's) reports are by design, its rule declaring
    :attr:`Meaning.BY_DESIGN`: one that went away is a behaviour change, not a fix. The one
    test of it lint, history, baselines and bisect share; an unknown code (a hand-edited
    baseline entry) is not by design."""
    return isinstance(rule, str) and meanings.get(rule) is Meaning.BY_DESIGN


def _loop_key(loop: str) -> tuple[str, str]:
    """``"path:line Class.method"`` -> (path, Class.method): lines move with any edit. A
    loop a drafter runs with ``self`` of a subclass is labelled ``… (as Sub)``; its report
    names the loop's own method."""
    where, _, function = loop.partition(" ")
    return where.rpartition(":")[0] or where, function.split(" (as ", 1)[0]


def _table(reachability: Sequence[ClassReachability]) -> LoopTable:
    table: LoopTable = {}
    for cls in reachability:
        for reach in cls.loops:
            table.setdefault(_loop_key(reach.loop), {})[(cls.model_class.path, cls.model_class.name)] = reach
    return table


def _step(reach: LoopReach | None) -> str:
    if reach is None:
        return NOT_REACHED
    if reach.raises is not None:  # the row's own outcome: it selects by the step until the assert fails
        return raises_at(reach.raises.step)
    if reach.verdict is ReachVerdict.UNKNOWN:
        return STEP_UNKNOWN
    if reach.lost_at is not None:  # the loop hands the step on, a selection never gets it: not "layer 0"
        return reach.lost_at
    return LAYER_I if reach.steps_reach_layers else LAYER_0


def _detail(reach: LoopReach) -> str:
    r = reach.raises
    return f"{r.path}:{r.line} {r.function}: {r.message}" if r is not None else reach.detail


def _touches(f: Finding, ref: ClassRef) -> bool:
    """Whether a new finding is about that class (it lists it, or sits on it)."""
    if any(c.path == ref.path and c.name == ref.name for c in f.affected_classes):
        return True
    return f.path == ref.path and f.function.split(".")[0] == ref.name


def _steps(f: Finding, base: LoopTable, head: LoopTable, introduced: Sequence[Finding]) -> list[StepChange]:
    loop = (f.path, f.function)
    before, after = base.get(loop, {}), head.get(loop, {})
    classes = {(c.path, c.name) for c in f.affected_classes} | set(before) | set(after)
    out = []
    for path, name in sorted(classes):
        ref = ClassRef(path, name)
        was, now = before.get((path, name)), after.get((path, name))
        related = tuple(sorted({g.fingerprint for g in introduced if g is not f and _touches(g, ref)}))
        shown = now or was
        detail = _detail(shown) if shown is not None else ""
        out.append(StepChange(ref, _step(was), _step(now), detail, related))
    return out


def _removed_kind(steps: Sequence[StepChange]) -> str:
    afters = {s.after for s in steps}
    if LAYER_I in afters or any(a.startswith(RAISES_AT) for a in afters):
        return EAGLE_TO_THREADED  # a loop that now threads the step into a model that asserts on it too
    if afters == {NOT_REACHED}:
        return EAGLE_TO_UNREACHED
    return EAGLE_TO_UNKNOWN  # gone while the loop still reaches its classes with layer 0: the report went, not the reason


def threads_now(changes: LintChanges) -> bool:
    """Whether some class's steps select by the step after the change (then ask ``raises``)."""
    return any(s.after == LAYER_I for c in changes.behaviour_changes for s in c.steps)


def _with_raises(steps: list[StepChange], loop: tuple[str, str], raises: Raises) -> list[StepChange]:
    out = []
    for s in steps:
        hit = raises(loop, (s.model_class.path, s.model_class.name), RAISE_STEPS) if s.after == LAYER_I else None
        if hit is not None:
            s = replace(s, after=raises_at(hit.step), detail=f"{hit.path}:{hit.line} {hit.function}: {hit.message}")
        out.append(s)
    return out


def classify(
    base: ScanResult, head: ScanResult, introduced: Sequence[Finding], base_label: str,
    meanings: Mapping[str, Meaning | None], raises: Raises | None = None,
    removed: Sequence[Finding] | None = None,
) -> LintChanges:
    """``introduced``: the change's new findings (what lint reports). ``raises``: the linted
    side's dispatch analysis, when there is one; a class whose steps now select by the step
    but whose code asserts on it gets ``raises at step i`` instead. ``removed``: the base's
    findings that are gone (default: those whose fingerprint the head lacks; history passes
    what is left once moved findings are paired)."""
    head_ids = {f.fingerprint for f in head.findings}
    base_ids = {f.fingerprint for f in base.findings}
    base_loops, head_loops = _table(base.reachability), _table(head.reachability)
    changes = LintChanges(base_label)
    gone = [f for f in base.findings if f.fingerprint not in head_ids] if removed is None else removed
    unread = {p.path for p in head.problems}  # files the head could not read or parse
    for f in gone:
        if unread & {f.path, *(h.path for h in f.trace)}:
            continue  # out of sight, not fixed: the head's problem with that file is reported instead
        if by_design(f.rule, meanings):
            steps = _steps(f, base_loops, head_loops, introduced)
            kind = _removed_kind(steps)
            if raises is not None:
                steps = _with_raises(steps, (f.path, f.function), raises)
            changes.behaviour_changes.append(BehaviourChange(kind, f, steps))
        else:
            changes.fixed.append(f)
    for f in introduced:
        if f.fingerprint in base_ids or not by_design(f.rule, meanings):
            continue
        steps = _steps(f, base_loops, head_loops, ())
        if any(s.before == LAYER_I for s in steps):
            changes.behaviour_changes.append(BehaviourChange(THREADED_TO_EAGLE, f, steps))
    return changes.sort()
