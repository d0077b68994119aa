"""The vLLM general plugin: `register()` is the `vllm.general_plugins` entry point.

vLLM calls every general plugin in each of its processes (API server, engine core, workers),
possibly more than once. With MTP_AUDIT_OBSERVE unset, register() returns at once and
installs nothing. With MTP_AUDIT_OBSERVE=/path/file.jsonl it wraps vLLM's model loaders; in
the process that loads the draft model it then

- installs the in-graph counters (runtime_check/ingraph.py) with a per-position table on the
  draft model, before vLLM first runs, traces, compiles or captures it;
- wraps the drafter's `propose` (the object whose `load_model` loaded the draft model) so that
  each drafting call counts its MTP layer calls from position 0 -- two tensor ops before and
  one after the call, no device synchronisation;
- every MTP_AUDIT_OBSERVE_INTERVAL seconds (default 30) in which there were drafting calls
  (a daemon thread; an idle server writes nothing new), and when the process exits cleanly,
  appends one JSON line: the cumulative counts since load and what was observed (vLLM version,
  runner, drafter, draft model class, K, engine mode). vLLM's shutdown may SIGKILL the worker
  (always with the default --shutdown-timeout 0, sometimes after a drain time): no exit line
  then; the last interval line holds the counts up to the last interval.

It must never take the server down: every step is guarded, and on an error it logs one
warning and disables itself (drafting then runs exactly as without it).

Imports only the standard library at import time; torch and vLLM when a draft model loads.
"""

from __future__ import annotations

import atexit
import json
import logging
import multiprocessing.util
import os
import sys
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from runtime_check import ingraph

ENV_FILE = "MTP_AUDIT_OBSERVE"
ENV_INTERVAL = "MTP_AUDIT_OBSERVE_INTERVAL"
DEFAULT_INTERVAL_S = 30.0
FORMAT = "mtp-audit-observer/1"
# Rows of the per-position table; a drafting call with more MTP layer calls counts the rest
# in the last row (and the line says so).
MAX_POSITIONS = 64

# Under vLLM's logger, so that its handlers (and level) apply.
log = logging.getLogger("vllm.mtp_audit_observer")

_registered = False


def register() -> None:
    """The `vllm.general_plugins` entry point (idempotent)."""
    global _registered
    if _registered:
        return
    _registered = True
    path = os.environ.get(ENV_FILE)
    if not path:
        return
    try:
        observer = Observer(Path(path), _interval())
        ingraph.patch_model_loaders(observer.on_load)
    except Exception as e:  # never crash vLLM's start-up
        log.warning("mtp-audit observer disabled: cannot install the model-loader hook: %s: %s",
                    type(e).__name__, e)


def _interval() -> float:
    raw = os.environ.get(ENV_INTERVAL)
    if not raw:
        return DEFAULT_INTERVAL_S
    try:
        value = float(raw)
        if value > 0:
            return value
    except ValueError:
        pass
    log.warning("mtp-audit observer: %s=%r is not a positive number of seconds; using %g",
                ENV_INTERVAL, raw, DEFAULT_INTERVAL_S)
    return DEFAULT_INTERVAL_S


def find_drafter(model: Any) -> Any | None:
    """The object whose `load_model` is loading `model`: the innermost caller frame whose
    `self` has a `propose` method (V1's proposer, V2's speculator). None when there is none."""
    f = sys._getframe(1)
    while f is not None:
        obj = f.f_locals.get("self")
        if obj is not None and obj is not model and callable(getattr(type(obj), "propose", None)):
            return obj
        f = f.f_back
    return None


def _name(obj_or_cls: Any) -> str:
    cls = obj_or_cls if isinstance(obj_or_cls, type) else type(obj_or_cls)
    return f"{cls.__module__}.{cls.__qualname__}"


def _enum_name(v: Any) -> Any:
    return getattr(v, "name", None if v is None else str(v))


