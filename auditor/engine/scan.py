"""One scan, in explicit phases:

1. **index** — list the tree's files and parse the seeds (files that mention a threaded
   parameter, a registry table or a draft-step loop);
2. **analyses** — explore the draft loops and fix the set of functions rules examine;
   resolution may parse further files here, and only here;
3. **freeze** — from now on nothing is parsed;
4. **rules** — every rule the caller handed in queries the analysis facade; then the
   suppression comments are applied and the suppression rule reports the wrong ones;
5. **report** — reachability table, problems, stats.

The engine does not know the rules package: the command line builds the rule list.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, Sequence, runtime_checkable

from ..analyses.analysis import Analysis
from ..facts.cache import FactsCache
from ..common.config import Config
from ..common.gc_pause import cyclic_gc_paused
from ..index.index import Index, default_workers
from ..model.findings import Finding, ScanResult, Severity
from .result_cache import ResultCache, result_key
from .prepared import PreparedCache, PreparedEntry, record_phase, restore_phase, usable
from ..source.trees import SourceTree
from ..facts.suppressions import SuppressionProblem, parse_suppressions
from .suppress import apply_suppressions

if TYPE_CHECKING:
    from rules.base import Rule

RuleClass = type["Rule"]
Progress = Callable[[str], None]


@runtime_checkable
class SuppressionChecker(Protocol):
    """A rule about suppression comments (runs last, on what applying them found)."""

    def check_suppressions(self, problems: Sequence[SuppressionProblem]) -> Iterable[Finding]: ...


class Query(Protocol):
    """A question a command declares before the scan (e.g. the plans ``layers`` asks for):
    the engine asks it while the index still loads, so that every file it needs is parsed."""

    def ask(self, analysis: Analysis) -> None: ...


@dataclass
class Scan:
    result: ScanResult
    analysis: Analysis | None  # None when the whole result came from the result cache
    timing: dict[str, Any] = field(default_factory=dict)  # not part of the report: differs cold/warm


def tree_digest(tree: SourceTree, cache_root: Path | None = None) -> str:
    """Identity of a tree's Python content: every path with the hash of its bytes. With
    ``cache_root``, a directory tree's files whose identity on disk did not change since an
    earlier command are not read again (:mod:`auditor.source.sha_memo`)."""
    from ..source.trees import DirectoryTree

    if cache_root is not None and isinstance(tree, DirectoryTree) and not tree.has_every_blob_sha():
        from ..source.sha_memo import ShaMemo

        memo = ShaMemo(cache_root, tree)
        memo.fill()
        digest = tree_digest(tree)
        if memo.reused != len(tree.known_blob_shas()):
            memo.save()
        return digest
    h = hashlib.sha256()
    for path in tree.python_files():
        try:
            digest = tree.blob_sha(path)
        except OSError as exc:
            digest = f"<unreadable {type(exc).__name__}>"
        h.update(f"{path}\0{digest}\0".encode("utf-8", "surrogateescape"))
    for path, kind, _ in tree.problems():
        h.update(f"{path}\0<{kind}>\0".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def rule_files(rules: Sequence[RuleClass]) -> list[Path]:
    """Source files of the rules (part of the result cache key)."""
    import inspect

    out = set()
    for r in rules:
        src = inspect.getsourcefile(r)
        if src:
            out.add(Path(src).resolve())
    return sorted(out)


@cyclic_gc_paused
def run_scan(
    tree: SourceTree,
    config: Config,
    rules: Sequence[RuleClass],
    cache: FactsCache | None = None,
    workers: int | None = None,
    results: ResultCache | None = None,
    progress: Progress | None = None,
    tree_id: str | None = None,
    queries: Sequence[Query] = (),
    prepared: "PreparedCache | None" = None,
) -> Scan:
    """Scan ``tree`` with ``rules`` (those the configuration disables are skipped). With
    ``results``, an unchanged tree (same paths and bytes, same tool, rules and
    configuration) returns the previous result without analysing anything. ``tree_id``
    names an immutable tree (a git tree id) so that its digest need not be computed.
    ``queries``: a command's own questions, asked in the loading phase (they may parse
    files; after the freeze a load raises). They disable the result cache: the caller wants
    the analysis. ``prepared``: the loading phase's results of an earlier scan of the same
    tree (:mod:`auditor.engine.prepared`), used and written when ``queries`` are given."""
    started = time.perf_counter()
    enabled = [r for r in rules if config.rule_enabled(r.code)]
    say = progress or (lambda _msg: None)
    key = None
    if results is not None and results.root is not None and not queries:
        ident = tree_id if tree_id is not None else "dir:" + tree_digest(tree, results.root.parent)
        key = result_key(ident, config, rule_files(rules), [r.code for r in enabled])
        cached = results.get(key)
        if cached is not None:
            cached.root = tree.label
            timing = {"seconds": time.perf_counter() - started, "files_parsed": 0, "cache_hits": 0, "result_cached": True}
            return Scan(cached, None, timing)
    pkey = None
    if prepared is not None and prepared.enabled and queries and usable(tree, cache):
        pkey = prepared.key("dir:" + (tree_id or tree_digest(tree, cache.root.parent if cache and cache.root else None)), config, rule_files(rules), [r.code for r in enabled])
        entry = prepared.get(pkey)
        if entry is not None:
            again = _scan_prepared(tree, config, cache, workers, queries, entry, started)
            if again is not None:
                return again
            # a query needed files the entry does not hold: the ordinary path, from the start
    # Phase 1: index.
    index = Index(tree, config, cache, workers if workers is not None else default_workers())
    say(f"indexing {len(index.files)} files")
    index.load_seeds()
    # Phase 2: analyses (the only phase that may parse more files), then freeze.
    say(f"analysing ({len(index.seeds)} seed files)")
    analysis = Analysis(index, config)
    analysis.prepare()
    phase = record_phase(analysis) if pkey is not None else None
    for query in queries:  # a command's own questions that may load files (issue 11: layers)
        query.ask(analysis)
    index.freeze()
    # Phase 3: rules.
    say(f"running {len(enabled)} rules")
    findings = _run_rules(analysis, enabled, known_codes={r.code for r in rules})
    result = ScanResult(root=tree.label, findings=findings)
    _name_roots(tree, result)
    # A row whose step is lost names the finding that loses it, as ``layers``' plans do.
    result.reachability = [replace(row, loops=[lp.cite_loss(findings) for lp in row.loops])
                           for row in analysis.reachability_table()]
    result.problems = list(index.problems.values())
    result.stats = {
        "files": len(index.files),
        "files_analysed": sum(1 for f in index.facts.values() if f is not None),
        "findings": len(result.findings),
    }
    limits = analysis.limits_hit()
    if limits:
        result.stats["limits_hit"] = limits
    result.sort()
    timing = {"seconds": time.perf_counter() - started, "files_parsed": index.parsed, "cache_hits": index.cache.hits}
    if key is not None and results is not None:
        results.put(key, result)
    if pkey is not None and prepared is not None and phase is not None:
        prepared.put(pkey, phase, list(index.facts)[len(phase.index.files):], result.findings)
    return Scan(result, analysis, timing)


def _scan_prepared(tree: SourceTree, config: Config, cache: FactsCache | None, workers: int | None,
                   queries: Sequence[Query], entry: "PreparedEntry", started: float) -> Scan | None:
    """The scan from a :mod:`~auditor.engine.prepared` entry: the index restored, the queries
    asked, the findings recorded for the files they loaded; None when none were recorded for
    those (or the index cannot be restored). The result holds the findings and problems only
    (the commands that pass an entry read nothing else)."""
    index = Index(tree, config, cache, workers if workers is not None else default_workers())
    analysis = Analysis(index, config)
    if not restore_phase(analysis, entry.phase):
        return None
    from ..analyses import PluginProvider

    plugins = analysis.get(PluginProvider)
    plugins.install()  # as the loading phase does (no plugin here: see prepared.usable)
    for query in queries:
        query.ask(analysis)
    plugins.settle_loaded()
    findings = entry.findings_for(list(index.facts)[len(entry.phase.index.files):])
    if findings is None:
        return None
    index.freeze()
    result = ScanResult(root=tree.label, findings=findings)
    result.problems = list(index.problems.values())
    result.sort()
    timing = {"seconds": time.perf_counter() - started, "files_parsed": index.parsed, "cache_hits": index.cache.hits,
              "prepared": True}
    return Scan(result, analysis, timing)


def _name_roots(tree: SourceTree, result: ScanResult) -> None:
    """Issue 13: a scan with platform plugins names the root of every finding's path."""
    from ..model.findings import ScanRoot
    from ..source.trees import CombinedTree

    if not isinstance(tree, CombinedTree):
        return
    result.roots = [ScanRoot(r.name, r.location, r.tree.packages, r.plugin) for r in tree.roots]
    for f in result.findings:
        f.root = tree.root_of(f.path).name


