"""Interleaved before/after: another tree (``--before DIR``, e.g. a ``git worktree`` of the base) against
this one, the rows of bench_before_after.py that are cheap to repeat, the trees alternating run by run.

Usage: MTP_AUDIT_CACHE_DIR=DIR python bench/bench_before_after_interleaved.py BEFORE_TREE OUT.md [new] [--title T]
[--scans] (``new``: only the new-question rows; ``--scans``: also a cold scan (``--no-cache``), a scan of a
copy of 0.33.0 with one file edited before every run (warm facts, a new result: what a pre-merge scan
does) and ``lint --base HEAD`` in a git repository of that copy after an edit). Give it a cache whose ``layers/`` and ``layer-plans/`` are empty, or
the new questions are answered from them (it refuses a cache whose ``layers/`` holds entries)."""
import os, resource, subprocess, sys, time, statistics, json, datetime
from pathlib import Path

TITLE = "Issue 17: pre-17 tree against main, interleaved"
if "--title" in sys.argv:
    at = sys.argv.index("--title")
    TITLE = sys.argv[at + 1]
    del sys.argv[at:at + 2]
SCANS = "--scans" in sys.argv
if SCANS:
    sys.argv.remove("--scans")
TREES = {"before (pre-17)": sys.argv[1], "after (main)": str(Path(__file__).resolve().parent.parent)}
_layers = Path(os.environ["MTP_AUDIT_CACHE_DIR"]) / "layers"
assert not _layers.exists() or not any(_layers.rglob("*.txt")), f"{_layers} holds documents: the new questions would not be new"
PY = sys.executable
CPU: dict[str, list[float]] = {src: [] for src in TREES.values()}
ENV = dict(os.environ)
def run(src, args):
    env = dict(ENV, PYTHONPATH=src)
    t, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([PY, "-c", "import sys; from auditor.cli import main; main()", *args], env=env, cwd="/",
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert r.returncode in (0, 1), (src, args, r.returncode)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU seconds (user + system) of the run: on a machine shared with other work, the wall
    # clock also measures the others; the CPU time much less so.
    CPU[src].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return time.perf_counter() - t
Q1 = ["layers", "--release", "0.33.0", "--arch", "DeepSeekMTPModel", "--set", "num_nextn_predict_layers=3", "--runner", "v2", "--format", "json", "--k"]
QA = ["layers", "--release", "0.33.0", "--all", "--format", "json", "--k"]
ALL_ROWS = [("--version", lambda i: ["--version"], 9),
        ("scan warm (0.33.0)", lambda i: ["scan", "--release", "0.33.0", "-q", "--exit-zero", "-f", "json"], 5),
        ("layers one plan, asked before", lambda i: Q1 + ["3"], 5),
        ("layers --all, asked before", lambda i: QA + ["3"], 5),
        ("layers one plan, new question", lambda i: Q1 + [str(20 + i % 20)], 3),
        ("layers --all, new question", lambda i: QA + [str(40 + i % 20)], 3)]
SCAN_ROWS = []
if SCANS:
    import shutil, tempfile
    rel = Path(os.environ["MTP_AUDIT_CACHE_DIR"]) / "releases" / "vllm-0.33.0"
    work = Path(tempfile.mkdtemp(prefix="bench-s5-"))
    edited = work / "copy"
    shutil.copytree(rel / "vllm", edited / "vllm", symlinks=True)
    repo = work / "repo"
    shutil.copytree(rel / "vllm", repo / "vllm", symlinks=True)
    genv = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b")
    for gcmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
        subprocess.run(gcmd, cwd=repo, check=True, env=genv, capture_output=True)
    EDIT = "vllm/model_executor/models/deepseek_mtp.py"
    originals = {root: (root / EDIT).read_bytes() for root in (edited, repo)}
    def edit(root):  # a comment, new every call: every run is a new result for both trees
        (root / EDIT).write_bytes(originals[root] + f"\n# bench edit {time.time_ns()}\n".encode())
        return root
    SCAN_ROWS = [("scan cold (0.33.0, --no-cache)", lambda i: ["scan", "--release", "0.33.0", "--no-cache", "-q", "--exit-zero", "-f", "json"], 3),
                 ("scan, one file edited (copy of 0.33.0)", lambda i: ["scan", str(edit(edited)), "-q", "--exit-zero", "-f", "json"], 3),
                 ("lint --base HEAD, one file edited (git copy)", lambda i: ["lint", str(edit(repo)), "--base", "HEAD", "-q"], 3)]
out = [f"# {TITLE}", "",
       f"{datetime.datetime.utcnow():%Y-%m-%d %H:%M} UTC, 2 CPUs, load at start {os.getloadavg()[0]:.2f}; each run a fresh process of the tree's own code "
       "(PYTHONPATH); runs alternate before/after; warm-up run of each command first (not counted); cache: the shared facts and sdists, an empty layers/ folder.", "",
       "| benchmark | before median (min) | after median (min) | after / before | CPU s before / after (medians) |", "|---|---:|---:|---:|---:|"]
rows = (ALL_ROWS if len(sys.argv) < 4 else ALL_ROWS[4:]) + SCAN_ROWS
for name, args, n in rows:
    for src in TREES.values():
        run(src, args(99))  # warm-up: fills the result / layers cache for the asked-before rows
    t = {k: [] for k in TREES}
    for src in TREES.values():
        CPU[src].clear()
    for i in range(n):
        for k, src in TREES.items():
            t[k].append(run(src, args(i)))
    b, a = statistics.median(t["before (pre-17)"]), statistics.median(t["after (main)"])
    cb, ca = (statistics.median(CPU[src]) for src in TREES.values())
    out.append(f"| {name} | {b:.2f} ({min(t['before (pre-17)']):.2f}) | {a:.2f} ({min(t['after (main)']):.2f}) | {a/b:.2f} | {cb:.2f} / {ca:.2f} |")
    print(out[-1], flush=True)
out.append(""); out.append(f"Load at end {os.getloadavg()[0]:.2f}.")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
