"""Statement trees extracted on demand (issue 18): the facts keep the tree of a function only
when the dispatch analysis evaluates functions of its shape (:func:`auditor.facts.statements.
_keeps_body`); a question about a few calls of another (a small helper a draft model's
constructor sizes its layers with) has its tree extracted from the file when asked. The file is
parsed, never run; the trees are kept per function."""

from __future__ import annotations

import msgspec

from ..facts.extract import FunctionFact
from ..facts.statements import Stmt, function_statements
from ..source.trees import FileTooLarge
from .index import FuncKey, Index


class FunctionBodies:
    def __init__(self, index: Index) -> None:
        self.index = index
        self._trees: dict[FuncKey, tuple[Stmt, ...] | None] = {}

    def function(self, key: FuncKey) -> FunctionFact | None:
        """:meth:`Index.function`, with its statement tree when the facts keep none."""
        fn = self.index.function(key)
        if fn is None or fn.body:
            return fn
        if key not in self._trees:
            try:
                data: bytes | None = self.index.tree.read(key[0])
            except (FileTooLarge, OSError):
                data = None
            text = data.decode("utf-8", "surrogateescape") if data is not None else None
            self._trees[key] = function_statements(text, key[1]) if text is not None else None
        body = self._trees[key]
        return msgspec.structs.replace(fn, body=body) if body else fn
