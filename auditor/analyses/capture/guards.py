"""The branch conditions around a call that are configuration switches, each with what it
reads (one level deep)."""

from __future__ import annotations

import re

from ...facts.extract import BranchFact, CallFact, ExprFact, FunctionFact
from ...index.index import ClassKey, FuncKey, SymbolKind
from .model import negate
from .part import CapturePart

# Conditions that test for presence, not for a configuration: left out of guard texts.
_STRUCTURAL = re.compile(r"\bis (?:not )?None\b|^(?:hasattr|isinstance|callable)\(|^not (?:hasattr|isinstance)\(")


class GuardTexts(CapturePart):
    def guards(self, fkey: FuncKey, fn: FunctionFact, ctx: ClassKey | None, call: CallFact) -> tuple[str, ...]:
        """The branch conditions around a call that are switches (presence tests left out),
        each with what it reads when that is a predicate or a flag defined in the tree."""
        out: list[str] = []
        for bid in call.branches:
            if bid >= len(fn.branches):
                continue
            out.extend(self._branch_text(fkey, fn, ctx, fn.branches[bid]))
        return tuple(dict.fromkeys(out))

    def _branch_text(self, fkey: FuncKey, fn: FunctionFact, ctx: ClassKey | None, br: BranchFact) -> list[str]:
        tests = [t for t in br.tests if not _STRUCTURAL.search(t.text)]
        if not tests:
            return []
        texts = [self._explain(fkey, fn, ctx, t) for t in tests]
        if br.negated:
            if len(tests) == 1 and texts[0] == tests[0].text:
                return [negate(texts[0])]
            joined = " and ".join(texts)
            return [f"not ({joined})"]
        return texts

    def _explain(self, fkey: FuncKey, fn: FunctionFact, ctx: ClassKey | None, test: ExprFact) -> str:
        """``pred()`` -> ``pred() [= <its return expression>]``; ``self.a.flag`` -> ``self.a.flag
        [= <what it is assigned>]``: the switch behind a condition, one level deep."""
        meaning: str | None = None
        called = test.called
        if called and not test.text.startswith("not "):
            targets: list[FuncKey] = []
            if called[0] == "self" and ctx is not None:
                targets = [t.func for t in self.calls.resolve_call(fkey, fn, ctx, called)]
            elif called[0] not in fn.assigns and called[0] not in fn.param_names:
                targets = [(s.path, s.name) for s in self.index.resolve_chain(fkey[0], called) if s.kind is SymbolKind.FUNCTION]
            for t in targets:
                tf = self.index.function(t)
                if tf is not None and len(tf.returns) == 1:
                    meaning = tf.returns[0].text
                    break
        elif test.chain and test.chain[0] == "self" and len(test.chain) >= 2 and ctx is not None:
            objs = [o for o, _ in self.calls.objects_of_chain(ctx, test.chain[1:-1], None)] if len(test.chain) > 2 else [ctx]
            for o in objs:
                for c in self.index.mro(o):
                    for m in self.index.methods(c).values():
                        for s in m.attr_assigns:
                            if s.target == ("self", test.chain[-1]):
                                meaning = s.value.text
                                break
                        if meaning:
                            break
                    if meaning:
                        break
                if meaning:
                    break
        return f"{test.text} [= {meaning}]" if meaning and meaning != test.text else test.text
