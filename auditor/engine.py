"""One scan: index the tree, run the analyses, apply the rules, build the reachability report."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass

from rules import all_rules

from .analysis import MODULE_CONTAINERS, Analysis
from .cache import FactsCache
from .config import Config
from .index import Index, default_workers
from .result_cache import ResultCache, result_key
from .model import ClassRef, ClassReachability, LoopReach, ScanResult, Severity
from .source import SourceTree
from .suppress import SUPPRESSION_RULE, apply_suppressions, parse_suppressions

_COUNT_HINT = ("mtp", "nextn", "predict", "spec", "draft")


@dataclass
class Scan:
    result: ScanResult
    analysis: Analysis | None  # None when the whole result came from the result cache
    timing: dict  # not part of the report: it differs between cold and warm runs


def tree_digest(tree: SourceTree) -> str:
    """Identity of a tree's Python content: every path with the hash of its bytes."""
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


def run_scan(
    tree: SourceTree,
    config: Config,
    cache: FactsCache | None = None,
    workers: int | None = None,
    results: ResultCache | None = None,
) -> Scan:
    """Scan ``tree``. With ``results``, an unchanged tree (same paths and bytes, same tool
    and configuration) returns the previous result without analysing anything."""
    started = time.perf_counter()
    key = None
    if results is not None and results.root is not None:
        key = result_key("dir:" + tree_digest(tree), config)
        cached = results.get(key)
        if cached is not None:
            cached.root = tree.label
            timing = {"seconds": time.perf_counter() - started, "files_parsed": 0, "cache_hits": 0, "result_cached": True}
            return Scan(cached, None, timing)
    index = Index(tree, config, cache, workers if workers is not None else default_workers())
    index.load_seeds()
    analysis = Analysis(index, config)
    findings = []
    rule_classes = all_rules()
    for rule_cls in rule_classes:
        if not config.rule_enabled(rule_cls.code):
            continue
        rule = rule_cls()
        for f in rule.check(analysis):
            if f.rule in config.severity:
                f.severity = Severity(config.severity[f.rule])
            findings.append(f.finalize())
    # Two rules never report the same place twice; dedupe identical fingerprints.
    unique = {f.fingerprint: f for f in sorted(findings, key=lambda f: f.sort_key())}
    findings = list(unique.values())
    suppression_findings = _suppressions(index, analysis, findings, {r.code for r in rule_classes})
    if config.rule_enabled(SUPPRESSION_RULE):
        findings += suppression_findings
    result = ScanResult(root=tree.label, findings=findings)
    result.reachability = reachability(analysis)
    result.problems = list(index.problems.values())
    result.stats = {
        "files": len(index.files),
        "files_analysed": sum(1 for f in index.facts.values() if f is not None),
        "findings": len(result.findings),
    }
    result.sort()
    timing = {"seconds": time.perf_counter() - started, "files_parsed": index.parsed, "cache_hits": index.cache.hits}
    if key is not None:
        results.put(key, result)
    return Scan(result, analysis, timing)


def _suppressions(index: Index, analysis: Analysis, findings: list, known_codes: set[str]) -> list:
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
            def_lines[(f.path, f.function)] = fn["line"]
    return apply_suppressions(findings, sups, def_lines, known_codes)


def layer_count_fields(analysis: Analysis, cls) -> list[str]:
    """Config fields that size the model's MTP layer container(s)."""
    fields: set[str] = set()
    for part in sorted(analysis.model_parts(cls)):
        cf = analysis.index.class_facts(part)
        sets = [s for m in cf.get("methods", {}).values() for s in m["attr_sets"] if len(s["target"]) == 2]
        by_attr: dict[str, list] = {}
        for s in sets:
            by_attr.setdefault(s["target"][1], []).append(s["value"])
        for s in sets:
            call = s["value"].get("call")
            if not call or call[-1] not in MODULE_CONTAINERS:
                continue
            found = set(s["value"].get("cfg", []))
            for n in s["value"]["n"]:
                if n.startswith("self."):
                    for v in by_attr.get(n[5:], []):
                        found.update(v.get("cfg", []))
            hinted = {f for f in found if any(h in f.lower() for h in _COUNT_HINT)}
            fields.update(hinted or found)
    return sorted(fields)


def reachability(analysis: Analysis) -> list[ClassReachability]:
    loops = analysis.loop_results()
    out = []
    for cls in analysis.model_classes():
        rep = ClassReachability(
            ClassRef(*cls), analysis.architectures(cls), layer_count_fields(analysis, cls)
        )
        for lr in loops:
            sels = [s for s in lr.selections if s.model_class == cls]
            entries = [e for e in lr.entries if e.model_class == cls]
            if not entries:
                continue
            fwd = [s for s in sels if s.method in ("forward", "__call__")] or sels
            varying = [s for s in fwd if s.kind == "varying"]
            loop_label = f"{lr.func[0]}:{lr.loop['line']} {lr.func[1]}"
            if varying:
                detail = f"step i selects {varying[0].container}[i] (via {', '.join(sorted({s.method for s in sels if s.kind == 'varying'}))})"
                others = sorted({s.method for s in sels if s.kind != "varying"})
                if others:
                    detail += f"; {', '.join(others)} still use(s) step 0"
                rep.loops.append(LoopReach(loop_label, True, detail, list(varying[0].hops)))
            elif fwd:
                kinds = sorted({s.kind for s in fwd})
                detail = f"every step selects {fwd[0].container} with the default/constant step ({'/'.join(kinds)}): layer 0"
                rep.loops.append(LoopReach(loop_label, False, detail, list(fwd[0].hops)))
            else:
                rep.loops.append(LoopReach(loop_label, False, "reached, but no layer selection found on the path", list(entries[0].hops)))
        out.append(rep)
    return out
