"""Content-addressed cache of per-file facts (JSON data only: never pickle).

Entries live at ``<cache>/facts/<key[:2]>/<key>.json`` where ``key`` hashes the
file's bytes, its path in the tree and the facts format version, so a file that
did not change between releases is analysed once. The path is part of the key
because facts depend on it: relative imports are resolved against the file's
module, so identical bytes at two paths (platform copies, a moved file) have
different facts.

An entry is decoded straight into :class:`auditor.facts.ModuleFacts`: the typed
records are the schema, so a corrupt, foreign or differently-shaped entry (a build
that changed the facts without bumping ``FACTS_VERSION``, a hand-edited file) fails
to decode and is a miss, never a crash. Writes are atomic (temp file + rename) and a
read-only or full cache directory silently degrades to no caching.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import msgspec

from .. import __version__
from ..common.atomic import write_atomic
from .extract import FACTS_VERSION, ModuleFacts


@lru_cache(maxsize=1)
def schema_digest() -> str:
    """A digest of the fact records' JSON schema: entries written by a build whose records
    had another shape get another key (they would often still decode, with new fields
    silently at their defaults)."""
    schema = msgspec.json.encode(msgspec.json.schema(ModuleFacts))
    return hashlib.sha256(schema).hexdigest()[:16]


def content_key(data: bytes, path: str) -> str:
    h = hashlib.sha256()
    h.update(f"mtp-audit-facts:{FACTS_VERSION}:{schema_digest()}:{__version__}\0".encode())
    h.update(path.encode("utf-8", "surrogateescape") + b"\0")
    h.update(data)
    return h.hexdigest()


class CacheEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    key: str
    tool: str
    facts: ModuleFacts


_decoder = msgspec.json.Decoder(CacheEntry)
_encoder = msgspec.json.Encoder()


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

    def get(self, key: str, path: str) -> ModuleFacts | None:
        p = self._path(key)
        if p is None:
            return None
        try:
            with open(p, "rb") as fh:
                entry = _decoder.decode(fh.read())
        except (OSError, msgspec.DecodeError, RecursionError):
            self.misses += 1
            return None
        if entry.key != key or entry.tool != __version__ or entry.facts.version != FACTS_VERSION:
            self.misses += 1
            return None
        self.hits += 1
        if entry.facts.path != path:
            return msgspec.structs.replace(entry.facts, path=path)
        return entry.facts

    def put(self, key: str, facts: ModuleFacts) -> None:
        p = self._path(key)
        if p is None:
            return
        raw = _encoder.encode(CacheEntry(key, __version__, facts))
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(p, raw)
        except OSError:
            self.write_failures += 1
