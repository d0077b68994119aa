"""Module-level constants of the scanned tree as evaluator values: a name assigned once
at module level to a literal of constants (``_TYPES = {"a"}``, ``N_LAYERS = 1``), in the
module itself or in the module it is imported from (``from .m import N_LAYERS``, also
inside a function), read with ``ast.literal_eval`` from the assignment's text (never run).
A name a function of its module rebinds (``global X``) is no constant.
"""

from __future__ import annotations

import ast

from ...index.index import Index
from .values import Unknown, Value

_MAX_HOPS = 8


def module_constant(index: Index, path: str, name: str, hops: int = 0) -> Value:
    """The value of ``name`` in module ``path``; :class:`Unknown` unless every place it
    can come from (alternative imports included) gives the same literal."""
    # a lookup: after the loading phase a module not loaded is not parsed, and its constant
    # stays unknown (sound) instead of failing the scan
    facts = index.lookup(path)
    if facts is None or hops > _MAX_HOPS:
        return Unknown(name)
    if name in facts.rebound_globals:
        return Unknown(f"{name} (rebound at run time)")
    assigns = facts.module_assigns.get(name, ())
    if assigns:
        if len(assigns) != 1 or not assigns[0].constant:
            return Unknown(name)
        return _literal(assigns[0].text, name)
    found: list[Value] = []
    for module, attr in index.imports_of(path).get(name, []):
        target = index.path_of_module.get(module)
        if attr is None or target is None:
            return Unknown(name)
        found.append(module_constant(index, target, attr, hops + 1))
    if not found or any(isinstance(v, Unknown) for v in found):
        return Unknown(name)
    first = found[0]
    if all(type(v) is type(first) and v == first for v in found):
        return first
    return Unknown(f"{name} (differs between its imports)")


def _literal(text: str, name: str) -> Value:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return Unknown(name)
    if isinstance(value, (set, frozenset)):
        return frozenset(value)
    if isinstance(value, (str, int, float, bool, tuple, list)) or value is None:
        return value
    return Unknown(name)
