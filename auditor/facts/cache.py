"""Content-addressed cache of per-file facts (JSON data only: never pickle).

Entries live at ``<cache>/facts/<key[:2]>/<key>.json`` where ``key`` hashes the
file's bytes, its path in the tree, the facts format version, the extractor's own code
(which defines the records' shape) and the msgspec release that encodes them, so a file that
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
from ..common.cache_entry import seal, unseal
from . import bindings as bindings_module
from . import extract as facts_module
from . import statements as statements_module
from .extract import FACTS_VERSION, ModuleFacts


# Every module of the extractor: a digest of their source is part of every facts key.
EXTRACTOR_MODULES = (facts_module, statements_module, bindings_module)


@lru_cache(maxsize=1)
def extractor_digest() -> str:
    """A digest of the extractor's own code (:mod:`auditor.facts.extract` and the two modules it
    imports, :mod:`.statements` and :mod:`.bindings`): an extractor changed without a ``FACTS_VERSION`` bump writes under
    other keys, so facts it would now extract differently are never served stale.

    It is also the digest of the records' shape: every record type :class:`ModuleFacts` holds
    is defined in these two modules (``tests/test_facts_cache_key.py`` walks the schema to
    check it), so entries written by a build whose records had other fields (they would often
    still decode, with new fields silently at their defaults) get other keys. Hashing the
    source costs microseconds; generating the JSON schema cost ~75 ms of every command."""
    h = hashlib.sha256()
    for module in EXTRACTOR_MODULES:
        h.update(Path(str(module.__file__)).read_bytes())
    return h.hexdigest()[:16]


def content_key(data: bytes, path: str) -> str:
    h = hashlib.sha256()
    h.update(f"mtp-audit-facts:{FACTS_VERSION}:{extractor_digest()}:msgspec-{msgspec.__version__}:{__version__}\0".encode())
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
        payload = self.payload(key)
        return self.decode(key, path, payload) if payload is not None else None

    def payload(self, key: str) -> bytes | None:
        """The verified bytes of the entry for ``key`` (sealed, :mod:`auditor.common.cache_entry`:
        an edited or truncated entry is a miss, and removed), not decoded yet."""
        p = self._path(key)
        if p is None:
            return None
        try:
            with open(p, "rb") as fh:
                raw = fh.read()
        except OSError:
            self.misses += 1
            return None
        payload = unseal(key, raw)
        if payload is None:
            self.misses += 1
            self._discard(p)
        return payload

    def decode(self, key: str, path: str, payload: bytes) -> ModuleFacts | None:
        """The facts of a verified entry (:meth:`payload`); None for an entry of another shape or build."""
        try:
            entry = _decoder.decode(payload)
            if entry.key != key or entry.tool != __version__ or entry.facts.version != FACTS_VERSION:
                raise ValueError("foreign entry")
        except (ValueError, msgspec.DecodeError, RecursionError):
            self.misses += 1
            p = self._path(key)
            if p is not None:
                self._discard(p)
            return None
        self.hits += 1
        if entry.facts.path != path:
            return msgspec.structs.replace(entry.facts, path=path)
        return entry.facts

    @staticmethod
    def _discard(p: Path) -> None:
        try:
            p.unlink()
        except OSError:
            pass

    def put(self, key: str, facts: ModuleFacts) -> None:
        p = self._path(key)
        if p is None:
            return
        try:
            raw = seal(key, _encoder.encode(CacheEntry(key, __version__, facts)))
        except UnicodeEncodeError:  # a string literal holding a lone surrogate: kept in memory only
            self.write_failures += 1
            return
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(p, raw)
        except OSError:
            self.write_failures += 1
