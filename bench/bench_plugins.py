#!/usr/bin/env python3
"""Benchmark: a scan of vLLM with a platform plugin vs the vLLM-only scan (issue 13).

Both on a warm cache, each run a fresh subprocess timed by the wall clock:

* ``analysis``: the whole analysis with the per-file facts cache warm and no result
  cache (what a changed tree costs: every provider runs, nothing is parsed);
* ``cli``: the ``mtp-audit scan --format json`` command a user runs twice (the second
  run of an unchanged tree answers from the result cache).

Target: the plugin scan takes at most 2x the vLLM-only scan (``analysis``, median).

Usage::

    MTP_AUDIT_CACHE_DIR=/path/to/cache python bench/bench_plugins.py [--repeat 5]

Writes ``bench/plugins_results.json`` and ``bench/PLUGINS_RESULTS.md``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from auditor.source.fetch import fetch_release  # noqa: E402
from auditor.common.paths import default_cache_dir  # noqa: E402

TARGET_RATIO = 2.0

ANALYSIS = r"""
import sys, time
from pathlib import Path
from auditor.facts.cache import FactsCache
from auditor.common.config import Config
from auditor.engine.scan import run_scan
from auditor.source.trees import CombinedTree, DirectoryTree, Root, locate_plugin
from rules import all_rules
vllm_root, cache, plugin_root, plugin_name = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
started = time.perf_counter()
tree = DirectoryTree(Path(vllm_root))
if plugin_root:
    tree = CombinedTree([Root("vllm", tree, False), Root(plugin_name, locate_plugin(Path(plugin_root), plugin_name), True)])
scan = run_scan(tree, Config(), all_rules(), FactsCache(Path(cache)), 2, None)
print(time.perf_counter() - started, scan.timing["files_parsed"], len(scan.result.findings))
"""


def run_analysis(vllm_root: Path, cache: Path, plugin_root: Path | None, plugin_name: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", ANALYSIS, str(vllm_root), str(cache), str(plugin_root or ""), plugin_name],
        capture_output=True, text=True, cwd=REPO, check=True,
    )
    seconds, parsed, findings = out.stdout.split()
    return {"seconds": float(seconds), "files_parsed": int(parsed), "findings": int(findings)}


def run_cli(args: list[str], cache: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "auditor.cli", "scan", *args, "-f", "json", "-q", "--cache-dir", str(cache)],
                   capture_output=True, cwd=REPO)
    return time.perf_counter() - started


def summary(values: list[float]) -> dict:
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3), "n": len(values)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm", default="0.30.0")
    ap.add_argument("--plugin", default="vllm-ascend==0.30.0rc2")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    cache = default_cache_dir()
    name, _, version = args.plugin.partition("==")
    vllm_root = fetch_release(args.vllm, cache, progress=False)
    plugin_root = fetch_release(version, cache, progress=False, project=name)
    # Warm the facts cache for both trees (and the result cache for the CLI runs).
    run_analysis(vllm_root, cache, None, name)
    run_analysis(vllm_root, cache, plugin_root, name)
    base_args = ["--release", args.vllm]
    plugin_args = [*base_args, "--plugin-release", args.plugin]
    run_cli(base_args, cache)
    run_cli(plugin_args, cache)
    rows: dict[str, list[float]] = {"analysis_vllm": [], "analysis_plugin": [], "cli_vllm": [], "cli_plugin": []}
    facts: dict[str, dict] = {}
    for i in range(args.repeat):
        # Interleaved, so that load from other processes hits both alike.
        a = run_analysis(vllm_root, cache, None, name)
        b = run_analysis(vllm_root, cache, plugin_root, name)
        rows["analysis_vllm"].append(a["seconds"])
        rows["analysis_plugin"].append(b["seconds"])
        facts = {"vllm": a, "plugin": b}
        rows["cli_vllm"].append(run_cli(base_args, cache))
        rows["cli_plugin"].append(run_cli(plugin_args, cache))
        print(f"[{i}] analysis {a['seconds']:.2f}s vs {b['seconds']:.2f}s; cli {rows['cli_vllm'][-1]:.2f}s vs "
              f"{rows['cli_plugin'][-1]:.2f}s", file=sys.stderr)
    result = {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "loadavg_1m": os.getloadavg()[0]},
        "vllm": args.vllm, "plugin": args.plugin, "last_run": facts,
        "summary": {k: summary(v) for k, v in rows.items()},
        "raw": rows,
    }
    ratio = result["summary"]["analysis_plugin"]["median"] / result["summary"]["analysis_vllm"]["median"]
    ratio_min = result["summary"]["analysis_plugin"]["min"] / result["summary"]["analysis_vllm"]["min"]
    result["ratio_analysis_median"] = round(ratio, 2)
    result["ratio_analysis_min"] = round(ratio_min, 2)
    result["target_ratio"] = TARGET_RATIO
    (HERE / "plugins_results.json").write_text(json.dumps(result, indent=2) + "\n")
    s = result["summary"]
    lines = [
        "# Plugin scan benchmark (issue 13)",
        "",
        f"Generated by `bench/bench_plugins.py` on {result['date']} ({result['machine']['cpus']} CPUs, "
        f"1-min load {result['machine']['loadavg_1m']:.1f} at the end: other jobs shared the machine). "
        f"vLLM {args.vllm} alone vs with `{args.plugin}`; {args.repeat} interleaved runs each, fresh processes. "
        "Raw numbers: `bench/plugins_results.json`.",
        "",
        "| run | vLLM only (min / median s) | with plugin (min / median s) | ratio (median) |",
        "| --- | --- | --- | --- |",
    ]
    for kind, label in (("analysis", "warm facts cache, full analysis"), ("cli", "`mtp-audit scan` again (result cache)")):
        v, p = s[f"{kind}_vllm"], s[f"{kind}_plugin"]
        lines.append(f"| {label} | {v['min']} / {v['median']} | {p['min']} / {p['median']} | {p['median'] / v['median']:.2f}x |")
    ok = "meets" if ratio <= TARGET_RATIO else "misses"
    lines += [
        "",
        f"Target: plugin scan ≤ {TARGET_RATIO:g}x the vLLM-only scan on a warm cache (full analysis, median): "
        f"**{ratio:.2f}x, {ok} it** (fastest runs: {ratio_min:.2f}x). Findings: vLLM only {facts['vllm']['findings']}, "
        f"with the plugin {facts['plugin']['findings']}; files parsed in the timed runs: "
        f"{facts['vllm']['files_parsed']} / {facts['plugin']['files_parsed']} (all facts from the cache).",
        "",
    ]
    (HERE / "PLUGINS_RESULTS.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
