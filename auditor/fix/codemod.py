"""The libcst codemod that threads the step through a dropping wrapper (MTP001 autofix).

For each MTP001 finding the function that drops the step

* accepts it — a ``spec_step_idx: int = 0`` parameter is added when it only arrived
  through ``**kwargs`` — and
* passes it on to the callee by keyword (or replaces the constant it passed).

libcst keeps formatting and comments, and the new argument follows the call's layout:
one argument per line stays so; when the added argument would make a line longer than
the project's line length (``[tool.ruff]``/``[tool.black]`` ``line-length``, else 88),
it goes on a line of its own, or every argument does. A fix is refused, with the reason, when some
callee the call can reach cannot take the parameter (the fix would create MTP005),
and a file is never written if the result does not parse (:mod:`auditor.services.fix`).
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
from libcst.metadata import CodeRange, MetadataWrapper, PositionProvider


class _ThreadStep(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, param: str, targets: dict[str, list[tuple[int, int]]], source: str = "", limit: int = 88, indent: str = "    ") -> None:
        super().__init__()
        self.param = param
        self.lines = source.split("\n")
        self.limit = limit
        self.indent = indent
        self.blank = cst.Module(body=[], default_indent=indent)
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
        depth = len(self.stack) - 1  # enclosing classes and functions: the def's indentation
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
        fixed = updated.with_changes(params=params)
        if self._header_too_long(fixed, depth):
            fixed = _one_param_per_line(fixed, self.indent)
        return fixed

    def _header_too_long(self, fn: cst.FunctionDef, depth: int) -> bool:
        header = fn.with_changes(
            decorators=[], leading_lines=[], body=cst.SimpleStatementSuite([cst.Expr(cst.Ellipsis())])
        )
        lines = self.blank.code_for_node(header).rstrip("\n").removesuffix(" ...").split("\n")
        return any(len(self.indent) * depth + len(line) > self.limit for line in lines)

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        qual = self._qual()
        wanted = self.targets.get(qual)
        if not wanted:
            return updated
        pos = self.get_metadata(PositionProvider, original)
        if (pos.start.line, pos.start.column) not in wanted:
            return updated
        self.done.add((qual, pos.start.line, pos.start.column))
        value = cst.Name(self.param)
        args = list(updated.args)
        for i, a in enumerate(args):
            if a.keyword is not None and a.keyword.value == self.param:
                args[i] = a.with_changes(value=value)
                return updated.with_changes(args=args)
        new_arg = cst.Arg(keyword=cst.Name(self.param), value=value, equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
        # The call's own layout first; when that makes a line too long, the new argument
        # on a line of its own, then one argument per line.
        candidates = [_add_arg(updated, new_arg, layout, self.indent) for layout in _LAYOUTS]
        for call in candidates:
            if not self._too_long(call, pos):
                return call
        return candidates[0]

    def _too_long(self, call: cst.Call, pos: CodeRange) -> bool:
        """Would the rewritten call have a line longer than the file's limit?"""
        text = self.blank.code_for_node(call).split("\n")
        line = self.lines[pos.start.line - 1] if pos.start.line <= len(self.lines) else ""
        block = len(line) - len(line.lstrip())
        last = self.lines[pos.end.line - 1] if pos.end.line <= len(self.lines) else ""
        lengths = [pos.start.column + len(text[0])] + [block + len(t) for t in text[1:]]
        lengths[-1] += len(last) - pos.end.column  # what follows the call on its last line
        return max(lengths) > self.limit


_LAYOUTS = ("keep", "own-line", "one-per-line")


def _one_param_per_line(fn: cst.FunctionDef, unit: str) -> cst.FunctionDef:
    """``def f(\n    a,\n    b,\n):`` (black's layout for a signature too long for one line)."""
    p = fn.params
    inner, closing = _newline(unit), _newline("")
    ordered: list[tuple[str, int]] = [("posonly_params", i) for i in range(len(p.posonly_params))]
    ordered += [("params", i) for i in range(len(p.params))]
    has_star = isinstance(p.star_arg, cst.Param) or (bool(p.kwonly_params) and p.star_arg is not cst.MaybeSentinel.DEFAULT)
    if has_star:
        ordered.append(("star_arg", -1))
    ordered += [("kwonly_params", i) for i in range(len(p.kwonly_params))]
    if p.star_kwarg is not None:
        ordered.append(("star_kwarg", -1))
    if not ordered or p.posonly_ind is not cst.MaybeSentinel.DEFAULT:
        return fn  # a "/" separator: leave such signatures as they are
    groups = {k: list(getattr(p, k)) for k in ("posonly_params", "params", "kwonly_params")}
    singles: dict[str, object] = {"star_arg": p.star_arg, "star_kwarg": p.star_kwarg}
    for n, (kind, i) in enumerate(ordered):
        ws = closing if n == len(ordered) - 1 else inner
        item = groups[kind][i] if i >= 0 else singles[kind]
        if isinstance(item, cst.ParamStar):
            item = item.with_changes(comma=cst.Comma(whitespace_after=ws))
        elif isinstance(item, cst.Param):
            item = item.with_changes(comma=cst.Comma(whitespace_after=ws), whitespace_after_param=cst.SimpleWhitespace(""))
        if i >= 0:
            groups[kind][i] = item
        else:
            singles[kind] = item
    params = p.with_changes(**groups, **singles)
    return fn.with_changes(params=params, whitespace_before_params=inner)


