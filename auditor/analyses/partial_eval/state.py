"""The state of a path and the three operations that keep it sound when execution
splits: :func:`fork` (an independent copy: every object a path can reach is copied with
it, the callers' frames included), :func:`join` (one path standing for several: a value
that differs between them becomes :class:`Unknown`) and :func:`havoc` (code the evaluator
does not run may have changed these values: everything reachable from them becomes
unknown, on every name and field that holds them).

Objects are matched across paths by position (the same name, field or index), checked
by :attr:`Obj.uid`; aliasing within one path is kept (a memo per join).
"""

from __future__ import annotations

import copy
from typing import Any, Iterable

from .values import Decision, Obj, Path, Unknown, Value, _same, never_none, one_of

_MUTABLE = (Obj, list, dict)


def fork(p: Path) -> Path:
    """An independent copy of a path: objects, environments and callers' frames."""
    memo: dict[int, object] = {}
    env, roots, returned = copy.deepcopy((p.env, p.roots, p.returned), memo)
    return Path(env, list(p.decisions), returned, p.done, p.raised, list(p.built), list(p.reads), list(p.cuts), roots,
                p.raised_at, p.raised_in, p.loop_exit)


def join(paths: list[Path], why: str, decision: Decision | None = None) -> Path:
    """One path for ``paths`` (forks of one path): ``paths[0]`` updated in place, where a
    name, field or element that differs between them is unknown (``why`` says why).

    Decisions: those all paths share, then ``decision`` (the fork being joined). Done,
    returned and raised are joined too; join only paths that agree on being done."""
    base = paths[0]
    if len(paths) == 1:
        if decision is not None:
            base.decisions.append(decision)
        return base
    memo: dict[tuple[int, ...], Value] = {}
    _join_dict([q.env for q in paths], memo, why)
    if all(len(q.roots) == len(base.roots) for q in paths):
        for i in range(len(base.roots)):
            joined = _join_value([q.roots[i] for q in paths], memo, why)
            base.roots[i] = joined
    base.returned = _join_value([q.returned for q in paths], memo, why) if base.done else base.returned
    raised = [q.raised for q in paths if q.raised is not None]
    if raised and len(raised) == len(paths):
        base.raised = raised[0] if all(r == raised[0] for r in raised) else f"{raised[0]} (or {len(set(raised)) - 1} other)"
        lines = {q.raised_at for q in paths}
        base.raised_at = lines.pop() if len(lines) == 1 else None
        sites = {q.raised_in for q in paths}
        base.raised_in = sites.pop() if len(sites) == 1 else None
    common: list[Decision] = []
    for i, d in enumerate(base.decisions):
        if all(len(q.decisions) > i and q.decisions[i] == d for q in paths):
            common.append(d)
        else:
            break
    base.decisions = common + ([decision] if decision is not None else [])
    built: dict[tuple[int, int], tuple[Any, Value, int]] = {}
    for q in paths:
        for t, v, line in q.built:
            built.setdefault((id(t), line), (t, v, line))
    base.built = list(built.values())
    base.reads = list(dict.fromkeys(r for q in paths for r in q.reads))
    base.cuts = list(dict.fromkeys(c for q in paths for c in q.cuts))
    return base


def _join_value(vals: list[Any], memo: dict[tuple[int, ...], Value], why: str) -> Value:
    first = vals[0]
    if all(v is first for v in vals):
        return first  # type: ignore[no-any-return]
    key = tuple(id(v) for v in vals)
    if key in memo:
        return memo[key]
    if all(isinstance(v, Obj) for v in vals) and all(v.uid == first.uid for v in vals):
        memo[key] = first
        _join_fields([v.fields for v in vals], first.fields, memo, f"{first.label}", why)
        roles = [v.roles for v in vals]
        if all(r.keys() == first.roles.keys() for r in roles):
            for k in list(first.roles):
                joined = _join_value([r[k] for r in roles], memo, why)
                if isinstance(joined, Obj):
                    first.roles[k] = joined
                else:
                    del first.roles[k]
                    first.fields[k] = joined
        first.closed = all(v.closed for v in vals)
        first.lacks = first.lacks if all(v.lacks == first.lacks for v in vals) else None
        return first  # type: ignore[no-any-return]
    if all(type(v) is list for v in vals) and all(len(v) == len(first) for v in vals):
        memo[key] = first
        for i in range(len(first)):
            first[i] = _join_value([v[i] for v in vals], memo, why)
        return first  # type: ignore[no-any-return]
    if all(type(v) is dict for v in vals) and all(v.keys() == first.keys() for v in vals):
        memo[key] = first
        _join_dict(vals, memo, why)
        return first  # type: ignore[no-any-return]
    if not any(isinstance(v, _MUTABLE) for v in vals) and all(_same(v, first) for v in vals):
        return first  # type: ignore[no-any-return]
    out = one_of(vals, why) if not any(isinstance(v, (Obj, dict)) for v in vals) \
        else Unknown(why, not_none=all(never_none(v) for v in vals))
    memo[key] = out
    return out


