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
from typing import Any, Sequence

from .. import __version__
from ..common.atomic import write_atomic
from ..common.config import Config
from ..facts.extract import FACTS_VERSION
from ..model.findings import ScanResult


# Packages and modules of ``auditor/`` that cannot change a scan's result.
# (A cache of rendered documents adds its renderer's file to its own key.)
REPORT_ONLY_PACKAGES = ("cli", "output", "fix")
REPORT_ONLY_MODULES = ("common/progress.py", "source/fetch.py", "source/releases.py", "services/lint.py",
                       "services/history/__init__.py", "services/history/bisect.py", "services/history/compare.py",
                       "services/history/scan.py")


@lru_cache(maxsize=1)
def tool_digest() -> str:
    """Tool version plus a digest of every engine module that decides a scan's result.

    Editing the analysis invalidates cached results even when the version string did not
    change. Report-only modules (history, output, cli, progress, fetch) are left out; the
    rules' own files are added by :func:`result_key`.
    """
    h = hashlib.sha256(f"mtp-audit:{__version__}:{FACTS_VERSION}\0".encode())
    here = Path(__file__).resolve().parent.parent
    for p in sorted(here.rglob("*.py")):
        rel = p.relative_to(here).as_posix()
        if rel.split("/", 1)[0] in REPORT_ONLY_PACKAGES or rel in REPORT_ONLY_MODULES:
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


class KeyedFiles:
    """Files named by a hex key under ``<cache>/<folder>/<key[:2]>/<key><suffix>``: the one
    storage every result-like cache uses. A missing, unreadable or unwritable entry is a miss
    or a no-op (a read-only or full cache is no cache, not an error); writes are atomic."""

    def __init__(self, root: Path | None, folder: str, suffix: str = ".json") -> None:
        self.root = root / folder if root is not None else None
        self.suffix = suffix

    def path(self, key: str) -> Path | None:
        return self.root / key[:2] / f"{key}{self.suffix}" if self.root is not None else None

    def read(self, key: str) -> str | None:
        p = self.path(key)
        if p is None:
            return None
        try:
            return p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    def write(self, key: str, text: str) -> None:
        p = self.path(key)
        if p is None:
            return
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(p, text)
        except OSError:
            pass

    def read_json(self, key: str, field: str) -> Any:
        """``doc[field]`` of an entry written by :meth:`write_json` for this ``key``; None for a
        miss or a corrupt or foreign entry."""
        text = self.read(key)
        if text is None:
            return None
        try:
            doc = json.loads(text)
        except ValueError:
            return None
        if not isinstance(doc, dict) or doc.get("key") != key:
            return None
        return doc.get(field)

    def write_json(self, key: str, field: str, value: Any) -> None:
        self.write(key, json.dumps({"key": key, field: value}, separators=(",", ":")))


class ResultCache:
    def __init__(self, root: Path | None) -> None:
        self.files = KeyedFiles(root, "results")
        self.root = self.files.root

    def get(self, key: str) -> ScanResult | None:
        doc = self.files.read_json(key, "result")
        if doc is None:
            return None
        try:
            return ScanResult.from_json(doc)
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def put(self, key: str, result: ScanResult) -> None:
        self.files.write_json(key, "result", result.to_json())
