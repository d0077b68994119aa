"""Checkpoint-aware plans: per MTP layer present in a checkpoint (source/checkpoint.py), whether
the plan's draft model class builds it and whether a draft step runs it -- the rest is dead
weight."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..model.checkpoint import GB, Checkpoint


def checkpoint_json(ckpt: Checkpoint, plan: dict[str, Any]) -> dict[str, Any]:
    """The `checkpoint` object of one plan (one runner): per MTP layer present, whether the
    plan's draft model class builds it (num_mtp_layers) and whether a draft step runs its
    forward or its head. Unknown stays unknown (null), and is not counted as dead weight."""
    built_n = plan.get("num_mtp_layers")
    steps = plan.get("steps") or []
    used = {s.get(k) for s in steps for k in ("forward_layer", "head_layer")}
    used |= {i for s in steps for i in (s.get("forward_layers") or [])}  # a stack a step runs whole
    unknown_steps = any(s.get("forward_layer") is None and s.get("forward_layers") is None for s in steps) or not steps
    rows = []
    dead = unknown = 0
    for layer in ckpt.layers:
        built = None if not isinstance(built_n, int) else layer.index < built_n
        runs: bool | None
        if built is False:
            runs = False
        elif layer.index in used:
            runs = True
        else:
            runs = None if unknown_steps else False
        if built is False or runs is False:
            dead += layer.bytes
        elif built is None or runs is None:
            unknown += layer.bytes
        rows.append({"index": layer.index, "prefix": layer.prefix, "tensors": layer.tensors, "bytes": layer.bytes,
                     "built": built, "runs": runs})
    return {
        "path": ckpt.path,
        "files": ckpt.files,
        "total_bytes": ckpt.total_bytes,
        "num_hidden_layers": ckpt.num_hidden_layers,
        "mtp_layers": rows,
        "mtp_shared_bytes": ckpt.shared_mtp_bytes,
        "dead_weight_bytes": dead,
        "dead_weight_gb": round(dead / GB, 3),
        "undecided_bytes": unknown,
    }


def attach(doc: dict[str, Any], ckpt: Checkpoint) -> dict[str, Any]:
    """A `layers -f json` document with each plan's `checkpoint` object added."""
    for plan in doc["plans"] if "plans" in doc else [doc]:
        plan["checkpoint"] = checkpoint_json(ckpt, plan)
    return doc


def checkpoint_layers_document(model_dir: Path, fmt: str, plan_document: Callable[[str], str]) -> str:
    """`layers --model DIR`: the plan of DIR's config.json with what DIR's checkpoint carries.
    `plan_document(fmt)` renders the plan (services/layers.layers_document for the same
    question); the checkpoint is read first, so that a bad directory fails before planning."""
    import json

    from ..common.errors import UsageError
    from ..output.checkpoint import render_text
    from ..source.checkpoint import read_checkpoint

    if fmt not in ("text", "json"):
        raise UsageError(f"--model takes --format text or json, not {fmt}")
    ckpt = read_checkpoint(model_dir)
    doc = json.loads(plan_document("json"))
    plans = doc["plans"] if "plans" in doc else [doc]
    if fmt == "json":
        return json.dumps(attach(doc, ckpt), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    text: str = plan_document("text")
    return text + "\n" + render_text(ckpt, plans, [checkpoint_json(ckpt, p) for p in plans])