class Observer:
    def __init__(self, path: Path, interval_s: float) -> None:
        self.path = path
        self.interval_s = interval_s
        self.instance = uuid.uuid4().hex[:12]
        self.enabled = True
        self.installed = False
        self.inner: Any = None
        self.layers: list[Any] = []
        self.keys: list[str] = []
        self.heads_observable = False
        self.positions_observable = False
        self.meta: dict[str, Any] = {}
        self.draft_calls = 0
        self.lines = 0
        self._lock = threading.Lock()
        self._shut_down = False
        self._stop = threading.Event()

    # ----------------------------------------------------------------- install
    def on_load(self, model: Any, vllm_config: Any, model_config: Any) -> None:
        if not self.enabled or self.installed or not ingraph.is_draft_load(vllm_config, model_config):
            return
        try:
            self._install(model, vllm_config, model_config)
        except Exception as e:
            self.disable(f"cannot observe the draft model {type(model).__name__}: {type(e).__name__}: {e}")

    def _install(self, model: Any, vllm_config: Any, model_config: Any) -> None:
        drafter = find_drafter(model)
        inner, keys, layers, heads = ingraph.install_counters(model, positions=MAX_POSITIONS)
        self.inner, self.keys, self.layers = inner, keys, layers
        self.heads_observable = any(h is not None for h in heads)
        if drafter is not None:
            self._wrap_propose(drafter)
        self.positions_observable = drafter is not None
        self.meta = self._describe(model, drafter, vllm_config, model_config)
        self.installed = True
        # At exit: atexit in a process that exits through the interpreter; vLLM's engine-core
        # and worker processes are multiprocessing children, which leave through os._exit
        # and run only multiprocessing's own finalizers.
        atexit.register(self.shutdown)
        multiprocessing.util.Finalize(None, self.shutdown, exitpriority=100)
        threading.Thread(target=self._writer, name="mtp-audit-observer", daemon=True).start()
        log.info("mtp-audit observer: counting %d MTP layers of %s in-graph; log %s every %g s",
                 len(layers), type(model).__name__, self.path, self.interval_s)
        if drafter is None:
            log.warning("mtp-audit observer: no drafter found for %s: per-layer totals only, "
                        "no per-position counts", type(model).__name__)

    def _wrap_propose(self, drafter: Any) -> None:
        orig = drafter.propose
        obs = self

        def propose(*args: Any, **kwargs: Any) -> Any:
            if not obs.enabled:
                return orig(*args, **kwargs)
            try:
                ingraph.begin_draft_call(obs.inner)
            except Exception as e:
                obs.disable(f"cannot start counting a drafting call: {type(e).__name__}: {e}")
                return orig(*args, **kwargs)
            try:
                return orig(*args, **kwargs)
            finally:
                obs._after_draft_call()

        propose.__wrapped__ = orig  # type: ignore[attr-defined]
        drafter.propose = propose

    def _after_draft_call(self) -> None:
        try:
            ingraph.end_draft_call(self.inner)
            self.draft_calls += 1
        except Exception as e:
            self.disable(f"error after a drafting call: {type(e).__name__}: {e}")

    def _writer(self) -> None:
        """Every interval, a line if there were drafting calls since the last one. Reads the
        counters only once drafting has begun: on a GPU the engine captures its CUDA graphs
        before serving, and a copy from the device during a capture would break it."""
        written = 0
        while not self._stop.wait(self.interval_s):
            if not self.enabled:
                return
            calls = self.draft_calls
            if calls > written:
                self.flush("interval")
                written = calls

    def _describe(self, model: Any, drafter: Any, vllm_config: Any, model_config: Any) -> dict[str, Any]:
        try:
            import vllm
            version = getattr(vllm, "__version__", None)
        except Exception:
            version = None
        spec = getattr(vllm_config, "speculative_config", None)
        target = getattr(vllm_config, "model_config", None)
        cc = getattr(vllm_config, "compilation_config", None)
        eager = getattr(target, "enforce_eager", None)
        drafter_name = _name(drafter) if drafter is not None else None
        return {
            "vllm_version": version,
            "runner": None if drafter_name is None else ("v2" if ".worker.gpu." in drafter_name else "v1"),
            "drafter": drafter_name,
            "draft_model_class": _name(model),
            "predictor_class": _name(self.inner),
            "num_mtp_layers": len(self.layers),
            "layer_keys": self.keys,
            "k": getattr(spec, "num_speculative_tokens", None),
            "method": getattr(spec, "method", None),
            "engine_mode": None if eager is None else ("eager" if eager else "compiled"),
            "compilation": None if cc is None else {
                "mode": _enum_name(getattr(cc, "mode", None)),
                "backend": str(getattr(cc, "backend", "") or ""),
                "cudagraph_mode": _enum_name(getattr(cc, "cudagraph_mode", None))},
            "model": str(getattr(target, "model", "")),
            "draft_model": str(getattr(model_config, "model", "")),
            "device": str(next((p.device for p in model.parameters()), "?")),
        }

    # ----------------------------------------------------------------- report
    def snapshot(self, event: str) -> dict[str, Any]:
        n = len(self.layers)
        table = ingraph.read_position_table(self.inner, n) if self.positions_observable else []
        heads = (ingraph.read_position_table(self.inner, n, heads=True)
                 if self.positions_observable and self.heads_observable else [])
        used = [i for i, row in enumerate(table) if any(row)]
        rows = []
        for p in range(used[-1] + 1 if used else 0):
            rows.append({"position": p,
                         "layers": {str(i): c for i, c in enumerate(table[p])},
                         "heads": ({str(i): c for i, c in enumerate(heads[p])} if heads else None)})
        return {
            "format": FORMAT,
            "event": event,
            "time": datetime.now(timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "instance": self.instance,
            "pid": os.getpid(),
            **self.meta,
            "observation": "in-graph-counters",
            "positions_observable": self.positions_observable,
            "heads_observable": self.heads_observable,
            "draft_calls": self.draft_calls,
            "positions": rows,
            "positions_truncated": bool(used) and used[-1] == MAX_POSITIONS - 1,
            "layer_calls_since_load": {str(i): c for i, c in enumerate(ingraph.read_layer_calls(self.layers))},
        }

    def shutdown(self) -> None:
        if not self._shut_down:
            self._shut_down = True
            self._stop.set()
            self.flush("shutdown")

    def flush(self, event: str) -> None:
        """Append one line (never raises: an error disables the observer)."""
        if not self.installed or not self.enabled:
            return
        with self._lock:
            try:
                line = json.dumps(self.snapshot(event), separators=(",", ":")) + "\n"
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    os.write(fd, line.encode())  # one write: lines from several processes do not mix
                finally:
                    os.close(fd)
                self.lines += 1
            except Exception as e:
                self.disable(f"cannot write {self.path}: {type(e).__name__}: {e}")

    def disable(self, why: str) -> None:
        if not self.enabled:
            return
        self.enabled = False
        try:
            if self.inner is not None and "_mtp_audit_active" in self.inner._buffers:
                ingraph.end_draft_call(self.inner)
        except Exception:
            pass
        log.warning("mtp-audit observer disabled: %s", why)
