"""``fix``: apply the rules' autofixes to the findings of one scan, refusing (with the
reason) what cannot be fixed safely; the files are written atomically, or only diffed."""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from ..common.atomic import write_atomic
from ..common.errors import UsageError
from ..fix.autofix import Autofix
from ..fix.codemod import line_limit
from ..model.findings import Finding

if TYPE_CHECKING:
    from ..engine.scan import RuleClass, Scan


@dataclass
class FixReport:
    changed: dict[str, tuple[str, str]] = field(default_factory=dict)  # path -> (old, new)
    refused: list[tuple[Finding, str]] = field(default_factory=list)
    fixed: list[Finding] = field(default_factory=list)

    def diff(self) -> str:
        out: list[str] = []
        for path, (old, new) in sorted(self.changed.items()):
            out.extend(
                difflib.unified_diff(old.splitlines(True), new.splitlines(True), f"a/{path}", f"b/{path}")
            )
        return "".join(out)


def fixable_codes(rules: Sequence["RuleClass"]) -> dict[str, Autofix]:
    """The rules that declare an autofix, by code."""
    return {r.code: r.autofix for r in rules if r.autofix is not None}


def apply_fixes(
    scan: "Scan", root: Path, rules: Sequence["RuleClass"], select: set[str] | None = None, write: bool = True
) -> FixReport:
    report = FixReport()
    analysis = scan.analysis
    if analysis is None:
        raise ValueError("apply_fixes needs a scan with its analysis (not a cached result)")
    fixes = fixable_codes(rules)
    limit = line_limit(root)
    plans: dict[str, list[Finding]] = {}
    for f in scan.result.findings:
        if f.rule in fixes and not f.suppressed and (not select or f.rule in select):
            plans.setdefault(f.path, []).append(f)
    for path, findings in sorted(plans.items()):
        chosen: list[Finding] = []
        for f in findings:
            reason = fixes[f.rule].refusal(analysis, f)
            if reason:
                report.refused.append((f, reason))
            else:
                chosen.append(f)
        if not chosen:
            continue
        full = root / path
        try:
            old = full.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            report.refused.extend((f, f"cannot read {path}: {exc}") for f in chosen)
            continue
        new = old
        try:
            for code in sorted({f.rule for f in chosen}):
                new = fixes[code].rewrite(new, [f for f in chosen if f.rule == code], limit)
        except Exception as exc:  # libcst cannot parse/transform: refuse rather than guess
            report.refused.extend((f, f"libcst could not rewrite {path}: {type(exc).__name__}") for f in chosen)
            continue
        try:
            ast.parse(new)
        except SyntaxError as exc:
            report.refused.extend((f, f"the rewritten file would not parse ({exc.msg}); left unchanged") for f in chosen)
            continue
        if new == old:
            continue
        if write:
            try:
                write_atomic(full, new)
            except OSError as exc:
                report.refused.extend((f, f"cannot write {path}: {exc.strerror or exc}") for f in chosen)
                continue
        report.changed[path] = (old, new)
        report.fixed.extend(chosen)
    return report


def fix_tree(path: Path, select: Optional[list[str]], write: bool, only: Optional[list[str]],
             cache_dir: Optional[Path], no_cache: bool, config: Optional[Path]) -> FixReport:
    """Scan the tree at ``path`` and fix the findings of the ``select``ed fixable rules
    (default: all of them), in the ``only`` files when given."""
    from .scan import scan_target
    from .settings import check_codes, registered_rules, split_codes

    rules = registered_rules()
    fixable = set(fixable_codes(rules))
    codes = set(check_codes(split_codes(select), "--select", exact=True)) if select else fixable
    unsupported = codes - fixable
    if unsupported:
        raise UsageError(f"no autofix for {', '.join(sorted(unsupported))} (fixable: {', '.join(sorted(fixable))})")
    scan_, _ = scan_target(path, False, None, cache_dir, no_cache, config, None, None, None)
    assert scan_.analysis is not None
    root = Path(getattr(scan_.analysis.index.tree, "root"))
    if only:
        wanted = {_relative(p, root) for p in only}
        files = set(scan_.analysis.index.tree.python_files())
        missing = sorted(w for w in wanted if w not in files)
        if missing:
            raise UsageError(f"--file {missing[0]}: no such Python file under {root}")
        scan_.result.findings = [f for f in scan_.result.findings if f.path in wanted]
    return apply_fixes(scan_, root, rules, codes, write=write)


def _relative(given: str, root: Path) -> str:
    """``--file`` as a root-relative POSIX path (absolute paths and ./ prefixes accepted)."""
    p = Path(given)
    if p.is_absolute():
        try:
            p = p.resolve().relative_to(root.resolve())
        except ValueError:
            raise UsageError(f"--file {given}: not under the scanned root {root}") from None
    return p.as_posix().lstrip("/").removeprefix("./")
