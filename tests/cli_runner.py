"""Run ``mtp-audit`` in the test process: what a user's shell would see (exit code, stdout,
stderr) without paying an interpreter start per call. Tests that need a real process (file
descriptors, signals, audit hooks, the umask, an absent package) keep ``subprocess``."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
from pathlib import Path
from typing import Mapping

from auditor.cli.app import main


def invoke(*args: str, cwd: Path | None = None, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """``mtp-audit ARGS`` with ``env`` added to the environment and ``cwd`` as the working
    directory for the call; returns what ``subprocess.run(..., capture_output=True, text=True)`` would."""
    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update(env or {})
    if cwd is not None:
        os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["mtp-audit", *args], code, out.getvalue(), err.getvalue())
