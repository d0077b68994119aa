"""``history --layers``: since which release draft step *i* reaches MTP layer *i*.

For every release tag, the dispatch analysis plans every registered MTP architecture x
runner (what ``mtp-audit layers --all`` prints for one tree, made by the same
:func:`auditor.layers_cli.plan_tree`); a row per architecture and runner then names the
first release where the forward layer, and the first where the head layer, of each step
*i* is layer *i* (``i mod n`` when K exceeds the layer count n).

Plans are cached per release like scan results: keyed by the git id of the ``vllm/``
tree, the analyzer's digest, the rules, the configuration and the plan settings, so a
second run over the same repository reads JSON instead of analysing.
"""

from __future__ import annotations

import hashlib
import html
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from ..config import Config
from ..gittree import PACKAGE, GitTree, NoVllmInTree, resolve_commit
from ..progress import Progress
from ..result_cache import KeyedFiles, result_key
from .scan import Scanner, select_tags

if TYPE_CHECKING:
    from ..analyses.dispatch import Plan
    from ..engine import RuleClass

LAYER_HISTORY_FORMAT_VERSION = 1
#: bump when what a cached entry holds changes (part of the cache key)
_CACHE_FORMAT = 1
UNKNOWN_VERDICT = "unknown"


@dataclass(frozen=True)
class PlanCell:
    """One architecture x runner plan of one release, reduced to what the history compares."""

    architecture: str
    runner: str
    drafter: Optional[str]
    model_class: Optional[str]
    num_mtp_layers: Optional[int]
    forward: tuple[Optional[int], ...]  # forward layer per draft step
    head: tuple[Optional[int], ...]  # head layer per draft step (None: one shared head)
    verdicts: tuple[str, ...]

    @classmethod
    def of(cls, plan: "Plan") -> "PlanCell":
        return cls(
            architecture=plan.architecture or "?",
            runner=plan.setting.runner,
            drafter=plan.proposer[1] if plan.proposer else None,
            model_class=plan.model_class[1] if plan.model_class else None,
            num_mtp_layers=plan.num_mtp_layers,
            forward=tuple(s.forward_layer for s in plan.steps),
            head=tuple(s.head_layer for s in plan.steps),
            verdicts=tuple(s.verdict for s in plan.steps),
        )

    @property
    def known(self) -> bool:
        # an unknown branch picks the drafter: the layers are one possibility, not the answer
        return bool(self.verdicts) and UNKNOWN_VERDICT not in self.verdicts

    def _reaches(self, layers: tuple[Optional[int], ...], count: int) -> bool:
        n = self.num_mtp_layers or count
        return self.known and bool(layers) and all(layer == i % n for i, layer in enumerate(layers))

    def forward_reaches(self, count: int) -> bool:
        return self._reaches(self.forward, count)

    def head_reaches(self, count: int) -> bool:
        return self._reaches(self.head, count)

    def to_json(self) -> dict[str, Any]:
        return {
            "architecture": self.architecture,
            "runner": self.runner,
            "drafter": self.drafter,
            "model_class": self.model_class,
            "num_mtp_layers": self.num_mtp_layers,
            "forward_layers": list(self.forward),
            "head_layers": list(self.head),
            "verdicts": list(self.verdicts),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "PlanCell":
        return cls(doc["architecture"], doc["runner"], doc["drafter"], doc["model_class"], doc["num_mtp_layers"],
                   tuple(doc["forward_layers"]), tuple(doc["head_layers"]), tuple(doc["verdicts"]))


@dataclass(frozen=True)
class LayerRelease:
    ref: str
    commit: str
    tree: str = ""  # git id of the vllm/ tree ("" when skipped)
    skipped: str = ""
    cells: tuple[PlanCell, ...] = ()
    from_cache: bool = False  # not part of any report


@dataclass(frozen=True)
class LayerRow:
    """One architecture x runner across the releases."""

    architecture: str
    runner: str
    cells: dict[str, Optional[PlanCell]]  # release ref -> plan (None: not registered there)
    forward_since: Optional[str]  # first release where every step i runs forward layer i
    head_since: Optional[str]  # first release where every step i runs head layer i
    forward_lost: tuple[str, ...]  # later releases where it no longer does
    head_lost: tuple[str, ...]
    shared_head: bool = False  # every plan has one shared head: no head layer to reach


@dataclass
class LayerHistory:
    repository: str
    k: int
    layers: int
    runners: tuple[str, ...]
    platform: str
    method: str
    releases: list[LayerRelease]
    timing: dict[str, Any] = field(default_factory=dict)  # not part of any report

    def scanned(self) -> list[LayerRelease]:
        return [r for r in self.releases if not r.skipped]

    def rows(self) -> list[LayerRow]:
        keys = sorted({(c.architecture, c.runner) for r in self.scanned() for c in r.cells})
        rows = []
        for arch, runner in keys:
            cells: dict[str, Optional[PlanCell]] = {}
            for rel in self.scanned():
                cells[rel.ref] = next((c for c in rel.cells if (c.architecture, c.runner) == (arch, runner)), None)
            f_since, f_lost = _since(cells, lambda c: c.forward_reaches(self.layers))
            h_since, h_lost = _since(cells, lambda c: c.head_reaches(self.layers))
            known = [c for c in cells.values() if c is not None and c.known]
            shared = bool(known) and all(h is None for c in known for h in c.head)
            rows.append(LayerRow(arch, runner, cells, f_since, h_since, f_lost, h_lost, shared and h_since is None))
        return rows


def _since(cells: dict[str, Optional[PlanCell]], reaches: Callable[[PlanCell], bool]) -> tuple[Optional[str], tuple[str, ...]]:
    first: Optional[str] = None
    lost: list[str] = []
    for ref, cell in cells.items():
        ok = cell is not None and reaches(cell)
        if ok and first is None:
            first = ref
        elif first is not None and not ok:
            lost.append(ref)
    return first, tuple(lost)


# --------------------------------------------------------------------------- the plan cache


class PlanCache:
    """Per-release plans keyed by the ``vllm/`` tree id (as :class:`ResultCache` keys scans)."""

    def __init__(self, root: Optional[Path]) -> None:
        self.files = KeyedFiles(root, "layer-plans")
        self.root = self.files.root

    def get(self, key: str) -> Optional[tuple[PlanCell, ...]]:
        cells = self.files.read_json(key, "cells")
        if cells is None:
            return None
        try:
            return tuple(PlanCell.from_json(c) for c in cells)
        except Exception:  # noqa: BLE001 - an entry of another shape is a miss, and is removed
            self.files.discard(key)
            return None

    def put(self, key: str, cells: Sequence[PlanCell]) -> None:
        self.files.write_json(key, "cells", [c.to_json() for c in cells])


def plan_key(tree_id: str, config: Config, rules: Sequence["RuleClass"], k: int, layers: int,
             runners: Sequence[str], platform: str, method: str) -> str:
    from ..engine import rule_files

    enabled = [r.code for r in rules if config.rule_enabled(r.code)]
    scan = result_key(tree_id, config, rule_files(rules), enabled)
    raw = f"layer-plans:{_CACHE_FORMAT}|{scan}|{k}|{layers}|{','.join(runners)}|{platform}|{method}"
    return hashlib.sha256(raw.encode()).hexdigest()


# --------------------------------------------------------------------------- the run


def run_layer_history(
    repo: str | Path,
    start: Optional[str] = None,
    end: Optional[str] = None,
    pattern: Optional[str] = None,
    include_pre: bool = False,
    config: Optional[Config] = None,
    cache_dir: Optional[Path] = None,
    workers: Optional[int] = None,
    progress: Optional[Progress] = None,
    *,
    rules: Sequence["RuleClass"],
    k: int = 3,
    layers: int = 3,
    runners: Sequence[str] = ("v1", "v2"),
    platform: str = "cuda",
    method: str = "mtp",
) -> LayerHistory:
    from ..layers_cli import matrix_settings, plan_tree

    started = time.perf_counter()
    scanner = Scanner(repo, config, cache_dir, workers, rules=rules)
    plans = PlanCache(cache_dir)
    releases: list[LayerRelease] = []
    try:
        tags = select_tags(scanner.repo, start, end, pattern, include_pre)
        with (progress or Progress(quiet=True)).steps("history: release", len(tags)) as step:
            for ref in tags:
                step(ref)
                commit = resolve_commit(scanner.repo, ref).hexsha
                try:
                    tree = GitTree(scanner.repo, commit, label=f"{ref}@{commit[:12]}")
                except NoVllmInTree:
                    releases.append(LayerRelease(ref, commit, skipped=f"no {PACKAGE}/ directory in this tree"))
                    continue
                tree_id = tree.commit.tree[PACKAGE].hexsha
                key = plan_key(tree_id, scanner.config, scanner.rules, k, layers, runners, platform, method)
                cells = plans.get(key)
                from_cache = cells is not None
                if cells is None:
                    made = plan_tree(tree, scanner.config, scanner.rules, scanner.facts,
                                     lambda d: matrix_settings(d, runners, k, layers, method, platform), workers)
                    cells = tuple(PlanCell.of(p) for p in made)
                    plans.put(key, cells)
                    scanner.scans += 1
                releases.append(LayerRelease(ref, commit, tree_id, cells=cells, from_cache=from_cache))
        timing = {"seconds": time.perf_counter() - started, "scanned": scanner.scans,
                  "from_cache": sum(1 for r in releases if r.from_cache)}
        return LayerHistory(scanner.name, k, layers, tuple(runners), platform, method, releases, timing)
    finally:
        scanner.close()


# --------------------------------------------------------------------------- reports


def _layers(values: tuple[Optional[int], ...]) -> str:
    return ",".join("-" if v is None else str(v) for v in values)


def cell_text(cell: Optional[PlanCell]) -> str:
    """``forward layers / head layers`` per step; ``?`` when an unknown branch picks the
    drafter, ``—`` when the architecture is not registered in that release, ``no drafter``
    when the runner builds none for it."""
    if cell is None:
        return "—"
    if cell.drafter is None:
        return "no drafter"
    return f"{_layers(cell.forward)} / {_layers(cell.head)}" + ("" if cell.known else " ?")


def _since_text(since: Optional[str], lost: tuple[str, ...], shared_head: bool = False) -> str:
    if since is None:
        return "shared head" if shared_head else "never"
    return since + (f" (not in {', '.join(lost)})" if lost else "")


def _title(hist: LayerHistory) -> str:
    return (f"Since when does draft step i reach MTP layer i? K={hist.k}, {hist.layers} layers per model, "
            f"method {hist.method}, platform {hist.platform}")


def to_json(hist: LayerHistory) -> dict[str, Any]:
    refs = [r.ref for r in hist.scanned()]
    return {
        "version": LAYER_HISTORY_FORMAT_VERSION,
        "kind": "layer-history",
        "repository": hist.repository,
        "k": hist.k,
        "layers": hist.layers,
        "runners": list(hist.runners),
        "platform": hist.platform,
        "method": hist.method,
        "releases": [{"ref": r.ref, "commit": r.commit, "tree": r.tree or None,
                      "status": "skipped" if r.skipped else "scanned", "skip_reason": r.skipped or None}
                     for r in hist.releases],
        "rows": [
            {
                "architecture": row.architecture,
                "runner": row.runner,
                "forward_since": row.forward_since,
                "head_since": row.head_since,
                "forward_lost": list(row.forward_lost),
                "head_lost": list(row.head_lost),
                "shared_head": row.shared_head,
                "cells": {
                    ref: None if (c := row.cells[ref]) is None else {
                        **c.to_json(), "forward_reaches": c.forward_reaches(hist.layers), "head_reaches": c.head_reaches(hist.layers)}
                    for ref in refs
                },
            }
            for row in hist.rows()
        ],
    }


def to_text(hist: LayerHistory) -> str:
    refs = [r.ref for r in hist.scanned()]
    head = ["architecture", "runner", "forward since", "head since", *refs]
    body = [[row.architecture, row.runner.upper(), _since_text(row.forward_since, row.forward_lost),
             _since_text(row.head_since, row.head_lost, row.shared_head), *(cell_text(row.cells[r]) for r in refs)] for row in hist.rows()]
    widths = [max(len(x) for x in col) for col in zip(head, *body)]
    out = [_title(hist), hist.repository]
    out += [f"skipped {r.ref}: {r.skipped}" for r in hist.releases if r.skipped]
    out.append("cells: forward layer per step / head layer per step ('-': one shared head, '?': an unknown branch "
               "picks the drafter, '—': not registered)")
    out.append("")
    for line in [head, *body]:
        out.append("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip())
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(hist: LayerHistory) -> str:
    refs = [r.ref for r in hist.scanned()]
    out = [f"## {_title(hist)}", "", f"Repository `{hist.repository}`.", ""]
    out += [f"- skipped `{r.ref}`: {r.skipped}" for r in hist.releases if r.skipped]
    out.append("Cells: forward layer per step / head layer per step (`-`: one shared head, `?`: an unknown branch "
               "picks the drafter, `—`: not registered).")
    out.append("")
    out.append("| architecture | runner | forward since | head since | " + " | ".join(refs) + " |")
    out.append("|---|---|---|---|" + "---|" * len(refs))
    for row in hist.rows():
        cells = " | ".join(_md(cell_text(row.cells[r])) for r in refs)
        out.append(f"| `{row.architecture}` | {row.runner.upper()} | {_md(_since_text(row.forward_since, row.forward_lost))} "
                   f"| {_md(_since_text(row.head_since, row.head_lost, row.shared_head))} | {cells} |")
    return "\n".join(out) + "\n"


def to_html(hist: LayerHistory) -> str:
    """One self-contained page in the style of ``layers --all --format html``: a row per
    architecture x runner, a cell per release, green when forward and head layers follow
    the step, yellow when only the forward layer does."""
    from ..layers_cli import HEATMAP_CSS

    def e(text: object) -> str:
        return html.escape(str(text), quote=True)

    refs = [r.ref for r in hist.scanned()]
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>mtp-audit history --layers: {e(hist.repository)}</title>", f"<style>{HEATMAP_CSS}</style>", "</head><body>",
           f"<h1>{e(_title(hist))}</h1>",
           f'<p class="muted">{e(hist.repository)} · each cell: forward layers per step, head layers below · hover for the drafter</p>',
           '<p class="legend"><span class="threaded">forward and head follow the step</span>'
           '<span class="unknown">forward only</span><span class="constant">neither</span></p>']
    out += [f'<p class="muted">skipped {e(r.ref)}: {e(r.skipped)}</p>' for r in hist.releases if r.skipped]
    out.append('<table id="layer-history"><thead><tr><th>architecture</th><th>runner</th><th>forward since</th>'
               "<th>head since</th>" + "".join(f"<th>{e(r)}</th>" for r in refs) + "</tr></thead><tbody>")
    for row in hist.rows():
        cells = [f"<td><code>{e(row.architecture)}</code></td><td>{e(row.runner.upper())}</td>",
                 f"<td>{e(_since_text(row.forward_since, row.forward_lost))}</td>",
                 f"<td>{e(_since_text(row.head_since, row.head_lost, row.shared_head))}</td>"]
        for ref in refs:
            c = row.cells[ref]
            if c is None:
                cells.append('<td class="cell none">—</td>')
                continue
            cls = ("threaded" if c.head_reaches(hist.layers) else "unknown") if c.forward_reaches(hist.layers) else "constant"
            title = f"{c.drafter or 'no drafter'} -> {c.model_class or '?'}: {'; '.join(dict.fromkeys(c.verdicts))}"
            cells.append(f'<td class="cell {cls}" title="{e(title)}">{e(_layers(c.forward))}'
                         f"<br><small>{e(_layers(c.head))}{'' if c.known else ' ?'}</small></td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></body></html>")
    return "\n".join(out) + "\n"


def render(hist: LayerHistory, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(to_json(hist), indent=2, ensure_ascii=False) + "\n"
    if fmt == "markdown":
        return to_markdown(hist)
    if fmt == "html":
        return to_html(hist)
    if fmt == "text":
        return to_text(hist)
    raise ValueError(f"unknown history format {fmt!r}")
