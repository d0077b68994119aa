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
from typing import Sequence

from . import __version__
from .atomic import write_atomic
from .config import Config
from .facts import FACTS_VERSION
from .model import ScanResult


@lru_cache(maxsize=1)
def tool_digest() -> str:
    """Tool version plus a digest of every engine module that decides a scan's result.

    Editing the analysis invalidates cached results even when the version string did not
    change. Report-only modules (history, output, cli, progress, fetch) are left out; the
    rules' own files are added by :func:`result_key`.
    """
    h = hashlib.sha256(f"mtp-audit:{__version__}:{FACTS_VERSION}\0".encode())
    here = Path(__file__).resolve().parent
    skip = {"history_report.py", "cli.py", "cli_options.py", "cli_history.py", "progress.py",
            "releases_import.py", "fetch.py", "lint.py", "fix.py", "autofix.py"}
    for p in sorted(here.rglob("*.py")):
        if p.name in skip or p.parent.name in ("output", "history"):
            continue
        _add_file(h, p, here)
    return h.hexdigest()[:20]


def _add_file(h: "hashlib._Hash", p: Path, base: Path) -> None:
    name = p.relative_to(base).as_posix() if p.is_relative_to(base) else p.name
    try:
        h.update(name.encode() + b"\0" + p.read_bytes() + b"\0")
    except OSError:
        h.update(name.encode() + b"\0unreadable\0")


def result_key(tree_id: str, config: Config, rule_files: Sequence[Path] = (), rule_codes: Sequence[str] = ()) -> str:
    """Identity of one scan's result: tool, rules (their code and source), tree, configuration."""
    h = hashlib.sha256()
    for p in rule_files:
        _add_file(h, p, p.parent)
    cfg = json.dumps(dataclasses.asdict(config), sort_keys=True)
    raw = f"{tool_digest()}|{h.hexdigest()}|{','.join(rule_codes)}|{tree_id}|{cfg}".encode()
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
