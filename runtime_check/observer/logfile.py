"""Read an observer log (the JSON lines runtime_check/observer/plugin.py appends) and compare
it with a static plan. Pure Python: no torch, no vLLM.

Each line is a cumulative snapshot of one observing process (`instance`); the last line of an
instance holds its counts. Several instances in one file are several engine processes (a
restart, tensor-parallel ranks), reported one by one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..plan_compare import PlanError, planned_forward_layers
from .plugin import FORMAT  # importing the plugin module registers nothing and needs no torch


class LogError(Exception):
    """Not an observer log (or unreadable): one line, exit 2."""


@dataclass(frozen=True)
class Position:
    position: int
    layer_calls: dict[int, int]  # layer -> calls at this draft position
    head_calls: dict[int, int] | None  # None: the draft model has no per-layer head module

    @property
    def layers_ran(self) -> list[int]:
        return sorted(i for i, c in self.layer_calls.items() if c)

    @property
    def heads_ran(self) -> list[int] | None:
        return None if self.head_calls is None else sorted(i for i, c in self.head_calls.items() if c)


@dataclass(frozen=True)
class Engine:
    """The last snapshot of one observing process."""

    instance: str
    lines: int
    record: dict[str, Any]
    positions: list[Position] = field(default_factory=list)

    def get(self, key: str) -> Any:
        return self.record.get(key)


def _short(name: Any) -> str:
    return str(name).rsplit(".", 1)[-1] if name else "?"


def _counts(obj: Any, where: str) -> dict[int, int]:
    if not isinstance(obj, dict) or not all(isinstance(v, int) for v in obj.values()):
        raise LogError(f"{where}: counts are not an object of integers")
    try:
        return {int(k): v for k, v in obj.items()}
    except ValueError:
        raise LogError(f"{where}: layer keys are not integers")


def read_log(path: Path) -> list[Engine]:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise LogError(f"cannot read {path}: {e.strerror or e}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise LogError(f"{path} is not an mtp-audit observer log (not UTF-8 text)")
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise LogError(f"{path} is not an mtp-audit observer log (empty: the observer writes a line "
                       "every MTP_AUDIT_OBSERVE_INTERVAL seconds with drafting calls, and at a clean exit)")
    last: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            if no == len(lines) and not text.endswith("\n") and last:
                continue  # a final line cut off by a killed process: the earlier lines stand
            raise LogError(f"{path} is not an mtp-audit observer log (line {no} is not JSON)")
        if not isinstance(rec, dict) or rec.get("format") != FORMAT:
            raise LogError(f"{path} is not an mtp-audit observer log (line {no} has no "
                           f"\"format\": \"{FORMAT}\")")
        if not isinstance(rec.get("instance"), str) or not isinstance(rec.get("positions"), list):
            raise LogError(f"{path}: line {no} is an observer line without `instance` or `positions`")
        last[rec["instance"]] = rec
        counts[rec["instance"]] = counts.get(rec["instance"], 0) + 1
    engines = []
    for inst, rec in last.items():
        positions = []
        for p in rec["positions"]:
            where = f"{path}: instance {inst} position"
            if not isinstance(p, dict) or not isinstance(p.get("position"), int):
                raise LogError(f"{where}: not an object with an integer `position`")
            heads = p.get("heads")
            positions.append(Position(p["position"], _counts(p.get("layers"), f"{where} {p['position']}"),
                                      None if heads is None else _counts(heads, f"{where} {p['position']} heads")))
        engines.append(Engine(inst, counts[inst], rec, positions))
    return engines


# ------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class PositionComparison:
    position: int
    planned_forward: int | None
    observed_forward: list[int]
    forward: str  # agree | disagree | no data
    planned_head: int | None
    observed_head: list[int] | None  # None: not observable
    head: str  # agree | disagree | no data | not observable


@dataclass(frozen=True)
class EngineComparison:
    instance: str
    runner: str | None
    agreement: str  # agree | disagree | no plan
    drafter: str
    model_class: str
    positions: list[PositionComparison]
    why: str = ""


def _agree(planned: int | None, observed: list[int], layers: list[int] | None = None) -> str:
    """``layers``: every layer the planned step runs (a stack), where the plan says so."""
    want = layers if layers is not None else ([] if planned is None else [planned])
    return "agree" if observed == want else "disagree"


def compare(plans: list[dict[str, Any]], engine: Engine) -> EngineComparison:
    """The shipped plan of the engine's runner against what the engine ran, position by position."""
    runner = engine.get("runner")
    plan = next((p for p in plans if p.get("runner") == runner), None)
    if plan is None:
        have = ", ".join(sorted({str(p.get("runner")) for p in plans}))
        return EngineComparison(engine.instance, runner, "no plan", "-", "-", [],
                                f"the plan is for runner {have}, the engine ran {runner}")
    if plan.get("k") not in (None, engine.get("k")):
        raise PlanError(f"the plan is for K={plan['k']}, the engine ran K={engine.get('k')} "
                        f"(make the plan with --k {engine.get('k')})")
    n = plan.get("num_mtp_layers")
    if isinstance(n, int) and isinstance(engine.get("num_mtp_layers"), int) and n != engine.get("num_mtp_layers"):
        raise PlanError(f"the plan is for {n} MTP layers, the engine's draft model has "
                        f"{engine.get('num_mtp_layers')}")
    planned_drafter = (plan.get("proposer") or {}).get("class")
    planned_model = (plan.get("model_class") or {}).get("class")
    d_ok = planned_drafter == _short(engine.get("drafter"))
    m_ok = planned_model == _short(engine.get("draft_model_class"))
    by_pos = {p.position: p for p in engine.positions}
    rows = []
    for st in plan["steps"]:
        i = st["step"]
        obs = by_pos.get(i)
        pf, ph = st.get("forward_layer"), st.get("head_layer")
        if obs is None or not obs.layers_ran:
            rows.append(PositionComparison(i, pf, [], "no data", ph, None if obs is None else obs.heads_ran,
                                           "no data"))
            continue
        heads = obs.heads_ran
        fwd = _agree(pf, obs.layers_ran, planned_forward_layers(st))
        rows.append(PositionComparison(i, pf, obs.layers_ran, fwd, ph, heads,
                                       "not observable" if heads is None else _agree(ph, heads)))
    ok = d_ok and m_ok and bool(rows) and all(r.forward == "agree" and r.head in ("agree", "not observable")
                                              for r in rows)
    why = []
    if not d_ok:
        why.append(f"drafter planned {planned_drafter or '?'}, ran {_short(engine.get('drafter'))}")
    if not m_ok:
        why.append(f"draft model planned {planned_model or '?'}, ran {_short(engine.get('draft_model_class'))}")
    if any(r.forward == "no data" for r in rows):
        why.append("no drafting calls observed at some positions")
    return EngineComparison(engine.instance, runner, "agree" if ok else "disagree",
                            f"planned {planned_drafter or '?'}, ran {_short(engine.get('drafter'))}",
                            f"planned {planned_model or '?'}, ran {_short(engine.get('draft_model_class'))}",
                            rows, "; ".join(why))