def _is_parenthesized(ws: object) -> bool:
    return isinstance(ws, cst.ParenthesizedWhitespace)


def _newline(indent: str) -> cst.ParenthesizedWhitespace:
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True, last_line=cst.SimpleWhitespace(indent)
    )


def _add_arg(call: cst.Call, new_arg: cst.Arg, layout: str, unit: str) -> cst.Call:
    """``call`` with ``new_arg`` appended (before any ``**`` expansion).

    ``keep``: the call's own layout (one argument per line stays so; arguments on one
    line get the new one on that line); ``own-line``: the new argument starts a line;
    ``one-per-line``: every argument on its own line, black style."""
    args = list(call.args)
    space = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    if not args:
        return call.with_changes(args=[new_arg])
    hanging = _is_parenthesized(call.whitespace_before_args)
    per_line = hanging and all(_is_parenthesized(a.comma.whitespace_after) for a in args[:-1] if isinstance(a.comma, cst.Comma)) and (
        len(args) > 1 or isinstance(args[-1].comma, cst.Comma)
    ) and all(isinstance(a.comma, cst.Comma) for a in args[:-1])
    if layout == "one-per-line":
        inner = _newline(unit)
        closing = _newline("")
        args = [a.with_changes(comma=cst.Comma(whitespace_after=inner), whitespace_after_arg=cst.SimpleWhitespace("")) for a in args]
        star = [i for i, a in enumerate(args) if a.star == "**"]
        args.insert(star[0] if star else len(args), new_arg.with_changes(comma=cst.Comma(whitespace_after=inner)))
        args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=closing))
        return call.with_changes(whitespace_before_args=inner, args=args)
    if per_line or layout == "own-line":
        # the separator between arguments: an existing one, else the line break before the first
        seps = [a.comma.whitespace_after for a in args[:-1] if isinstance(a.comma, cst.Comma)]
        sep = seps[-1] if seps and _is_parenthesized(seps[-1]) else (
            call.whitespace_before_args if hanging else _newline(unit)
        )
        if not hanging:
            # f(a, b) -> f(\n    a, b, new\n): the arguments move to a line of their own
            kept = _add_arg(call, new_arg, "keep", unit)
            last = kept.args[-1]
            moved = [*kept.args[:-1], last.with_changes(whitespace_after_arg=_newline(""))]
            return kept.with_changes(whitespace_before_args=_newline(unit), args=moved)
        star = [i for i, a in enumerate(args) if a.star == "**"]
        if star:
            args.insert(star[0], new_arg.with_changes(comma=cst.Comma(whitespace_after=sep)))
            return call.with_changes(args=args)
        last = args[-1]
        if isinstance(last.comma, cst.Comma):
            new = new_arg.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
        else:
            new = new_arg.with_changes(whitespace_after_arg=last.whitespace_after_arg)
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=sep), whitespace_after_arg=cst.SimpleWhitespace(""))
        return call.with_changes(args=[*args, new])
    # keep: the new argument joins the last argument's line
    star = [i for i, a in enumerate(args) if a.star == "**"]
    if star:
        args.insert(star[0], new_arg.with_changes(comma=space))
        return call.with_changes(args=args)
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        new = new_arg.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
    else:
        new = new_arg.with_changes(whitespace_after_arg=last.whitespace_after_arg)
    args[-1] = last.with_changes(comma=space, whitespace_after_arg=cst.SimpleWhitespace(""))
    return call.with_changes(args=[*args, new])


def line_limit(root: Path) -> int:
    """The project's line length (``[tool.ruff]``/``[tool.black]`` in pyproject.toml), else 88."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return DEFAULT_LINE_LENGTH
    tool = data.get("tool", {})
    for name in ("ruff", "black"):
        value = tool.get(name, {}).get("line-length") if isinstance(tool.get(name), dict) else None
        if isinstance(value, int) and value > 0:
            return value
    return DEFAULT_LINE_LENGTH


DEFAULT_LINE_LENGTH = 88


def thread_step(source: str, param: str, targets: dict[str, list[tuple[int, int]]], limit: int = 88) -> str:
    """``source`` with ``param`` threaded through the calls at ``targets`` (qualname ->
    call positions), keeping lines within ``limit`` when it can. Raises libcst's errors
    when the source cannot be rewritten."""
    module = cst.parse_module(source)
    return MetadataWrapper(module).visit(_ThreadStep(param, targets, source, limit, module.default_indent)).code