def _run_rules(analysis: Analysis, rules: Sequence[RuleClass], known_codes: set[str]) -> list[Finding]:
    from_rules: list[Finding] = []
    suppression_rules: list[SuppressionChecker] = []
    for rule_cls in rules:
        rule = rule_cls()
        if isinstance(rule, SuppressionChecker):
            suppression_rules.append(rule)
            continue
        found = _finalize(rule.check(analysis), analysis.config)
        for f in found:
            if f.meaning is None:  # a rule may give one kind of its findings its own
                f.meaning = getattr(rule_cls, "meaning", None)
        from_rules.extend(found)
    findings = _distinct(from_rules)
    problems = _apply_suppressions(analysis.index, findings, known_codes)
    for checker in suppression_rules:
        findings += _finalize(checker.check_suppressions(problems), analysis.config)
    return findings


def _finalize(found: Iterable[Finding], config: Config) -> list[Finding]:
    out = []
    for f in found:
        if f.rule in config.severity:
            f.severity = Severity(config.severity[f.rule])
        out.append(f.finalize())
    return out


def _distinct(findings: list[Finding]) -> list[Finding]:
    """One finding per defect.

    The same report at the same place (two rules, or one rule reached twice) is kept once.
    Distinct places that share a fingerprint (two calls to the same callee in one function
    that both drop the step) are distinct defects: the second and later get an occurrence
    index in their fingerprint (never a line number, so it survives edits elsewhere).
    """
    by_print: dict[str, list[Finding]] = {}
    for f in sorted(findings, key=lambda f: f.sort_key()):
        same = by_print.setdefault(f.fingerprint, [])
        if any((g.path, g.line, g.column) == (f.path, f.line, f.column) for g in same):
            continue
        same.append(f)
    out = []
    for same in by_print.values():
        for occurrence, f in enumerate(same):
            if occurrence:
                f.fingerprint_key += f"|#{occurrence}"
                f.finalize()
            out.append(f)
    return out


def _apply_suppressions(index: Index, findings: list[Finding], known_codes: set[str]) -> list[SuppressionProblem]:
    sups = []
    for path in index.suppression_files:
        try:
            text = index.tree.read(path).decode("utf-8", "replace")
        except OSError:
            continue
        sups.extend(parse_suppressions(path, text))
    if not sups:
        return []
    def_lines = {}
    for f in findings:
        fn = index.function((f.path, f.function)) if f.function else None
        if fn is not None:
            def_lines[(f.path, f.function)] = fn.line
    return apply_suppressions(findings, sups, def_lines, known_codes)