def _join_dict(dicts: list[dict[Any, Any]], memo: dict[tuple[int, ...], Value], why: str) -> None:
    """Join name -> value maps into ``dicts[0]``; a name bound on some paths only is unknown."""
    first = dicts[0]
    keys = list(dict.fromkeys(k for d in dicts for k in d))
    for k in keys:
        if all(k in d for d in dicts):
            first[k] = _join_value([d[k] for d in dicts], memo, why)
        else:
            first[k] = Unknown(f"{k} ({why})", maybe_absent=True)


def _join_fields(fields: list[dict[str, Value]], into: dict[str, Value], memo: dict[tuple[int, ...], Value],
                 label: str, why: str) -> None:
    keys = list(dict.fromkeys(k for f in fields for k in f))
    for k in keys:
        if all(k in f for f in fields):
            into[k] = _join_value([f[k] for f in fields], memo, f"{label}.{k} {why}")
        else:
            into[k] = Unknown(f"{label}.{k} {why}", maybe_absent=True)


def havoc(p: Path, values: Iterable[Value], why: str) -> None:
    """Code not run may have changed ``values`` in place (and all they reach): their
    objects' fields become unknown (and open), and every list or dict among them is
    replaced by :class:`Unknown` wherever the path holds it."""
    hit: set[int] = set()
    stack = [v for v in values if isinstance(v, _MUTABLE)]
    while stack:
        v = stack.pop()
        if id(v) in hit:
            continue
        hit.add(id(v))
        if isinstance(v, Obj):
            stack.extend(x for x in [*v.fields.values(), *v.roles.values()] if isinstance(x, _MUTABLE))
        elif isinstance(v, dict):
            stack.extend(x for x in v.values() if isinstance(x, _MUTABLE))
        else:
            stack.extend(x for x in v if isinstance(x, _MUTABLE))
    if not hit:
        return
    seen: set[int] = set()

    def fix(v: Any) -> Any:
        if isinstance(v, (list, dict)) and id(v) in hit:
            return Unknown(why)
        visit(v)
        return v

    def visit(v: Any) -> None:
        if not isinstance(v, _MUTABLE) or id(v) in seen:
            return
        seen.add(id(v))
        if isinstance(v, Obj):
            if id(v) in hit:
                for k in list(v.fields):
                    if not isinstance(v.fields[k], Obj):
                        v.fields[k] = Unknown(f"{v.label}.{k} ({why})")
                    else:
                        visit(v.fields[k])
                for r in v.roles.values():
                    visit(r)
                v.closed = False
            else:
                for k in list(v.fields):
                    v.fields[k] = fix(v.fields[k])
                for r in v.roles.values():
                    visit(r)
        elif isinstance(v, dict):
            for k in list(v):
                v[k] = fix(v[k])
        else:
            for i in range(len(v)):
                v[i] = fix(v[i])

    for frame in [p.env, *p.roots]:
        if isinstance(frame, dict):
            for k in list(frame):
                frame[k] = fix(frame[k])
        else:
            visit(frame)
    p.returned = fix(p.returned)


def restore(original: dict[str, Value], joined: dict[str, Value]) -> None:
    """Make the caller's frame ``original`` hold the state of ``joined`` (its counterpart
    on a copy): objects are updated in place, so every holder sees the joined state."""
    memo: dict[int, Any] = {}

    def put(o: Any, n: Any) -> Any:
        if n is o:
            return o
        if id(n) in memo:
            return memo[id(n)]
        if isinstance(n, Obj) and isinstance(o, Obj) and o.uid == n.uid:
            memo[id(n)] = o
            old = o.fields
            o.fields = {k: put(old.get(k), v) for k, v in n.fields.items()}
            oroles = o.roles
            o.roles = {k: put(oroles.get(k), v) for k, v in n.roles.items()}
            o.closed = n.closed
            return o
        if type(n) is list and type(o) is list and len(o) == len(n):
            memo[id(n)] = o
            o[:] = [put(a, b) for a, b in zip(o, n)]
            return o
        if type(n) is dict and type(o) is dict:
            memo[id(n)] = o
            items = {k: put(o.get(k), v) for k, v in n.items()}
            o.clear()
            o.update(items)
            return o
        memo[id(n)] = n
        return n

    put(original, joined)
