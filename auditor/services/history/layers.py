"""``history --layers``: since which release draft step *i* reaches MTP layer *i*.

For every release tag, the dispatch analysis plans every registered MTP architecture x
runner (what ``mtp-audit layers --all`` prints for one tree, made by the same
:func:`auditor.services.layers.plan_tree`); a row per architecture and runner then names the
first release where the forward layer, and the first where the head layer, of each step
*i* is layer *i* (``i mod n`` when K exceeds the layer count n).

Plans are cached per release like scan results: keyed by the git id of the ``vllm/``
tree, the analyzer's digest, the rules, the configuration and the plan settings, so a
second run over the same repository reads JSON instead of analysing.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from ...common.config import Config
from ...source.gittree import PACKAGE, GitTree, NoVllmInTree, resolve_commit
from ...common.progress import Progress
from ...engine.result_cache import KeyedFiles, result_key
from ...model.layer_history import LayerHistory, LayerRelease, PlanCell
from .scan import Scanner, select_tags

if TYPE_CHECKING:
    from ...analyses.dispatch import Plan
    from ...engine.scan import RuleClass

#: bump when what a cached entry holds changes (part of the cache key)
_CACHE_FORMAT = 2  # 2: cells hold the stacks a step's forward runs whole (forward_stacks)


def plan_cell(plan: "Plan") -> PlanCell:
    """One plan reduced to what the history compares."""
    return PlanCell(
        architecture=plan.architecture or "?",
        runner=plan.setting.runner,
        drafter=plan.proposer[1] if plan.proposer else None,
        model_class=plan.model_class[1] if plan.model_class else None,
        num_mtp_layers=plan.num_mtp_layers,
        forward=tuple(s.forward_layer for s in plan.steps),
        head=tuple(s.head_layer for s in plan.steps),
        verdicts=tuple(s.verdict for s in plan.steps),
        stacks=tuple(s.stack for s in plan.steps),
    )


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
    from ...engine.scan import rule_files

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
    from ..layers import matrix_settings, plan_tree

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
                    cells = tuple(plan_cell(p) for p in made)
                    plans.put(key, cells)
                    scanner.scans += 1
                releases.append(LayerRelease(ref, commit, tree_id, cells=cells, from_cache=from_cache))
        timing = {"seconds": time.perf_counter() - started, "scanned": scanner.scans,
                  "from_cache": sum(1 for r in releases if r.from_cache)}
        return LayerHistory(scanner.name, k, layers, tuple(runners), platform, method, releases, timing)
    finally:
        scanner.close()
