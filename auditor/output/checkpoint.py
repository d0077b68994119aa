"""Text of a checkpoint-aware plan: the `checkpoint` objects services/checkpoint.py computes."""

from __future__ import annotations

from typing import Any

from ..model.checkpoint import GB, Checkpoint


def _size(n: int) -> str:
    return f"{n:,} bytes ({n / GB:.3f} GB)"


def render_text(ckpt: Checkpoint, plans: list[dict[str, Any]], reports: list[dict[str, Any]]) -> str:
    lines = [f"Checkpoint {ckpt.path}: {len(ckpt.layers)} MTP layer{'s' if len(ckpt.layers) != 1 else ''} present "
             f"({', '.join(l.prefix + '.*' for l in ckpt.layers) or 'none'}), {len(ckpt.files)} file(s), "
             f"{_size(ckpt.total_bytes)} in all"]
    if ckpt.shared_mtp_bytes:
        lines.append(f"   shared MTP weights (outside the layers): {_size(ckpt.shared_mtp_bytes)}")
    for plan, c in zip(plans, reports):
        lines.append(f"   {plan.get('runner')} (draft model {(plan.get('model_class') or {}).get('class') or '?'}, "
                     f"builds {plan.get('num_mtp_layers') if plan.get('num_mtp_layers') is not None else '?'} "
                     f"layer(s), K={plan.get('k')}):")
        for row in c["mtp_layers"]:
            built = {True: "built", False: "NEVER BUILT", None: "built: unknown"}[row["built"]]
            runs = {True: "runs", False: "never runs", None: "runs: unknown"}[row["runs"]]
            lines.append(f"      MTP layer {row['index']} ({row['prefix']}.*): {row['bytes']:,} bytes, {built}, {runs}")
        lines.append(f"      dead weight: {_size(c['dead_weight_bytes'])}"
                     + (f"; undecided: {_size(c['undecided_bytes'])}" if c["undecided_bytes"] else ""))
    return "\n".join(lines) + "\n"
