"""In-graph MTP layer counters, shared by the runtime driver (runtime_check/driver.py) and the
deployment observer (runtime_check/observer/).

Imports torch and vLLM lazily and nothing from auditor/: the observer runs in a serving
environment that has vLLM but not mtp-audit's dependencies.

The counters live *inside* the draft model's graph. They are installed on the draft model
right after vLLM loads it and before the engine's first forward (warm-up, profiling), so that
torch.compile traces them with the layer and a CUDA graph captures and replays them: each MTP
layer gets a forward pre-hook that does only tensor ops on registered buffers --
``_mtp_audit_calls.add_(1)`` on the layer, and an entry ``layer index`` at ``pos`` in a step
log owned by the predictor, then ``pos.add_(1)``. Python code runs only when Python runs;
these buffers change whenever the layer's computation runs, traced or replayed.

With ``positions=P`` the hook also keeps a per-draft-position table, ``_mtp_audit_positions``
(P x layers, flattened): the caller resets ``_mtp_audit_step`` and sets ``_mtp_audit_active``
to 1 around one drafting call (outside the graph, tensor ops only, no device sync); inside
it the hook adds ``active`` at (step, layer) and advances ``step`` by ``active``. Warm-up,
profiling and graph-capture forwards run with ``active`` 0 and count nowhere. A layer's
``shared_head`` (a per-layer head module), where it has one, gets the same table.
"""

from __future__ import annotations

from typing import Any, Callable

IN_GRAPH_LOG_SIZE = 1 << 16


class NotObservable(Exception):
    """The model has no structure the counters can be installed on (one line, says why)."""


def layer_container(inner: Any) -> tuple[list[str], list[Any]]:
    """The MTP layers of a draft model's inner predictor: its ``layers`` ModuleList/ModuleDict."""
    import torch.nn as nn

    # `layers` by vLLM's convention; MiMo's predictor names its container `mtp_layers`.
    layers = getattr(inner, "layers", None)
    if layers is None:
        layers = getattr(inner, "mtp_layers", None)
    if isinstance(layers, nn.ModuleDict):
        return list(layers.keys()), list(layers.values())
    if isinstance(layers, (nn.ModuleList, list, tuple)):
        return [str(i) for i in range(len(layers))], list(layers)
    raise NotObservable(f"{type(inner).__name__} has no `layers` (or `mtp_layers`) ModuleList/ModuleDict to observe")


def patch_model_loaders(on_load: Callable[[Any, Any, Any], None]) -> list[tuple[type, Any]]:
    """Wrap vLLM's model loaders' ``load_model`` so that ``on_load(model, vllm_config,
    model_config)`` runs on every model they load, before vLLM first runs it. The draft model
    is the one loaded with a model config other than the target's (vLLM loads the drafter with
    the speculative config's draft_model_config). Returns (class, original) pairs, to undo."""
    from vllm.model_executor import model_loader
    from vllm.model_executor.model_loader import base_loader

    classes = {base_loader.BaseModelLoader}
    classes.update(getattr(model_loader, "_LOAD_FORMAT_TO_MODEL_LOADER", {}).values())
    patched = []
    for cls in sorted(classes, key=lambda c: f"{c.__module__}.{c.__qualname__}"):
        if "load_model" not in cls.__dict__:
            continue
        orig = cls.__dict__["load_model"]

        def load_model(self, vllm_config, model_config, *a, _orig=orig, **k):
            model = _orig(self, vllm_config, model_config, *a, **k)
            on_load(model, vllm_config, model_config)
            return model

        cls.load_model = load_model
        patched.append((cls, orig))
    return patched


def is_draft_load(vllm_config: Any, model_config: Any) -> bool:
    """The draft model is loaded with a model config other than the target's, or with the
    speculative config's draft_model_config: Step-3.5's drafter loads with a draft
    vllm_config whose model_config *is* the draft's, so "not the target's" alone misses it."""
    spec = getattr(vllm_config, "speculative_config", None)
    return (model_config is not getattr(vllm_config, "model_config", None)
            or model_config is getattr(spec, "draft_model_config", None))


