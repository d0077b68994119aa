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

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from .atomic import write_atomic
from .engine import Scan
from .model import Finding

FIXABLE = {"MTP001"}


@dataclass
class FixReport:
    changed: dict[str, tuple[str, str]] = field(default_factory=dict)  # path -> (old, new)
    refused: list[tuple[Finding, str]] = field(default_factory=list)
    fixed: list[Finding] = field(default_factory=list)

    def diff(self) -> str:
        out = []
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


def _refusal(scan: Scan, f: Finding, param: str) -> str | None:
    analysis = scan.analysis
    fn = analysis.index.function((f.path, f.function))
    if fn is None:
        return "the function is no longer in the analysed tree"
    ctx = analysis.defining_class((f.path, f.function))
    for ci, call in enumerate(fn["calls"]):
        if call["line"] != f.line or call["col"] != f.column:
            continue
        bad = sorted({t.func[1] for t in analysis.targets((f.path, f.function), fn, ctx, ci) if not analysis.accepts(t.func, param)})
        if bad:
            return f"{', '.join(bad)} cannot accept {param}: the fix would raise TypeError there (MTP005)"
        return None
    return "the call site could not be located"


def plan_fixes(scan: Scan, select: set[str] | None = None) -> dict[str, list[Finding]]:
    plans: dict[str, list[Finding]] = {}
    for f in scan.result.findings:
        if f.rule not in FIXABLE or f.suppressed or (select and f.rule not in select):
            continue
        plans.setdefault(f.path, []).append(f)
    return plans


def apply_fixes(scan: Scan, root: Path, select: set[str] | None = None, write: bool = True) -> FixReport:
    report = FixReport()
    param = scan.analysis.params[0]
    for path, findings in sorted(plan_fixes(scan, select).items()):
        accepted: dict[str, list[tuple[int, int]]] = {}
        chosen: list[Finding] = []
        for f in findings:
            reason = _refusal(scan, f, param)
            if reason:
                report.refused.append((f, reason))
                continue
            accepted.setdefault(f.function, []).append((f.line, f.column))
            chosen.append(f)
        if not accepted:
            continue
        full = root / path
        try:
            old = full.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            for f in chosen:
                report.refused.append((f, f"cannot read {path}: {exc}"))
            continue
        try:
            module = cst.parse_module(old)
            transformer = _ThreadStep(param, accepted)
            new = MetadataWrapper(module).visit(transformer).code
        except Exception as exc:  # libcst cannot parse/transform: refuse rather than guess
            for f in chosen:
                report.refused.append((f, f"libcst could not rewrite {path}: {type(exc).__name__}"))
            continue
        try:
            ast.parse(new)
        except SyntaxError as exc:
            for f in chosen:
                report.refused.append((f, f"the rewritten file would not parse ({exc.msg}); left unchanged"))
            continue
        if new == old:
            continue
        if write:
            try:
                write_atomic(full, new)
            except OSError as exc:
                for f in chosen:
                    report.refused.append((f, f"cannot write {path}: {exc.strerror or exc}"))
                continue
        report.changed[path] = (old, new)
        report.fixed.extend(chosen)
    return report
