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
from functools import lru_cache
from pathlib import Path

from . import __version__
from .atomic import write_atomic
from .config import Config
from .facts import FACTS_VERSION
from .model import ScanResult


@lru_cache(maxsize=1)
def tool_digest() -> str:
    """Tool version plus a digest of every module that decides a scan's result.

    Editing the analysis or a rule invalidates cached results even when the version
    string did not change. Report-only modules (history, output, cli, progress, fetch) are left out.
    """
    h = hashlib.sha256(f"mtp-audit:{__version__}:{FACTS_VERSION}\0".encode())
    here = Path(__file__).resolve().parent
    import rules as _rules

    rules_dir = Path(_rules.__file__).resolve().parent
    skip = {"history.py", "history_report.py", "cli.py", "cli_options.py", "cli_history.py", "progress.py",
            "releases_import.py", "fetch.py", "lint.py", "fix.py"}
    for folder in (here, rules_dir):
        for p in sorted(folder.glob("*.py")):
            if p.name in skip:
                continue
            try:
                h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
            except OSError:
                h.update(p.name.encode() + b"\0unreadable\0")
    return h.hexdigest()[:20]


def result_key(tree_id: str, config: Config) -> str:
    cfg = json.dumps(dataclasses.asdict(config), sort_keys=True)
    raw = f"{tool_digest()}|{tree_id}|{cfg}".encode()
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
            write_atomic(p, json.dumps({"key": key, "result": result.to_json()}, separators=(",", ":")))
        except OSError:
            pass  # a read-only or full cache is no cache, not an error
