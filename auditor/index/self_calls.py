"""The methods an instance runs from its entry methods through ``self.m()`` calls: the one
walk the draft-loop analysis (which code proposes draft tokens) and the dispatch analysis
(which code a built drafter runs) both take, resolved through the class's MRO."""

from __future__ import annotations

from ..facts.extract import FunctionFact
from .index import ClassKey, FuncKey, Index


def self_call_closure(index: Index, cls: ClassKey, entries: list[str],
                      bound: dict[str, list[str]] | None = None) -> list[tuple[ClassKey, str, FunctionFact]]:
    """``(defining class, name, function)`` of every method an instance of ``cls`` runs from
    ``entries`` through calls on ``self``, each resolved in ``cls`` (a subclass's override
    wins), breadth first from the entries. With ``bound`` (attribute -> bound methods, see
    :func:`bound_methods`), a method that reads ``self.attr`` also runs what ``attr`` holds."""
    todo = list(entries)
    seen: set[str] = set()
    out: list[tuple[ClassKey, str, FunctionFact]] = []
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        found = index.method(cls, name)
        if found is None:
            continue
        owner, fn = found
        out.append((owner, name, fn))
        todo += [c.func[1] for c in fn.calls if c.func and len(c.func) == 2 and c.func[0] == "self"]
        if bound:
            # A bound method kept in an attribute and called through it later
            # (``self._runnable = self._run_draft`` ... ``partial(self._runnable, ...)()``).
            for read in fn.live:
                if read.startswith("self."):
                    todo += bound.get(read[5:], [])
    return out


def self_callee(index: Index, cls: ClassKey, key: FuncKey,
                func: tuple[str, ...]) -> tuple[FuncKey, FunctionFact] | None:
    """The method an instance of ``cls`` runs for a call ``self.<m>(...)`` or
    ``super().<m>(...)`` in its method ``key``: resolved in ``cls``'s MRO, for ``super()``
    past the class defining ``key`` (None when that class is not in the MRO, or nothing
    defines ``m``)."""
    if len(func) != 2 or func[0] not in ("self", "super()"):
        return None
    after = None
    if func[0] == "super()":
        owner_name = key[1].rpartition(".")[0]
        after = (key[0], owner_name) if owner_name else index.patched_owner(key)
        if after is None or after not in index.mro(cls):
            return None
    found = index.method(cls, func[1], after=after)
    return ((found[0][0], f"{found[0][1]}.{func[1]}"), found[1]) if found else None


def bound_methods(index: Index, cls: ClassKey) -> dict[str, list[str]]:
    """``self.attr = self.m`` in the class hierarchy's methods: attr -> [m]."""
    out: dict[str, list[str]] = {}
    for c in index.mro(cls):
        for fn in index.methods(c).values():
            for a in fn.attr_assigns:
                ch = a.value.chain
                if (len(a.target) == 2 and a.target[0] == "self" and ch and len(ch) == 2 and ch[0] == "self"
                        and index.method(cls, ch[1]) is not None):
                    out.setdefault(a.target[1], []).append(ch[1])
    return out
