"""``scan`` and the commands built on one scan (``graph``, ``explain``, ``baseline
create``): open the target with its plugins, load the settings, scan, apply a baseline."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..common.errors import UsageError
from ..common.progress import Progress
from .settings import cache_root, load_settings, registered_rules
from .targets import open_target, with_plugins

if TYPE_CHECKING:
    from ..common.config import Config
    from ..engine.scan import Scan
    from ..model.findings import Finding, ScanResult
    from .baseline import GoneEntries

PARSE_FAILURES = ("parse-error", "decode-error")


def scan_target(
    path: Optional[Path],
    installed: bool,
    release: Optional[str],
    cache_dir: Optional[Path],
    no_cache: bool,
    config: Optional[Path],
    select: Optional[list[str]],
    ignore: Optional[list[str]],
    workers: Optional[int],
    progress: Optional[Progress] = None,
    reuse_result: bool = False,
    plugins: Optional[list[Path]] = None,
    plugin_releases: Optional[list[str]] = None,
) -> "tuple[Scan, Config]":
    """Open the target (with any platform plugins), load the settings and scan;
    ``reuse_result``: an unchanged tree may return the cached result (no analysis object)."""
    from ..facts.cache import FactsCache
    from ..engine.scan import run_scan
    from ..engine.result_cache import ResultCache

    progress = progress or Progress(quiet=True)
    vllm_tree = open_target(path, installed, release, cache_dir, progress)
    tree = with_plugins(vllm_tree, plugins, plugin_releases, cache_dir, progress)
    cfg = load_settings(getattr(vllm_tree, "root", None), config, select, ignore)
    facts = FactsCache(cache_root(no_cache, cache_dir))
    results = ResultCache(facts.root.parent) if reuse_result and facts.root is not None else None
    progress.phase(f"scanning {tree.label}")
    scan = run_scan(tree, cfg, registered_rules(), facts, workers, results, progress=progress.phase)
    t = scan.timing
    how = "unchanged tree, result from cache" if t.get("result_cached") else f"{t['files_parsed']} files parsed, {t['cache_hits']} from cache"
    progress.line(f"scanned in {t['seconds']:.2f}s ({how})")
    return scan, cfg


def apply_baseline(result: "ScanResult", baseline: Optional[Path], everything: "Optional[list[Finding]]",
                   cfg: "Optional[Config]" = None) -> "GoneEntries":
    """Hide baseline findings; return the entries whose findings are gone, fixed apart from
    behaviour changes (an entry of a rule whose reports are by design, as its registered
    rule declares). An entry is gone only when its finding is really gone from the tree
    (``everything``: all of its findings, not only the reported ones) and its rule ran."""
    from .baseline import GoneEntries, apply_baseline as hide, read_baseline, sort_gone
    from .lint_changes import meanings_of

    if baseline is None:
        return GoneEntries()
    entries = read_baseline(baseline)
    remaining, _ = hide(result.findings, entries)
    new, gone_entries = hide(everything if everything is not None else result.findings, entries)
    if cfg is not None:
        gone_entries = [e for e in gone_entries if not isinstance(e.get("rule"), str) or cfg.rule_enabled(e["rule"])]
    gone = sort_gone(gone_entries, meanings_of(registered_rules()), new=new)
    result.stats["baseline_hidden"] = len(result.findings) - len(remaining)
    result.stats["baseline_fixed"] = [e["fingerprint"] for e in gone.fixed]
    result.stats["baseline_behaviour_changes"] = [e["fingerprint"] for e in gone.behaviour_changes]
    result.stats["baseline_masked"] = [e["fingerprint"] for e, _ in gone.masked]
    result.findings = remaining
    return gone


def find_finding(scan: "Scan", finding_id: str) -> "Finding":
    """The finding whose id (fingerprint) starts with ``finding_id``; none or several is a usage error."""
    matches = [f for f in scan.result.findings if f.fingerprint.startswith(finding_id.lower())]
    if not matches:
        raise UsageError(f"no finding with id {finding_id!r} in this tree (ids are the fingerprints `scan` prints)")
    if len(matches) > 1:
        raise UsageError(f"id {finding_id!r} is ambiguous: {', '.join(f.fingerprint for f in matches)}")
    return matches[0]
