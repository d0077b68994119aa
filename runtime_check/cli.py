"""`mtp-audit runtime`: run a real vLLM MTP draft loop and see which MTP layer runs per step.

This module must stay importable without torch or vLLM: the engine runs in a subprocess
(runtime_check/driver.py) under the runtime environment's Python.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

import typer

from . import archs, verdicts

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


class RuntimeCheckError(Exception):
    """Reported as one line, `mtp-audit: error: ...`, exit 2."""


def _fail(msg: str) -> "typer.Exit":
    typer.echo(f"mtp-audit: error: {msg}", err=True)
    return typer.Exit(2)


def runtime_python() -> str:
    """The Python of the runtime environment (torch + vLLM)."""
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


def run_driver(args: list[str], timeout: float, verbose: bool = False) -> dict:
    py = runtime_python()
    _check_has_vllm(py)
    work = Path(tempfile.mkdtemp(prefix="mtp-audit-run-"))
    result = work / "result.json"
    log = work / "engine.log"
    cmd = [py, str(DRIVER), *args, "--result", str(result)]
    with open(log, "wb") as logf:
        try:
            proc = subprocess.Popen(cmd, stdout=logf, stderr=None if verbose else subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as e:
            raise RuntimeCheckError(f"cannot start {py}: {e}")
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise RuntimeCheckError(f"the vLLM run did not finish within {timeout:g} s (log: {log})")
    try:
        data = json.loads(result.read_text())
    except (OSError, ValueError):
        raise RuntimeCheckError(f"the vLLM run exited with code {rc} and no result (log: {log})")
    if "error" in data:
        raise RuntimeCheckError(f"{data['error']} (log: {log})" if rc != 0 and "engine" in data["error"]
                                else data["error"])
    if rc != 0:
        raise RuntimeCheckError(f"the vLLM run exited with code {rc} (log: {log})")
    return data


def _synth(arch: str, layers: int, out: Path, timeout: float) -> dict:
    a = archs.resolve(arch)
    if a is None:
        raise RuntimeCheckError(f"unknown architecture {arch!r} (known: {', '.join(archs.ARCHS)})")
    if layers < 1:
        raise RuntimeCheckError("--mtp-layers must be at least 1")
    return run_driver(["synth", "--arch", a.key, "--mtp-layers", str(layers), "--out", str(out)], timeout)


@app.command()
def synth(
    arch: str = typer.Argument(..., help=f"One of: {', '.join(archs.ARCHS)}"),
    mtp_layers: int = typer.Option(3, "--mtp-layers", help="Number of MTP layers"),
    out: Path = typer.Option(..., "--out", help="Directory to write config.json + model.safetensors"),
    timeout: float = typer.Option(300, "--timeout", help="Hard limit in seconds"),
) -> None:
    """Write a tiny randomly initialised checkpoint with MTP layers (no tokenizer)."""
    try:
        res = _synth(arch, mtp_layers, out, timeout)
    except RuntimeCheckError as e:
        raise _fail(str(e))
    typer.echo(f"wrote {res['out']}: {res['arch']}, {res['mtp_layers']} MTP layers, "
               f"{res['tensors']} tensors, {res['parameters']} parameters")


def summarize(run: dict) -> dict:
    n = run.get("num_mtp_layers", 0)
    rows = [r for r in run.get("steps", []) if r["layers"]]
    run["layers_used"] = sorted({l for r in rows for l in r["layers"]})
    run["step_i_runs_layer_i"] = bool(rows) and all(r["layers"] == [r["step"] % n] for r in rows)
    run["layer0_only"] = bool(rows) and all(r["layers"] == [0] for r in rows)
    return run


def _fmt_val(v, how) -> str:
    if how in (None, "absent"):
        return "-"
    return f"{v} ({how})"


def render_text(doc: dict) -> str:
    lines = []
    for run in doc["runs"]:
        lines.append(
            f"== {run.get('arch') or run['architecture']} ({run['architecture']}), K={run['k']}, "
            f"{run['num_mtp_layers']} MTP layers, mode={run['mode']}"
            + (f", patch={run['patch']['diff']}" if run.get("patch") else ""))
        lines.append(f"   vLLM {run['vllm_version']} on {run['device']}, runner {run['runner']}, "
                     f"proposer {run['proposer'].rsplit('.', 1)[-1]}, draft model "
                     f"{run['wrapper_class'].rsplit('.', 1)[-1]} -> {run['inner_class'].rsplit('.', 1)[-1]}")
        hdr = ("propose", "step", "wrapper got spec_step_idx", "inner got spec_step_idx", "layer ran",
               "logits step")
        table = [hdr]
        for r in run["steps"]:
            table.append((str(r["propose"]), str(r["step"]),
                          _fmt_val(r["wrapper_spec_step_idx"], r["wrapper_received"]),
                          _fmt_val(r["inner_spec_step_idx"], r["inner_received"]),
                          ",".join(map(str, r["layers"])) or "-",
                          _fmt_val(r["logits_spec_step_idx"], r["logits_received"])))
        widths = [max(len(row[i]) for row in table) for i in range(len(hdr))]
        for row in table:
            lines.append("   " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        calls = ", ".join(f"layer {k}: {v}" for k, v in run["layer_calls"].items())
        lines.append(f"   per-layer calls: {calls}")
        lines.append(f"   step i runs layer i: {'yes' if run['step_i_runs_layer_i'] else 'no'}"
                     f" (layers used: {run['layers_used']}); "
                     f"{run['timing_s']['total']} s, max RSS {run['max_rss_mb']} MB")
        lines.append("")
    if doc.get("verdicts") is not None:
        lines.append("Verdicts:")
        if not doc["verdicts"]:
            lines.append("   (no findings)")
        for v in doc["verdicts"]:
            lines.append(f"   {v['verdict']:<13} {v['rule']} {v['function']} ({v['path']}:{v['line']}): "
                         f"{v['reason']}")
    return "\n".join(lines).rstrip() + "\n"


@app.command()
def check(
    arch: Optional[str] = typer.Option(None, "--arch", help=f"Synthesize and run: {', '.join(archs.ARCHS)}"),
    model: Optional[Path] = typer.Option(None, "--model", help="Run an existing model directory"),
    k: int = typer.Option(..., "--k", help="num_speculative_tokens"),
    mtp_layers: Optional[int] = typer.Option(None, "--mtp-layers",
                                             help="With --arch: MTP layers to synthesize (default: K)"),
    force_step_idx: bool = typer.Option(False, "--force-step-idx",
                                        help="Make the draft loop pass spec_step_idx=j on draft step j"),
    findings: Optional[Path] = typer.Option(None, "--findings",
                                            help="A scan's JSON: give each finding a verdict "
                                                 "(runs both modes)"),
    patch: Optional[Path] = typer.Option(None, "--patch", help="Unified diff applied to a temporary "
                                         "overlay of the affected vLLM files"),
    fmt: str = typer.Option("text", "--format", help="text or json"),
    max_tokens: int = typer.Option(6, "--max-tokens", help="Tokens to generate per prompt"),
    timeout: float = typer.Option(600, "--timeout", help="Hard limit in seconds for each engine run"),
) -> None:
    """Run vLLM offline (eager) with MTP speculative decoding and record the layer per draft step."""
    try:
        doc = _check(arch, model, k, mtp_layers, force_step_idx, findings, patch, fmt, max_tokens, timeout)
    except RuntimeCheckError as e:
        raise _fail(str(e))
    if fmt == "json":
        typer.echo(json.dumps(doc, indent=2))
    else:
        typer.echo(render_text(doc), nl=False)


def _check(arch, model, k, mtp_layers, force, findings, patch, fmt, max_tokens, timeout) -> dict:
    if fmt not in ("text", "json"):
        raise RuntimeCheckError(f"--format must be text or json, not {fmt!r}")
    if (arch is None) == (model is None):
        raise RuntimeCheckError("give exactly one of --arch or --model")
    if k < 1:
        raise RuntimeCheckError("--k must be at least 1")
    findings_doc = None
    if findings is not None:
        try:
            findings_doc = json.loads(findings.read_text())
        except OSError as e:
            raise RuntimeCheckError(f"cannot read {findings}: {e.strerror or e}")
        except ValueError as e:
            raise RuntimeCheckError(f"{findings} is not JSON: {e}")
        if not isinstance(findings_doc, dict) or not isinstance(findings_doc.get("findings"), list):
            raise RuntimeCheckError(f"{findings} is not a scan's JSON (no `findings` list)")
    if patch is not None and not patch.is_file():
        raise RuntimeCheckError(f"{patch}: no such patch file")
    if arch is not None:
        a = archs.resolve(arch)
        if a is None:
            raise RuntimeCheckError(f"unknown architecture {arch!r} (known: {', '.join(archs.ARCHS)})")
        n = mtp_layers or k
        model = Path(tempfile.mkdtemp(prefix=f"mtp-audit-{a.key}-"))
        _synth(a.key, n, model, timeout)
    else:
        cfg = model / "config.json"
        if not model.is_dir():
            raise RuntimeCheckError(f"{model}: no such model directory")
        if not cfg.is_file():
            raise RuntimeCheckError(f"{model}: no config.json (not a model directory)")
        try:
            n = archs.num_mtp_layers(json.loads(cfg.read_text()))
        except ValueError as e:
            raise RuntimeCheckError(f"{cfg} is not JSON: {e}")
        if n < 1:
            raise RuntimeCheckError(f"{model}: config declares no MTP layers")
    if not (k <= n or k % n == 0):
        raise RuntimeCheckError(f"K={k} not supported by a model with {n} MTP layers "
                                f"(vLLM needs K <= {n} or a multiple of {n})")
    modes = [False, True] if findings_doc is not None else [force]
    runs = []
    for m in modes:
        args = ["check", "--model", str(model), "--k", str(k), "--max-tokens", str(max_tokens)]
        if m:
            args.append("--force-step-idx")
        if patch is not None:
            args += ["--patch", str(patch.resolve())]
        runs.append(summarize(run_driver(args, timeout)))
    doc = {"version": JSON_VERSION, "runs": runs,
           "verdicts": verdicts.judge(findings_doc, runs) if findings_doc is not None else None}
    return doc


if __name__ == "__main__":
    app(prog_name="mtp-audit runtime")
