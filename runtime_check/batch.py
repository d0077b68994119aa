"""Many driver runs on one import of vLLM: the client of runtime_check/zygote.py.

Pure Python (no torch, no vLLM), like runtime_check/cli.py. ``Zygote.run(args)`` takes the
arguments ``cli.run_driver`` takes and returns what it returns (the run's data, or
RuntimeCheckError): the zygote forks one child per run from a process that imported vLLM
once, and the child runs the driver's ``main`` on the same arguments. Runs that share a
zygote share its runner (fixed before the import); a run with --patch takes its own process
(``cli.run_driver``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from .envs import engine_process_env
from .runs import RunDir, RuntimeCheckError, _Progress, read_driver_result

ZYGOTE = Path(__file__).resolve().parent / "zygote.py"
IMPORT_TIMEOUT_S = 900.0
# Beyond a run's own limit (enforced by the zygote): the time to fork, kill and answer.
ANSWER_GRACE_S = 60.0


class Zygote:
    """One runtime Python that imported vLLM for ``runner``; ``run`` forks a driver run from it."""

    def __init__(self, py: str, runner: str, rundir: RunDir) -> None:
        self.py, self.runner, self.rundir = py, runner, rundir
        self.import_s: float | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._status: IO[str] | None = None
        self._buf = ""
        self.log: Path | None = None
        self.last_answer: dict[str, Any] = {}  # the zygote's answer about the last run

    def __enter__(self) -> "Zygote":
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        work = self.rundir.new(f"zygote-{self.runner}")
        self.log = work / "zygote.log"
        r, w = os.pipe()
        _Progress.say(f"importing vLLM once for {self.runner} runs")
        with open(self.log, "wb") as logf:
            try:
                self._proc = subprocess.Popen(
                    [self.py, str(ZYGOTE), "--runner", self.runner, "--work-dir", str(work), "--status-fd", str(w)],
                    stdin=subprocess.PIPE, stdout=logf, stderr=subprocess.STDOUT, pass_fds=(w,),
                    start_new_session=True, env=engine_process_env())
            except OSError as e:
                os.close(r)
                os.close(w)
                raise RuntimeCheckError(f"cannot start {self.py}: {e}")
        os.close(w)
        self._status = os.fdopen(r, "r")
        ready = self._answer(IMPORT_TIMEOUT_S)
        if not ready.get("ready"):
            self.close()
            raise RuntimeCheckError(ready.get("error") or f"the zygote did not start ({self.rundir.log_hint(self.log)})")
        self.import_s = ready.get("import_s")

    def _answer(self, timeout: float) -> dict[str, Any]:
        """The zygote's next status line (a JSON object)."""
        assert self._status is not None and self._proc is not None
        deadline = time.monotonic() + timeout
        fd = self._status.fileno()
        while "\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise RuntimeCheckError(f"the zygote did not answer within {timeout:g} s")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not ready:
                continue
            chunk = os.read(fd, 65536).decode()
            if not chunk:  # the zygote is gone
                rc = self._proc.wait()
                assert self.log is not None
                raise RuntimeCheckError(f"the zygote exited with code {rc} ({self.rundir.log_hint(self.log)})")
            self._buf += chunk
        line, self._buf = self._buf.split("\n", 1)
        value = json.loads(line)
        if not isinstance(value, dict):
            raise RuntimeCheckError("the zygote wrote a status that is not a JSON object")
        return value

    def run(self, args: list[str], timeout: float) -> dict[str, Any]:
        """One driver run (``args`` as for cli.run_driver), forked from the zygote."""
        if self._proc is None or self._proc.poll() is not None:
            self.start()
        assert self._proc is not None and self._proc.stdin is not None
        work = self.rundir.new(args[0])
        result = work / "result.json"
        log = work / "engine.log"
        argv = [*args, "--result", str(result)] + (["--work-dir", str(work)] if args[0] == "check" else [])
        shown = [a for i, a in enumerate(args)
                 if not a.startswith("/") and not (i + 1 < len(args) and args[i + 1].startswith("/"))]
        _Progress.say(f"starting vLLM (forked): {' '.join(shown)[:160]}")
        self._proc.stdin.write((json.dumps({"argv": argv, "log": str(log), "timeout": timeout}) + "\n").encode())
        self._proc.stdin.flush()
        ans = self._answer(timeout + ANSWER_GRACE_S)
        self.last_answer = ans
        _Progress.say(f"vLLM run finished in {ans.get('wall_s', 0):.0f} s")
        if ans.get("timed_out"):
            raise RuntimeCheckError(f"the vLLM run did not finish within {timeout:g} s ({self.rundir.log_hint(log)})")
        return read_driver_result(result, int(ans["rc"]), log, self.rundir)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin is not None:
                proc.stdin.close()  # end of requests: the zygote exits
            proc.wait(timeout=30)
        except (subprocess.TimeoutExpired, OSError):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        if self._status is not None:
            self._status.close()
            self._status = None
