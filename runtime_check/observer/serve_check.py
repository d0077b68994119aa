"""One observed `vllm serve` run, end to end (for gpu_check.sh; the CPU tests drive the harness
themselves):

    python -m runtime_check.observer.serve_check --arch glm4_moe --runner v2 --engine-mode compiled \\
        --runtime-python PY --out DIR [--gpu] [--k 3] [--requests 4] [--max-tokens 16]

Synthesizes the model (3 MTP layers), serves it with the observer on, sends completion
requests over HTTP, stops the server, and writes DIR/<arch>-<runner>-<mode>/{observe.jsonl,
serve.log, summary.json}. Exit 0 when the server served every request and the observer wrote
a line with per-position counts, 1 otherwise. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from . import harness
from .logfile import LogError, read_log

PROMPTS = [[3, 17, 29, 101, 7, 250, 64, 9], [11, 5, 300, 42]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="serve_check")
    ap.add_argument("--arch", required=True)
    ap.add_argument("--runner", choices=("v1", "v2"), default="v1")
    ap.add_argument("--engine-mode", choices=("eager", "compiled"), default="compiled")
    ap.add_argument("--runtime-python", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--gpu", action="store_true", help="the engine runs on CUDA (no CPU stubs)")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--extra-arg", action="append", default=[], help="passed to vllm serve (repeatable)")
    a = ap.parse_args(argv)
    work = Path(a.out) / f"{a.arch}-{a.runner}-{a.engine_mode}"
    work.mkdir(parents=True, exist_ok=True)
    model = work / "model"
    r = subprocess.run([a.runtime_python, str(harness.REPO / "runtime_check" / "driver.py"), "synth", "--arch", a.arch,
                        "--mtp-layers", "3", "--out", str(model), "--result", str(work / "synth.json")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(f"serve_check: synth failed: {r.stderr[-1000:]}", file=sys.stderr)
        return 1
    log = work / "observe.jsonl"
    log.unlink(missing_ok=True)
    cfg = harness.ServeConfig(model=model, k=a.k, runner=a.runner, engine_mode=a.engine_mode, observe=log,
                              cpu=not a.gpu, extra_args=list(a.extra_arg))
    t0 = time.monotonic()
    summary: dict = {"arch": a.arch, "runner": a.runner, "engine_mode": a.engine_mode, "k": a.k}
    try:
        with harness.Server(a.runtime_python, cfg, work / "serve.log") as server:
            summary["ready_s"] = round(server.ready_s or 0, 1)
            outs = [server.complete(PROMPTS[i % 2], a.max_tokens) for i in range(a.requests)]
        summary["completion_tokens"] = [o["usage"]["completion_tokens"] for o in outs]
    except (harness.ServeError, OSError) as e:
        summary["error"] = str(e)
    summary["wall_s"] = round(time.monotonic() - t0, 1)
    try:
        (engine,) = read_log(log)
        last = engine.record
        summary.update(event=last["event"], draft_calls=last["draft_calls"], compilation=last.get("compilation"),
                       drafter=last.get("drafter"), positions=[p.layers_ran for p in engine.positions],
                       heads=[p.heads_ran for p in engine.positions])
    except (LogError, ValueError) as e:
        summary.setdefault("error", f"observer log: {e}")
    (work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))
    ok = "error" not in summary and bool(summary.get("positions"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
