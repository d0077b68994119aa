"""Content-addressed cache of per-file facts, as JSON (data only: never pickle).

Entries live at ``<cache>/facts/<key[:2]>/<key>.json`` where ``key`` hashes the
file's bytes, its path in the tree and the facts format version, so a file that
did not change between releases is analysed once. The path is part of the key
because facts depend on it: relative imports are resolved against the file's
module, so identical bytes at two paths (platform copies, a moved file) have
different facts. A corrupt, foreign or unreadable entry is a
miss; writes are atomic (temp file + rename) and a read-only or full cache
directory silently degrades to no caching.
"""

from __future__ import annotations

import hashlib
import json

try:  # orjson decodes cached facts ~3x faster; plain json is the fallback.
    import orjson as _fastjson
except ImportError:  # pragma: no cover
    _fastjson = None
from pathlib import Path
from typing import Any

from . import __version__
from .atomic import write_atomic
from .facts import FACTS_VERSION
from .fetch import default_cache_dir  # noqa: F401  (one definition of the cache location)


def content_key(data: bytes, path: str) -> str:
    h = hashlib.sha256()
    h.update(f"mtp-audit-facts:{FACTS_VERSION}:{__version__}\0".encode())
    h.update(path.encode("utf-8", "surrogateescape") + b"\0")
    h.update(data)
    return h.hexdigest()


_MODULE_SHAPE = {
    "module": str, "is_package": bool, "imports": list, "classes": dict,
    "functions": dict, "tables": dict, "module_assigns": dict,
}
_CLASS_SHAPE = {"name": str, "qualname": str, "line": int, "bases": list, "methods": dict, "class_attrs": dict}
_FUNCTION_SHAPE = {
    "name": str, "qualname": str, "line": int, "end_line": int, "params": list, "decorators": list,
    "calls": list, "assigns": dict, "dicts": dict, "subscripts": list, "attr_sets": list,
    "returns": list, "loops": list, "live": list, "dead": list, "asserts": list,
}


def _has_shape(d: Any, shape: dict[str, type]) -> bool:
    return isinstance(d, dict) and all(isinstance(d.get(k), t) for k, t in shape.items())


def _well_formed(facts: dict[str, Any]) -> bool:
    """The structure :func:`auditor.facts.extract` writes, down to each function's fields.

    An entry that parses as JSON but has another shape (a build that changed the
    facts without bumping ``FACTS_VERSION``, a hand-edited file) is a miss, not a crash.
    """
    if not _has_shape(facts, _MODULE_SHAPE):
        return False
    if not all(isinstance(i, list) and len(i) == 3 for i in facts["imports"]):
        return False
    if not all(isinstance(v, list) for v in facts["module_assigns"].values()):
        return False
    functions = list(facts["functions"].values())
    for c in facts["classes"].values():
        if not _has_shape(c, _CLASS_SHAPE):
            return False
        functions.extend(c["methods"].values())
    return all(_has_shape(f, _FUNCTION_SHAPE) for f in functions)


class FactsCache:
    def __init__(self, root: Path | None) -> None:
        self.root = root / "facts" if root is not None else None
        self.hits = 0
        self.misses = 0
        self.write_failures = 0

    def _path(self, key: str) -> Path | None:
        if self.root is None:
            return None
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str, path: str) -> dict[str, Any] | None:
        p = self._path(key)
        if p is None:
            return None
        try:
            with open(p, "rb") as fh:
                raw = fh.read()
            data = _fastjson.loads(raw) if _fastjson is not None else json.loads(raw)
        except (OSError, ValueError, UnicodeDecodeError, TypeError, RecursionError):
            self.misses += 1
            return None
        if (
            not isinstance(data, dict)
            or data.get("key") != key
            or data.get("tool") != __version__
            or not isinstance(data.get("facts"), dict)
        ):
            self.misses += 1
            return None
        facts = data["facts"]
        if facts.get("v") != FACTS_VERSION or not _well_formed(facts):
            self.misses += 1
            return None
        facts["path"] = path
        self.hits += 1
        return facts

    def put(self, key: str, facts: dict[str, Any]) -> None:
        p = self._path(key)
        if p is None:
            return
        doc = {"key": key, "tool": __version__, "facts": facts}
        raw = _fastjson.dumps(doc) if _fastjson is not None else json.dumps(doc, separators=(",", ":")).encode()
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(p, raw)
        except OSError:
            self.write_failures += 1
