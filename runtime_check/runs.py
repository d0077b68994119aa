"""What a driver run hands back, shared by the per-process runs of runtime_check/cli.py and the
batched runs of runtime_check/batch.py: the one-line error, the run directory, the progress
lines and the reading of a run's result file. Pure Python (no torch, no vLLM)."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import typer

class RuntimeCheckError(Exception):
    """Reported as one line, `mtp-audit: error: ...`, exit 2."""


class RunDir:
    """The temporary directory of one command (synthesized models, engine logs, results,
    patch overlays). Removed when the command ends unless the user asked to keep it."""

    def __init__(self, keep: bool) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="mtp-audit-run-"))
        self.keep = keep
        self._n = 0

    def new(self, name: str) -> Path:
        self._n += 1
        d = self.path / f"{self._n:02d}-{name}"
        d.mkdir()
        return d

    def log_hint(self, log: Path) -> str:
        return f"log: {log}" if self.keep else "rerun with --keep-run-dir to keep the engine log"

    def __enter__(self) -> "RunDir":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.keep:
            typer.echo(f"mtp-audit: run directory kept: {self.path}", err=True)
            return
        try:
            shutil.rmtree(self.path)
        except OSError as e:  # never fatal: the results are already in hand
            typer.echo(f"mtp-audit: warning: could not remove {self.path}: {e.strerror or e}", err=True)


class _Progress:
    """One line on stderr when an engine run starts and when it ends (a run takes 15 s to
    minutes); -q silences them. Set once per command."""

    quiet = False

    @classmethod
    def say(cls, message: str) -> None:
        if not cls.quiet:
            typer.echo(f"mtp-audit: {message}", err=True)


def read_driver_result(result: Path, rc: int, log: Path, rundir: RunDir) -> dict[str, Any]:
    """One driver run's result file, as `run_driver` returns it (shared with the batched runs
    of runtime_check/batch.py): the run's data, or RuntimeCheckError for a reportable error."""
    try:
        data = json.loads(result.read_text())
    except (OSError, ValueError):
        raise RuntimeCheckError(f"the vLLM run exited with code {rc} and no result ({rundir.log_hint(log)})")
    if "error" in data:
        raise RuntimeCheckError(f"{data['error']} ({rundir.log_hint(log)})"
                                if rc != 0 and any(w in data["error"] for w in ("failed to start", "driver failed", "failed while"))
                                else data["error"])
    if rc != 0:
        raise RuntimeCheckError(f"the vLLM run exited with code {rc} ({rundir.log_hint(log)})")
    if not isinstance(data, dict):
        raise RuntimeCheckError(f"the vLLM run wrote a result that is not a JSON object ({rundir.log_hint(log)})")
    if data.get("outcome") not in (None, "ran"):
        try:
            cause = background_exception(log.read_text(errors="replace"))
        except OSError:
            cause = None
        if cause is not None:
            data["background_exception"] = cause
    return data


# A line of a vLLM background process in the engine log: "(Worker pid=7) ERROR 12-01 12:39:28 [f.py:870] text"
_BACKGROUND_LINE = re.compile(r"^\((?P<proc>[\w ]+?) pid=\d+\) (?:\w+ [\d-]+ [\d:]+ \[[^\]]*\] )?(?P<text>.*)$")
_EXCEPTION_LINE = re.compile(r"^(?P<exc>[A-Za-z_][\w.]*(?:Error|Exception|Exit)): (?P<msg>.+)$")


def background_exception(log_text: str) -> dict[str, str] | None:
    """The last exception a vLLM background process (a worker, the engine core) logged: where
    the engine's own exception only says "see stack trace for root cause"."""
    found = None
    for line in log_text.splitlines():
        m = _BACKGROUND_LINE.match(line)
        e = _EXCEPTION_LINE.match(m.group("text").strip()) if m else None
        if m and e:
            found = {"process": m.group("proc"), "exception": e.group("exc").rsplit(".", 1)[-1],
                     "message": e.group("msg").strip()[:500]}
    return found
