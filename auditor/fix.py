"""Autofix: a libcst codemod that threads the step through a dropping wrapper (MTP001).

For each MTP001 finding the function that drops the step

* accepts it — a ``spec_step_idx: int = 0`` parameter is added when it only arrived
  through ``**kwargs`` — and
* passes it on to the callee by keyword (or replaces the constant it passed).

libcst keeps formatting and comments. A fix is refused, with the reason, when some
callee the call can reach cannot take the parameter (the fix would create MTP005),
and a file is never written if the result does not parse.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .atomic import write_atomic
from .autofix import Autofix
from .engine import Scan
from .model import Finding

if TYPE_CHECKING:
    from .engine import RuleClass



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


class _ThreadStep(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, param: str, targets: dict[str, list[tuple[int, int]]]) -> None:
        super().__init__()
        self.param = param
        self.targets = targets  # qualname -> call positions (line, col) to fix
        self.stack: list[str] = []
        self.done: set[tuple[str, int, int]] = set()

    def _qual(self) -> str:
        return ".".join(self.stack)

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        self.stack.append(node.name.value)
        return True

    def leave_ClassDef(self, original: cst.ClassDef, updated: cst.ClassDef) -> cst.ClassDef:
        self.stack.pop()
        return updated

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        self.stack.append(node.name.value)
        return True

    def leave_FunctionDef(self, original: cst.FunctionDef, updated: cst.FunctionDef) -> cst.FunctionDef:
        qual = self._qual()
        self.stack.pop()
        if qual not in self.targets:
            return updated
        params = updated.params
        names = {p.name.value for p in [*params.posonly_params, *params.params, *params.kwonly_params]}
        if self.param in names:
            return updated
        new_param = cst.Param(
            name=cst.Name(self.param),
            annotation=cst.Annotation(cst.Name("int")),
            default=cst.Integer("0"),
        )
        if isinstance(params.star_arg, cst.Param) or params.kwonly_params:
            params = params.with_changes(kwonly_params=[*params.kwonly_params, new_param])
        else:
            plist = list(params.params)
            if plist and isinstance(plist[-1].comma, cst.Comma):
                # Same separator as its neighbours (one parameter per line stays so).
                new_param = new_param.with_changes(comma=plist[-1].comma)
            elif plist:
                plist[-1] = plist[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            params = params.with_changes(params=[*plist, new_param])
        return updated.with_changes(params=params)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        qual = self._qual()
        wanted = self.targets.get(qual)
        if not wanted:
            return updated
        pos = self.get_metadata(PositionProvider, original).start
        if (pos.line, pos.column) not in wanted:
            return updated
        self.done.add((qual, pos.line, pos.column))
        value = cst.Name(self.param)
        args = list(updated.args)
        for i, a in enumerate(args):
            if a.keyword is not None and a.keyword.value == self.param:
                args[i] = a.with_changes(value=value)
                return updated.with_changes(args=args)
        new_arg = cst.Arg(keyword=cst.Name(self.param), value=value, equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
        if args:
            last = args[-1]
            if isinstance(last.comma, cst.Comma):
                # Keep the call's trailing-comma style: the new argument takes it over.
                new_arg = new_arg.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
                args[-1] = last.with_changes(
                    comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")), whitespace_after_arg=cst.SimpleWhitespace("")
                )
            else:
                # The closing parenthesis keeps its place; the new argument goes after the last one.
                new_arg = new_arg.with_changes(whitespace_after_arg=last.whitespace_after_arg)
                args[-1] = last.with_changes(
                    comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")), whitespace_after_arg=cst.SimpleWhitespace("")
                )
            # Insert before any **kwargs expansion so the call stays valid.
            star = [i for i, a in enumerate(args) if a.star == "**"]
            if star:
                args.insert(star[0], new_arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))))
                return updated.with_changes(args=args)
        args.append(new_arg)
        return updated.with_changes(args=args)


def thread_step(source: str, param: str, targets: dict[str, list[tuple[int, int]]]) -> str:
    """``source`` with ``param`` threaded through the calls at ``targets`` (qualname ->
    call positions). Raises libcst's errors when the source cannot be rewritten."""
    return MetadataWrapper(cst.parse_module(source)).visit(_ThreadStep(param, targets)).code


def fixable_codes(rules: Sequence["RuleClass"]) -> dict[str, Autofix]:
    """The rules that declare an autofix, by code."""
    return {r.code: r.autofix for r in rules if r.autofix is not None}


def apply_fixes(
    scan: Scan, root: Path, rules: Sequence["RuleClass"], select: set[str] | None = None, write: bool = True
) -> FixReport:
    report = FixReport()
    analysis = scan.analysis
    if analysis is None:
        raise ValueError("apply_fixes needs a scan with its analysis (not a cached result)")
    fixes = fixable_codes(rules)
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
                new = fixes[code].rewrite(new, [f for f in chosen if f.rule == code])
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
