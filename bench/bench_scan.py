#!/usr/bin/env python3
"""Benchmark mtp-audit on one real vLLM release, beside Semgrep OSS.

Measures, each as a fresh subprocess timed with the wall clock and ``/usr/bin/time -v``
(falling back to ``getrusage(RUSAGE_CHILDREN)`` in a fresh wrapper process):

* cold  full scan: a fresh, empty ``--cache-dir``, ``--workers N``;
* warm  full scan: the same cache, second run;
* lint  scan: a copy of the tree with one comment added to
  ``vllm/model_executor/models/deepseek_mtp.py``, scanned with the warm cache (one file
  changed, as an editor/pre-commit integration would see it);
* semgrep: ``semgrep scan`` with ``bench/semgrep-mtp.yml`` (≈ MTP001 + MTP002) over the
  same ``vllm/`` directory, ``-j N``.

Each is repeated ``--repeat`` times (min / median reported). Peak RSS is given two ways:
the largest single process (``time -v``: ``Maximum resident set size``; worker processes
are separate processes, so this is *not* their sum) and the peak of the summed RSS of the
whole process tree, sampled from /proc every 50 ms.

The warm scan is also profiled with pyinstrument (when installed) and the top self-time
hotspots are written to RESULTS.md.

Usage::

    . .venv/bin/activate
    python bench/bench_scan.py                 # 0.33.0, 3 repeats, 2 workers, semgrep if present
    python bench/bench_scan.py --no-semgrep --repeat 1

Writes ``bench/results.json`` (raw) and ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import collections
import datetime as _dt
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from auditor.source.fetch import default_cache_dir, fetch_release  # noqa: E402

TARGETS = {"cold_s": 15.0, "warm_s": 2.0, "rss_mb": 1536.0, "lint_git_s": 3.0}
LINT_FILE = "vllm/model_executor/models/deepseek_mtp.py"
GNU_TIME = "/usr/bin/time"


# --------------------------------------------------------------------------- measuring


_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                kids.extend(int(x) for x in fh.read().split())
    except (OSError, ValueError):
        pass
    return kids


def _tree_rss_kb(root_pid: int) -> int:
    """Summed RSS (kB) of root_pid and all its descendants, from /proc (cheap: no full /proc walk)."""
    total, stack = 0, [root_pid]
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/statm", "rb") as fh:
                total += int(fh.read().split()[1]) * _PAGE_KB
        except (OSError, ValueError, IndexError):
            continue
        stack.extend(_children(p))
    return total


class _TreeSampler(threading.Thread):
    def __init__(self, pid: int, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval, self.peak_kb = pid, interval, 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.peak_kb = max(self.peak_kb, _tree_rss_kb(self.pid))
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


_RUSAGE_WRAPPER = r"""
import resource, subprocess, sys
rc = subprocess.run(sys.argv[1:]).returncode
print("MAXRSS_KB=%d" % resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
sys.exit(rc)
"""


def measure(cmd: list[str], cwd: Path | None = None, env: dict | None = None, ok_codes=(0,)) -> dict:
    """Run cmd once; wall seconds, max single-process RSS, peak summed tree RSS."""
    if os.access(GNU_TIME, os.X_OK):
        full = [GNU_TIME, "-v", *cmd]
        how = "/usr/bin/time -v"
    else:
        full = [sys.executable, "-c", _RUSAGE_WRAPPER, *cmd]
        how = "getrusage(RUSAGE_CHILDREN)"
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(full, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    sampler = _TreeSampler(proc.pid)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    sampler.stop()
    text = err.decode(errors="replace")
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text) or re.search(r"MAXRSS_KB=(\d+)", text)
    maxrss_kb = int(m.group(1)) if m else None
    if proc.returncode not in ok_codes:
        raise RuntimeError(f"command failed (rc={proc.returncode}): {' '.join(cmd)}\n{text[-4000:]}")
    return {
        "wall_s": round(wall, 3),
        "max_rss_mb": round(maxrss_kb / 1024, 1) if maxrss_kb else None,
        "tree_peak_rss_mb": round(sampler.peak_kb / 1024, 1),
        "rss_method": how,
        # other work on the machine skews wall times: the 1-minute load average before and after
        "loadavg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }


def summarize(runs: list[dict]) -> dict:
    out = {"n": len(runs)}
    for key in ("wall_s", "max_rss_mb", "tree_peak_rss_mb"):
        vals = [r[key] for r in runs if r.get(key) is not None]
        if vals:
            out[key] = {"min": min(vals), "median": round(statistics.median(vals), 3), "max": max(vals)}
    return out


# --------------------------------------------------------------------------- tools


def mtp_audit_cmd() -> list[str]:
    exe = shutil.which("mtp-audit") or str(Path(sys.executable).parent / "mtp-audit")
    return [exe]


def ours(root: Path, cache: Path, workers: int, out_json: Path) -> list[str]:
    return [*mtp_audit_cmd(), "scan", str(root), "--cache-dir", str(cache), "--workers", str(workers),
            "--format", "json", "-q", "--exit-zero", "-o", str(out_json)]


def our_counts(out_json: Path) -> dict:
    doc = json.loads(out_json.read_text())
    by_rule = collections.Counter(f["rule"] for f in doc["findings"])
    return {
        "findings": len(doc["findings"]),
        "by_rule": dict(sorted(by_rule.items())),
        "problems": len(doc["problems"]),
        "stats": doc.get("stats", {}),
    }


def semgrep_cmd(semgrep: Path, config: Path, target: Path, workers: int, out_json: Path) -> list[str]:
    return [str(semgrep), "scan", "--config", str(config), "--json", "-o", str(out_json), "-j", str(workers),
            "--metrics=off", "--disable-version-check", "--no-git-ignore", "-q", str(target)]


def semgrep_counts(out_json: Path, target: Path) -> dict:
    doc = json.loads(out_json.read_text())
    by_rule = collections.Counter(r["check_id"].rsplit(".", 1)[-1] for r in doc.get("results", []))
    hits = sorted(
        (r["check_id"].rsplit(".", 1)[-1], os.path.relpath(r["path"], target.parent), r["start"]["line"])
        for r in doc.get("results", [])
    )
    return {
        "findings": sum(by_rule.values()),
        "by_rule": dict(sorted(by_rule.items())),
        "errors": len(doc.get("errors", [])),
        "error_paths": sorted({os.path.relpath(e["path"], target.parent) for e in doc.get("errors", []) if e.get("path")}),
        "files_scanned": len(doc.get("paths", {}).get("scanned", [])),
        "hits": hits,
    }


def semgrep_version(semgrep: Path) -> str:
    try:
        return subprocess.run([str(semgrep), "--version", "--disable-version-check"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


# --------------------------------------------------------------------------- profile


def profile_warm(root: Path, cache: Path, workers: int, tmp: Path, top: int) -> dict | None:
    """pyinstrument the warm scan (cache already populated); top self-time frames."""
    try:
        import pyinstrument  # noqa: F401
    except ImportError:
        return None
    prof_json = tmp / "warm-profile.json"
    tree_txt = tmp / "warm-profile.txt"
    cli = mtp_audit_cmd()[0]
    args = ["scan", str(root), "--cache-dir", str(cache), "--workers", str(workers), "--format", "json", "-q",
            "--exit-zero", "-o", str(tmp / "prof-out.json")]
    base = [sys.executable, "-m", "pyinstrument", "-i", "0.001"]
    subprocess.run([*base, "-r", "json", "-o", str(prof_json), cli, *args], check=True, capture_output=True)
    subprocess.run([*base, "-r", "text", "-p", "show_all=false", "--no-color", "-o", str(tree_txt), cli, *args],
                   check=True, capture_output=True)
    doc = json.loads(prof_json.read_text())
    total = doc.get("duration") or 0.0
    self_time: dict[tuple, float] = collections.defaultdict(float)
    incl_time: dict[tuple, float] = collections.defaultdict(float)

    def walk(frame: dict, on_stack: frozenset) -> None:
        if "function" in frame:  # pyinstrument >= 4.5 JSON
            func, path, line = frame.get("function", ""), frame.get("file_path", ""), frame.get("line_no", "")
        else:  # older: identifier "func\x00path\x00line"
            parts = frame.get("identifier", "").split("\x00") + ["", "", ""]
            func, path, line = parts[0], parts[1], parts[2]
        key = (func, _short(path), line)
        children = frame.get("children", [])
        child_time = sum(c.get("time", 0.0) for c in children)
        self_time[key] += max(0.0, frame.get("time", 0.0) - child_time)
        if key not in on_stack:  # no double counting under recursion
            incl_time[key] += frame.get("time", 0.0)
        for c in children:
            walk(c, on_stack | {key})

    walk(doc["root_frame"], frozenset())
    fmt = lambda k, v: {"function": k[0], "file": k[1], "line": k[2], "seconds": round(v, 3),  # noqa: E731
                        "percent": round(100 * v / total, 1) if total else None}
    self_top = [fmt(k, v) for k, v in sorted(self_time.items(), key=lambda kv: -kv[1])[:top]]
    ours_incl = [fmt(k, v) for k, v in sorted(incl_time.items(), key=lambda kv: -kv[1])
                 if k[1].startswith(("auditor/", "rules/"))][:top]
    return {"duration_s": round(total, 3), "self_top": self_top, "inclusive_top_ours": ours_incl,
            "tree_text": tree_txt.read_text()}


def _short(path: str) -> str:
    p = path.replace("\\", "/")
    for marker in ("/site-packages/", "/lib/python3"):
        if marker in p:
            return "…" + p[p.index(marker):]
    if p.startswith(str(REPO) + "/"):
        return p[len(str(REPO)) + 1:]
    return p


# --------------------------------------------------------------------------- main


def machine_info(semgrep: Path | None) -> dict:
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        kb = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1))
        mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, AttributeError):
        pass
    try:
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = "?"
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "affinity_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu,
        "memory": mem,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "mtp_audit_commit": commit,
        "semgrep": semgrep_version(semgrep) if semgrep else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--release", default="0.33.0")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--semgrep", type=Path, default=HERE / ".venv-semgrep" / "bin" / "semgrep")
    ap.add_argument("--no-semgrep", action="store_true")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--top", type=int, default=15, help="hotspots to report")
    ap.add_argument("--json-out", type=Path, default=HERE / "results.json")
    ap.add_argument("--md-out", type=Path, default=HERE / "RESULTS.md")
    args = ap.parse_args()

    semgrep = None if args.no_semgrep or not args.semgrep.exists() else args.semgrep
    root = fetch_release(args.release, default_cache_dir(), progress=False)
    files = sorted(str(p.relative_to(root)) for p in (root / "vllm").rglob("*.py"))
    lines = 0
    for f in files:
        with open(root / f, "rb") as fh:
            lines += fh.read().count(b"\n")
    info = machine_info(semgrep)
    print(f"vllm {args.release}: {len(files)} files, {lines} lines at {root}", file=sys.stderr)

    results: dict = {"machine": info, "release": args.release, "tree": {"root": str(root), "files": len(files),
                     "lines": lines}, "workers": args.workers, "repeat": args.repeat, "targets": TARGETS, "runs": {}}
    runs = results["runs"]
    for k in ("cold", "warm", "lint", "lint_git", "semgrep"):
        runs[k] = []

    with tempfile.TemporaryDirectory(prefix="mtp-bench-") as tmpd:
        tmp = Path(tmpd)
        # the "lint" tree: a copy we can edit without touching the release cache
        lint_root = tmp / "lint-tree"
        shutil.copytree(root / "vllm", lint_root / "vllm", symlinks=True)
        lint_file = lint_root / LINT_FILE
        original = lint_file.read_bytes()
        # the "lint_git" repository: `mtp-audit lint . --base HEAD` after a one-file edit, as a
        # pre-merge check runs it (base side read from git objects, its result cached).
        git_root = tmp / "lint-git"
        shutil.copytree(root / "vllm", git_root / "vllm", symlinks=True)
        genv = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b",
                    GIT_COMMITTER_EMAIL="b@b")
        for gcmd in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
            subprocess.run(gcmd, cwd=git_root, check=True, env=genv, capture_output=True)
        git_file = git_root / LINT_FILE
        git_original = git_file.read_bytes()
        last_cache = None
        for i in range(args.repeat):
            cache = tmp / f"cache-{i}"  # fresh and empty: cold
            out = tmp / f"out-{i}.json"
            r = measure(ours(root, cache, args.workers, out))
            r["counts"] = our_counts(out)
            runs["cold"].append(r)
            print(f"[{i}] cold  {r['wall_s']:.2f}s rss {r['max_rss_mb']} MB (tree {r['tree_peak_rss_mb']} MB)",
                  file=sys.stderr)
            r = measure(ours(root, cache, args.workers, out))
            r["counts"] = our_counts(out)
            runs["warm"].append(r)
            print(f"[{i}] warm  {r['wall_s']:.2f}s rss {r['max_rss_mb']} MB", file=sys.stderr)
            # one file changed: a comment (different every repeat, so it is a cache miss every time)
            lint_file.write_bytes(original + f"\n# mtp-audit bench edit {i} {time.time_ns()}\n".encode())
            r = measure(ours(lint_root, cache, args.workers, out))
            r["counts"] = our_counts(out)
            runs["lint"].append(r)
            print(f"[{i}] lint  {r['wall_s']:.2f}s rss {r['max_rss_mb']} MB", file=sys.stderr)
            # the real lint command; the first call in this cache also scans the base (not timed)
            lint_cmd = mtp_audit_cmd() + ["lint", str(git_root), "--base", "HEAD", "--cache-dir", str(cache),
                                          "--workers", str(args.workers), "-f", "json", "-o", str(out)]
            # each repeat has its own cache: prime its base-side result first (untimed)
            subprocess.run(lint_cmd, cwd=git_root, capture_output=True)
            git_file.write_bytes(git_original + f"\n# mtp-audit bench edit {i} {time.time_ns()}\n".encode())
            r = measure(lint_cmd, cwd=git_root, ok_codes=(0, 1))
            runs["lint_git"].append(r)
            print(f"[{i}] lint (git) {r['wall_s']:.2f}s rss {r['max_rss_mb']} MB", file=sys.stderr)
            last_cache = cache
            if semgrep:
                sout = tmp / f"semgrep-{i}.json"
                r = measure(semgrep_cmd(semgrep, HERE / "semgrep-mtp.yml", root / "vllm", args.workers, sout),
                            cwd=tmp, ok_codes=(0, 1))
                r["counts"] = semgrep_counts(sout, root / "vllm")
                runs["semgrep"].append(r)
                print(f"[{i}] semgrep {r['wall_s']:.2f}s rss {r['max_rss_mb']} MB, "
                      f"{r['counts']['findings']} findings", file=sys.stderr)
        lint_file.write_bytes(original)

        results["summary"] = {k: summarize(v) for k, v in runs.items() if v}
        if not args.no_profile and last_cache is not None:
            print("profiling the warm scan ...", file=sys.stderr)
            prof = profile_warm(root, last_cache, args.workers, tmp, args.top)
            results["profile_warm"] = prof
            if prof is None:
                print("pyinstrument not installed: no profile", file=sys.stderr)

    args.json_out.write_text(json.dumps(results, indent=2) + "\n")
    args.md_out.write_text(render_md(results))
    print(f"wrote {args.json_out} and {args.md_out}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- report


def _verdict(value: float | None, target: float) -> str:
    if value is None:
        return "n/a"
    return "met" if value <= target else f"**MISSED** ({value / target:.1f}× target)"


def render_md(res: dict) -> str:
    m, s, t = res["machine"], res["summary"], res["targets"]
    tree = res["tree"]
    L: list[str] = []
    L.append("# mtp-audit scan benchmark\n")
    L.append(f"Generated by `bench/bench_scan.py` on {m['date']}. Raw numbers: `bench/results.json`.\n")
    L.append("## Machine\n")
    L.append(f"- nproc: {m['nproc']} (affinity: {m['affinity_cpus']}); CPU: {m['cpu_model']}; memory: {m['memory']}")
    L.append(f"- Python {m['python']} ({m['platform']}); mtp-audit commit `{m['mtp_audit_commit']}`")
    if m.get("semgrep"):
        L.append(f"- Semgrep OSS {m['semgrep']}")
    L.append("")
    L.append("## Setup\n")
    L.append(f"- Target: vLLM {res['release']} sdist, unpacked by `fetch_release` into the default cache: "
             f"{tree['files']} `.py` files, {tree['lines']:,} lines under `vllm/`.")
    L.append(f"- Every run is a fresh subprocess: `mtp-audit scan <unpacked root> --cache-dir D --workers "
             f"{res['workers']} --format json -q --exit-zero -o out.json` (the path form, so no download is "
             f"timed). Repeated {res['repeat']}×; min / median below.")
    L.append("- **cold**: `D` is a new empty directory. **warm**: same `D`, next run (an unchanged tree: the whole "
             "result comes from the result cache). **lint**: a copy of the tree "
             f"with one comment appended to `{LINT_FILE}`, scanned with that warm `D` (one cache miss).")
    L.append("- Wall clock from the parent (includes interpreter start and imports). **max RSS** is "
             "`/usr/bin/time -v` \"Maximum resident set size\": the largest *single* process (the parent or one "
             "worker), not their sum. **tree RSS** is the peak of the summed RSS of the process and all its "
             "workers, sampled from /proc every 50 ms (can miss short spikes; shared pages counted per process).")
    L.append("- Each run's 1-minute load average (before, after) is in `results.json` (`loadavg_1m`); "
             "on a shared 2-core machine anything above ~2 means the run competed for CPU.")
    L.append("")
    L.append("## Results\n")
    L.append("| run | wall min | wall median | max RSS (median) | tree RSS peak (max) | target | verdict (median) |")
    L.append("|---|---:|---:|---:|---:|---|---|")
    targets = {"cold": t["cold_s"], "warm": t["warm_s"], "lint": None, "lint_git": t.get("lint_git_s"), "semgrep": None}
    for k in ("cold", "warm", "lint", "lint_git", "semgrep"):
        if k not in s:
            continue
        w, r, tr = s[k]["wall_s"], s[k].get("max_rss_mb", {}), s[k].get("tree_peak_rss_mb", {})
        tgt = targets[k]
        L.append(f"| {k} | {w['min']:.2f} s | {w['median']:.2f} s | {r.get('median', '?')} MB | "
                 f"{tr.get('max', '?')} MB | {'≤ %g s' % tgt if tgt else '—'} | "
                 f"{_verdict(w['median'], tgt) if tgt else '—'} |")
    peak_single = max((s[k]["max_rss_mb"]["max"] for k in ("cold", "warm", "lint") if k in s), default=None)
    peak_tree = max((s[k]["tree_peak_rss_mb"]["max"] for k in ("cold", "warm", "lint") if k in s), default=None)
    L.append("")
    L.append(f"Peak RSS target ≤ {t['rss_mb']:.0f} MB: largest single process {peak_single} MB, summed process "
             f"tree {peak_tree} MB → {_verdict(peak_tree, t['rss_mb'])}.")
    L.append("")
    L.append("(`lint` is a full scan of a copy with one file changed, warm cache: no target of its own. "
             "`lint_git` is the real `mtp-audit lint . --base HEAD` after a one-file edit in a git repository of "
             "the release, warm cache (issue target ≤ 3 s).)")
    L.append("")
    # counts
    L.append("## Findings: mtp-audit vs Semgrep\n")
    oc = res["runs"]["cold"][0]["counts"] if res["runs"]["cold"] else None
    if oc:
        L.append(f"mtp-audit (all rules): {oc['findings']} findings {oc['by_rule']}; {oc['problems']} problems; "
                 f"{oc['stats'].get('files_analysed', '?')} of {oc['stats'].get('files', '?')} files parsed "
                 "(seeds + what resolution reaches).")
        same = all(r["counts"]["by_rule"] == oc["by_rule"] for k in ("cold", "warm") for r in res["runs"][k])
        L.append(f"Cold and warm runs report the same counts: {'yes' if same else '**NO**'}.")
        lc = res["runs"]["lint"][0]["counts"]
        L.append(f"Lint run (one comment added): {lc['findings']} findings {lc['by_rule']}.")
        L.append("")
    if res["runs"]["semgrep"]:
        sc = res["runs"]["semgrep"][0]["counts"]
        L.append("| rule | mtp-audit | Semgrep (`bench/semgrep-mtp.yml`) |")
        L.append("|---|---:|---:|")
        L.append(f"| MTP001 ≈ `mtp001-kwargs-wrapper-drops-step` | {oc['by_rule'].get('MTP001', 0) if oc else '?'} | "
                 f"{sc['by_rule'].get('mtp001-kwargs-wrapper-drops-step', 0)} |")
        L.append(f"| MTP002 ≈ `mtp002-draft-loop-constant-step` | {oc['by_rule'].get('MTP002', 0) if oc else '?'} | "
                 f"{sc['by_rule'].get('mtp002-draft-loop-constant-step', 0)} |")
        L.append("")
        L.append(f"Semgrep scanned {sc['files_scanned']} files and reported {sc['errors']} errors"
                 + (f" ({', '.join(sc['error_paths'][:5])})" if sc["error_paths"] else "") + ".")
        L.append("")
        L.append("Semgrep is **intraprocedural** and untyped, so the two are not measuring the same thing: its "
                 "rules see one function at a time, match `self.model(...)` syntactically, cannot bind positional "
                 "arguments to the callee's parameters, cannot tell whether the callee selects a layer with the "
                 "step (so `**kwargs` wrappers around non-MTP models match too), and cannot follow helpers "
                 "(`_sample_draft_tokens` → `get_top_tokens` → `compute_logits`), inheritance, dict-built "
                 "keyword arguments or the architecture registry. mtp-audit's MTP001/MTP002 do all of those; "
                 "the counts differ for that reason, not because either is \"right\" per count.")
        L.append("")
        L.append("<details><summary>Semgrep hits</summary>\n")
        for rule, path, line in sc["hits"]:
            L.append(f"- `{rule}` {path}:{line}")
        L.append("\n</details>\n")
    prof = res.get("profile_warm")
    if prof:
        L.append("## Warm-scan hotspots (pyinstrument)\n")
        L.append(f"One warm run under pyinstrument (1 ms interval, main process only — workers are not sampled, "
                 f"but a warm run parses only what misses the cache): {prof['duration_s']:.2f} s profiled.\n")
        L.append("Top self time:\n")
        L.append("| # | function | file:line | self s | % |")
        L.append("|---:|---|---|---:|---:|")
        for i, h in enumerate(prof["self_top"], 1):
            L.append(f"| {i} | `{h['function']}` | {h['file']}:{h['line']} | {h['seconds']:.3f} | {h['percent']} |")
        L.append("")
        L.append("Top inclusive time in mtp-audit's own code (`auditor/`, `rules/`):\n")
        L.append("| # | function | file:line | incl s | % |")
        L.append("|---:|---|---|---:|---:|")
        for i, h in enumerate(prof["inclusive_top_ours"], 1):
            L.append(f"| {i} | `{h['function']}` | {h['file']}:{h['line']} | {h['seconds']:.3f} | {h['percent']} |")
        L.append("")
    L.append("<!-- ANALYSIS -->")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