def install_counters(model: Any, positions: int = 0) -> tuple[Any, list[str], list[Any], list[Any]]:
    """Install the counters on a draft model (see the module docstring); returns (inner
    predictor, layer keys, layers, per-layer heads or None). Installing twice on one model
    (the driver and the observer in one process) keeps the first counters and hooks."""
    import torch

    inner = getattr(model, "model", None)
    if inner is None:
        raise NotObservable(f"draft model {type(model).__name__} has no inner `.model` predictor")
    keys, layers = layer_container(inner)
    heads = [getattr(layer, "shared_head", None) for layer in layers]
    dev = next((p.device for p in model.parameters()), torch.device("cpu"))
    if "_mtp_audit_pos" not in inner._buffers:
        inner.register_buffer("_mtp_audit_log", torch.full((IN_GRAPH_LOG_SIZE,), -1, dtype=torch.int64,
                                                           device=dev), persistent=False)
        inner.register_buffer("_mtp_audit_pos", torch.zeros(1, dtype=torch.int64, device=dev),
                              persistent=False)
        for idx, layer in enumerate(layers):
            layer.register_buffer("_mtp_audit_calls", torch.zeros(1, dtype=torch.int64, device=dev),
                                  persistent=False)
            layer.register_buffer("_mtp_audit_id", torch.full((1,), idx, dtype=torch.int64, device=dev),
                                  persistent=False)

            def count(module, args, inner=inner):
                module._mtp_audit_calls.add_(1)
                slot = torch.remainder(inner._mtp_audit_pos, IN_GRAPH_LOG_SIZE)
                inner._mtp_audit_log.index_copy_(0, slot, module._mtp_audit_id)
                inner._mtp_audit_pos.add_(1)
                return None

            layer.register_forward_pre_hook(count)
    if positions > 0 and "_mtp_audit_positions" not in inner._buffers:
        _install_position_table(inner, layers, heads, positions, dev)
    return inner, keys, layers, heads


def _install_position_table(inner: Any, layers: list[Any], heads: list[Any], positions: int, dev: Any) -> None:
    import torch

    n = len(layers)
    zeros = lambda size: torch.zeros(size, dtype=torch.int64, device=dev)  # noqa: E731
    inner.register_buffer("_mtp_audit_active", zeros(1), persistent=False)
    inner.register_buffer("_mtp_audit_step", zeros(1), persistent=False)
    inner.register_buffer("_mtp_audit_positions", zeros(positions * n), persistent=False)
    inner.register_buffer("_mtp_audit_head_step", zeros(1), persistent=False)
    inner.register_buffer("_mtp_audit_head_positions", zeros(positions * n), persistent=False)
    last = positions - 1

    def table_hook(step_name: str, table_name: str):
        def hook(module, args, inner=inner):
            step = getattr(inner, step_name)
            flat = torch.clamp(step, max=last) * n + module._mtp_audit_id
            getattr(inner, table_name).index_add_(0, flat, inner._mtp_audit_active)
            step.add_(inner._mtp_audit_active)
            return None
        return hook

    for idx, layer in enumerate(layers):
        layer.register_forward_pre_hook(table_hook("_mtp_audit_step", "_mtp_audit_positions"))
        head = heads[idx]
        if head is not None:
            head.register_buffer("_mtp_audit_id", torch.full((1,), idx, dtype=torch.int64, device=dev),
                                 persistent=False)
            head.register_forward_pre_hook(table_hook("_mtp_audit_head_step", "_mtp_audit_head_positions"))


def begin_draft_call(inner: Any) -> None:
    """Start one drafting call: positions count from 0 (tensor ops only, no device sync)."""
    inner._mtp_audit_step.zero_()
    inner._mtp_audit_head_step.zero_()
    inner._mtp_audit_active.fill_(1)


def end_draft_call(inner: Any) -> None:
    inner._mtp_audit_active.fill_(0)


def read_position_table(inner: Any, n: int, heads: bool = False) -> list[list[int]]:
    """The table as rows (draft position) of per-layer counts (copies from the device)."""
    flat = (inner._mtp_audit_head_positions if heads else inner._mtp_audit_positions).cpu().tolist()
    return [flat[i:i + n] for i in range(0, len(flat), n)]


def read_layer_calls(layers: list[Any]) -> list[int]:
    """Per layer, the calls since the counters were installed (warm-up and profiling included)."""
    return [int(layer._mtp_audit_calls.item()) for layer in layers]
