#!/usr/bin/env python3
"""Start-up time of the command line: ``mtp-audit --version`` and ``mtp-audit --help`` against
``python -c "import typer"`` (issue 17's target: each within 2x the typer import).

Every run is a fresh interpreter (``python -X importtime`` is not used: the wall clock is
what a user waits). The programs are run round-robin, so a machine loaded by other work
slows all of them alike; the median and the minimum of ``--repeat`` runs are reported.
``--before SRC`` also times the code in another checkout (e.g. the commit before a change),
interleaved with this one.

Usage: python bench/bench_startup.py [--repeat 21] [--before DIR] [--out bench/startup_results.md]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLI = "import sys; sys.argv[0] = 'mtp-audit'; from auditor.cli import main; main()"


def timed(cmd: list[str], src: Path | None) -> float:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    started = time.perf_counter()
    subprocess.run(cmd, env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--before", type=Path, default=None, help="another checkout to time as well (its auditor/ is imported)")
    ap.add_argument("--out", type=Path, default=HERE / "startup_results.md")
    args = ap.parse_args()
    this = HERE.parent
    programs: dict[str, tuple[list[str], Path | None]] = {"python -c 'import typer'": ([sys.executable, "-c", "import typer"], None)}
    trees = [("this tree", this)] + ([("before", args.before)] if args.before else [])
    for label, src in trees:
        for what in ("--version", "--help"):
            programs[f"mtp-audit {what} ({label})"] = ([sys.executable, "-c", CLI, what], src)
    times: dict[str, list[float]] = {k: [] for k in programs}
    for _ in range(args.repeat):
        for name, (cmd, src) in programs.items():
            times[name].append(timed(cmd, src))
    typer_median = statistics.median(times["python -c 'import typer'"])
    lines = [
        "# Start-up: `mtp-audit --version` and `--help`",
        "",
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; {args.repeat} fresh interpreters each, run round-robin "
        "(the machine is shared: compare rows of one run, not runs).",
        "",
        "| program | median s | min s | median / typer import |",
        "|---|---:|---:|---:|",
    ]
    for name, ts in times.items():
        med = statistics.median(ts)
        lines.append(f"| {name} | {med:.3f} | {min(ts):.3f} | {med / typer_median:.2f}x |")
    ok = all(statistics.median(times[f"mtp-audit {w} (this tree)"]) <= 2 * typer_median for w in ("--version", "--help"))
    lines += ["", f"Target (within 2x the typer import): {'met' if ok else 'NOT met'}.", ""]
    text = "\n".join(lines)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
