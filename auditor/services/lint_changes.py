"""lint and history (issue 18 item 10): sort the findings a change removes into *fixed*,
*behaviour changes* and *masked*, and find the by-design reports it adds where the step used
to be threaded.

:func:`classify` is the one place that decides what is fixed: ``lint`` calls it on the base
and the linted side, ``history``/``diff`` (:func:`auditor.services.history.compare.compare_scans`)
on each pair of consecutive revisions, so the two commands cannot disagree; ``bisect``
(:mod:`auditor.services.history.bisect`) asks ``compare_scans`` about the commit it finds.
Its rules, :func:`by_design` and :func:`masks`, are also what baselines
(:func:`auditor.services.baseline.sort_gone`) apply to an entry whose finding went away.

Which findings are by design is what their rule declares (``Rule.meaning`` is
:attr:`Meaning.BY_DESIGN`), never a rule code. The layers each step selects come from the
two sides' layer-reachability tables (per MTP class, per draft loop), which every scan
computes. Where a class now selects by the step, the linted side's dispatch analysis says
whether an assert on the step fails first (``raises at step N``, as ``layers`` answers).
A finding on a file the later side could not read or parse is neither fixed nor changed:
nobody can tell (lint reports that file as MTP901, history lists it among the problems).

A defect that went away is **masked**, not fixed, when one of the change's new findings
hides it (:func:`masks`): by what the new finding means (its :class:`Meaning`), the step
stops at the new finding's site — lost there, a call there that cannot take it, constant
there by design — and that site lies on the gone finding's route (its own site or a hop
of its trace, from the draft loop to the layer selection); or the new finding says a gate
never opens for one of its classes, on the drafter its route runs through. A compiled
forward cannot freeze a step a wrapper now drops: the MTP007 goes, the MTP001 comes, and
the step is still not threaded. Everything else that went is fixed.
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
    FindingRef,
    LoopReach,
    Masked,
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


def meaning_of(f: Finding, meanings: Mapping[str, Meaning | None]) -> Meaning | None:
    """What ``f`` means: what the engine stamped on it (a rule may say it for one kind of its
    findings), else what its rule declares (a finding read back from a cache carries none)."""
    return f.meaning if f.meaning is not None else meanings.get(f.rule)


#: a finding that means one of these stops the step at its own site: nothing past it sees one
STOPS_THE_STEP = frozenset({Meaning.STEP_LOST, Meaning.CANNOT_TAKE, Meaning.BY_DESIGN})


def route(f: Finding) -> frozenset[tuple[str, str]]:
    """The sites (path, function) on ``f``'s route: its own and every hop of its trace."""
    return frozenset({(f.path, f.function), *((h.path, h.function) for h in f.trace)})


def masks(new: Finding, gone: Finding, meanings: Mapping[str, Meaning | None]) -> bool:
    """Whether ``new`` (a finding the change introduced) hides ``gone`` (a defect of the base
    that went away): ``new`` stops the step at a site on ``gone``'s route (:data:`STOPS_THE_STEP`),
    or says a gate never opens for one of ``gone``'s classes on the drafter ``gone``'s route
    runs through (:attr:`Meaning.GATE_CLOSED`: its callee is that drafter), so the route is no
    longer taken. A defect hidden so is not fixed."""
    meaning = meaning_of(new, meanings)
    if meaning in STOPS_THE_STEP:
        return (new.path, new.function) in route(gone)
    if meaning is Meaning.GATE_CLOSED and new.callee:
        shared = {(c.path, c.name) for c in new.affected_classes} & {(c.path, c.name) for c in gone.affected_classes}
        return bool(shared) and any(function.split(".")[0] == new.callee for _, function in route(gone))
    return False


def _masked_by(gone: Finding, introduced: Sequence[Finding], meanings: Mapping[str, Meaning | None]) -> list[FindingRef]:
    return sorted({FindingRef(g.rule, g.fingerprint) for g in introduced if masks(g, gone, meanings)},
                  key=lambda r: (r.rule, r.fingerprint))


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
    meanings: Mapping[str, Meaning | None], *, removed: Sequence[Finding], raises: Raises | None = None,
) -> LintChanges:
    """``introduced``: the change's new findings (what lint reports). ``removed``: the base's
    findings that are gone once moved ones are paired
    (:func:`auditor.services.history.compare.gone`, or a history delta's ``fixed``; lint,
    history, bisect and the tests all pass that). ``raises``: the linted side's dispatch
    analysis, when there is one; a class whose steps now select by the step but whose code
    asserts on it gets ``raises at step i`` instead."""
    base_ids = {f.fingerprint for f in base.findings}
    base_loops, head_loops = _table(base.reachability), _table(head.reachability)
    changes = LintChanges(base_label)
    unread = {p.path for p in head.problems}  # files the head could not read or parse
    for f in removed:
        if unread & {f.path, *(h.path for h in f.trace)}:
            continue  # out of sight, not fixed: the head's problem with that file is reported instead
        if by_design(f.rule, meanings):
            steps = _steps(f, base_loops, head_loops, introduced)
            kind = _removed_kind(steps)
            if raises is not None:
                steps = _with_raises(steps, (f.path, f.function), raises)
            changes.behaviour_changes.append(BehaviourChange(kind, f, steps))
        elif by := _masked_by(f, introduced, meanings):
            changes.masked.append(Masked(f, by))
        else:
            changes.fixed.append(f)
    for f in introduced:
        if f.fingerprint in base_ids or not by_design(f.rule, meanings):
            continue
        steps = _steps(f, base_loops, head_loops, ())
        if any(s.before == LAYER_I for s in steps):
            changes.behaviour_changes.append(BehaviourChange(THREADED_TO_EAGLE, f, steps))
    return changes.sort()
