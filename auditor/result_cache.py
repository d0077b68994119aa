"""Whole-scan results cached by the identity of an immutable tree (a git tree sha).

Used where the same tree is scanned again and again — the base side of ``lint``, every
release of ``history`` — so a repeat costs a JSON read. The key covers the tree, the
tool version and the effective configuration; entries are JSON written atomically; a
corrupt or foreign entry is a miss and is recomputed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from pathlib import Path

from . import __version__
from .config import Config
from .facts import FACTS_VERSION
from .model import ScanResult


def result_key(tree_id: str, config: Config) -> str:
    cfg = json.dumps(dataclasses.asdict(config), sort_keys=True)
    raw = f"{__version__}|{FACTS_VERSION}|{tree_id}|{cfg}".encode()
    return hashlib.sha256(raw).hexdigest()


class ResultCache:
    def __init__(self, root: Path | None) -> None:
        self.root = root / "results" if root is not None else None

    def _path(self, key: str) -> Path | None:
        return self.root / key[:2] / f"{key}.json" if self.root is not None else None

    def get(self, key: str) -> ScanResult | None:
        p = self._path(key)
        if p is None:
            return None
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
            if doc.get("key") != key:
                return None
            return ScanResult.from_json(doc["result"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(self, key: str, result: ScanResult) -> None:
        p = self._path(key)
        if p is None:
            return
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    json.dump({"key": key, "result": result.to_json()}, fh, separators=(",", ":"))
                os.replace(tmp, p)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError:
            pass
