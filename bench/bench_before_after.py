#!/usr/bin/env python3
"""Before/after a change, back to back on the same (shared, loaded) machine: the scan
benchmark (cold, warm, lint, lint from git) and the layers benchmark (asked before, new
question) of this tree and of another checkout (``--before``, e.g. ``git worktree add``
of the base commit), each run with its own code (``PYTHONPATH`` and the tree's own bench
scripts), alternating, then ``bench_startup.py`` with both. Writes one table.

Usage: python bench/bench_before_after.py --before DIR [--repeat 2] [--out bench/before_after_17.md] [--title T]
       python bench/bench_before_after.py --before DIR --interleaved-only [--repeat 3] --out FILE  (appends the
       new-question runs, one plan and ``--all``, the trees alternating)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_tree(src: Path, script: str, args: list[str]) -> None:
    env = dict(os.environ, PYTHONPATH=str(src))
    subprocess.run([sys.executable, str(src / "bench" / script), *args], env=env, cwd=src, check=True,
                   stdout=subprocess.DEVNULL)


NEW_QUESTION = ["layers", "--release", "0.33.0", "--arch", "DeepSeekMTPModel", "--set", "num_nextn_predict_layers=3",
                "--runner", "v2", "--format", "json", "--k"]


# ``layers --all`` asked a new question (issue 18: <= 10 s).
NEW_ALL_QUESTION = ["layers", "--release", "0.33.0", "--all", "--format", "json", "--k"]


def interleaved_new_question(trees: dict[str, Path], repeat: int, question: list[str] = NEW_QUESTION,
                             base_k: int = 40) -> dict[str, list[float]]:
    """``layers`` asked a new question (a K never asked before), the trees alternating run by
    run, so that a change in the machine's load falls on both alike."""
    import time

    times: dict[str, list[float]] = {label: [] for label in trees}
    k = base_k + int(time.time()) % 10  # not asked by an earlier run of this script (the cache is kept)
    for i in range(repeat):
        for label, src in trees.items():
            env = dict(os.environ, PYTHONPATH=str(src))
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import sys; from auditor.cli import main; main()", *question,
                            str(k + i)], env=env, cwd="/", check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[label].append(time.perf_counter() - started)
    return times


def interleaved_section(trees: dict[str, Path], repeat: int, title: str, question: list[str], base_k: int) -> str:
    t = interleaved_new_question(trees, repeat, question, base_k)
    b, a = statistics.median(t["before"]), statistics.median(t["after"])
    return "\n".join([
        "", f"## {title}, interleaved (before, after, before, after, ...)", "",
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, 1-min load average {os.getloadavg()[0]:.2f}; "
        f"`{' '.join(question)} K`; {len(t['after'])} runs each: before median {b:.2f} s (min {min(t['before']):.2f}), "
        f"after median {a:.2f} s (min {min(t['after']):.2f}), after / before {a / b:.2f}. "
        "Raw seconds: `" + json.dumps(t) + "`", ""])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--out", type=Path, default=HERE / "before_after_17.md")
    ap.add_argument("--title", default="Before/after (issue 17), back to back")
    ap.add_argument("--interleaved-only", action="store_true",
                    help="only the interleaved new-question runs, appended to --out")
    args = ap.parse_args()
    trees = {"before": args.before.resolve(), "after": HERE.parent}
    if args.interleaved_only:
        repeat = max(args.repeat, 3)
        section = interleaved_section(trees, repeat, "layers, new question (one plan)", NEW_QUESTION, 40) \
            + interleaved_section(trees, repeat, "layers --all, new question", NEW_ALL_QUESTION, 50)
        with args.out.open("a") as fh:
            fh.write(section)
        print(section)
        return
    tmp = Path(tempfile.mkdtemp(prefix="mtp-before-after-"))
    scan: dict[str, dict] = {}
    layers: dict[str, dict] = {}
    for label, src in trees.items():
        out = tmp / f"scan-{label}.json"
        run_tree(src, "bench_scan.py", ["--no-semgrep", "--no-profile", "--repeat", str(args.repeat),
                                        "--json-out", str(out), "--md-out", str(tmp / f"scan-{label}.md")])
        scan[label] = json.loads(out.read_text())["runs"]
    for label, src in trees.items():
        md = tmp / f"layers-{label}.md"
        run_tree(src, "bench_layers.py", ["--repeat", str(args.repeat), "--out", str(md)])
        m = re.search(r"Raw seconds: `(.*)`", md.read_text())
        layers[label] = json.loads(m.group(1)) if m else {}
    startup = tmp / "startup.md"
    subprocess.run([sys.executable, str(HERE / "bench_startup.py"), "--before", str(trees["before"]), "--out", str(startup)],
                   check=True, stdout=subprocess.DEVNULL)
    rows = []
    for kind in ("cold", "warm", "lint", "lint_git"):
        b = statistics.median(r["wall_s"] for r in scan["before"][kind])
        a = statistics.median(r["wall_s"] for r in scan["after"][kind])
        rows.append(f"| scan {kind} (0.33.0) | {b:.2f} | {a:.2f} | {a / b:.2f} |")
    for case in layers["after"]:
        if case in layers["before"]:
            b, a = statistics.median(layers["before"][case]), statistics.median(layers["after"][case])
            rows.append(f"| layers: {case} | {b:.2f} | {a:.2f} | {a / b:.2f} |")
    text = "\n".join([
        f"# {args.title}",
        "",
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}, 1-min load average at the end {os.getloadavg()[0]:.2f} (a machine shared with "
        f"other work: compare the two columns of this run). Medians of {args.repeat} runs, seconds; each run a fresh "
        "process of the tree's own code; before = `" + str(args.before) + "`.",
        "",
        "| benchmark | before | after | after / before |",
        "|---|---:|---:|---:|",
        *rows,
        "",
        startup.read_text().replace("# Start-up", "## Start-up"),
    ])
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