# ------------------------------------------------------------------------- output
def _calls(counts: dict[int, int]) -> str:
    ran = [f"{i} ({c})" for i, c in sorted(counts.items()) if c]
    return ", ".join(ran) or "none"


def to_json(path: Path, engines: list[Engine], comparisons: list[EngineComparison] | None) -> dict[str, Any]:
    out = []
    for j, e in enumerate(engines):
        keys = ("event", "time", "pid", "vllm_version", "runner", "drafter", "draft_model_class", "predictor_class",
                "num_mtp_layers", "k", "method", "engine_mode", "compilation", "model", "draft_calls",
                "positions_observable", "heads_observable", "positions_truncated", "layer_calls_since_load")
        doc = {"instance": e.instance, "lines": e.lines, **{k: e.get(k) for k in keys}}
        doc["positions"] = [{"position": p.position, "layers_ran": p.layers_ran, "heads_ran": p.heads_ran,
                             "layer_calls": {str(k): v for k, v in sorted(p.layer_calls.items())},
                             "head_calls": None if p.head_calls is None else
                             {str(k): v for k, v in sorted(p.head_calls.items())}}
                            for p in e.positions]
        doc["plan_comparison"] = None if comparisons is None else _enc(comparisons[j])
        out.append(doc)
    return {"version": 1, "log": str(path), "engines": out,
            "plan_disagrees": None if comparisons is None else any(c.agreement == "disagree" for c in comparisons)}


def _enc(c: EngineComparison) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(c)


def render_text(path: Path, engines: list[Engine], comparisons: list[EngineComparison] | None) -> str:
    lines = [f"{path}: {len(engines)} observed engine process{'es' if len(engines) != 1 else ''}"]
    for j, e in enumerate(engines):
        cc = e.get("compilation") or {}
        lines.append(
            f"== {_short(e.get('draft_model_class'))} (drafter {_short(e.get('drafter'))}, runner {e.get('runner')}), "
            f"vLLM {e.get('vllm_version')}, K={e.get('k')}, {e.get('num_mtp_layers')} MTP layers, "
            f"engine {e.get('engine_mode')} (compilation {cc.get('mode')}, CUDA graphs {cc.get('cudagraph_mode')})")
        lines.append(f"   last line: {e.get('event')} at {e.get('time')}, {e.get('draft_calls')} drafting calls "
                     f"(pid {e.get('pid')}, {e.lines} line{'s' if e.lines != 1 else ''})")
        if not e.get("positions_observable"):
            lines.append("   per-position counts not observable (no drafter found); per-layer calls since load: "
                         + _calls(_counts(e.get("layer_calls_since_load") or {}, "layer_calls_since_load")))
        if e.get("positions_observable") and not e.positions:
            lines.append("   no drafting calls observed yet")
        for p in e.positions:
            head = ("" if p.head_calls is None else f";  per-layer head: {_calls(p.head_calls)}")
            lines.append(f"   position {p.position}: layer {_calls(p.layer_calls)}{head}")
        n = e.get("num_mtp_layers")
        if isinstance(n, int) and e.positions:
            ran = {i for p in e.positions for i in p.layers_ran}
            never = [str(i) for i in range(n) if i not in ran]
            lines.append(f"   MTP layers that ran: {', '.join(map(str, sorted(ran))) or 'none'}"
                         + (f"; never ran: {', '.join(never)}" if never else ""))
        if e.get("positions_truncated"):
            lines.append(f"   (more draft positions than the observer's table: the last row holds the rest)")
        if comparisons is not None:
            c = comparisons[j]
            lines.append(f"   plan: {c.agreement.upper()}" + (f" ({c.why})" if c.why else ""))
            if c.positions:
                lines.append(f"      drafter {c.drafter}; draft model {c.model_class}")
            for r in c.positions:
                obs = ",".join(map(str, r.observed_forward)) or "-"
                hobs = "-" if r.observed_head is None else (",".join(map(str, r.observed_head)) or "-")
                lines.append(f"      position {r.position}  forward planned {_cell(r.planned_forward)} ran {obs}: "
                             f"{r.forward};  head planned {_cell(r.planned_head)} ran {hobs}: {r.head}")
    return "\n".join(lines) + "\n"


def _cell(v: int | None) -> str:
    return "-" if v is None else str(v)
