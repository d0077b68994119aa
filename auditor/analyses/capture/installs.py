"""Installations: where a graph wrapper is built around a callable and stored, with the key
function actually passed; installer methods are resolved per caller."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ...facts.extract import CallFact, Chain, ExprFact, FunctionFact
from ...index.index import ClassKey, FuncKey, SymbolKind
from ..calls import Target
from .model import GraphWrapper, Installation, KeyKind
from .part import CapturePart

if TYPE_CHECKING:
    from .provider import CaptureProvider

MAX_INSTALLER_DEPTH = 2


class Installer(CapturePart):
    def __init__(self, provider: CaptureProvider) -> None:
        super().__init__(provider)
        self._installations: list[Installation] | None = None

    def _constructions(self) -> list[Installation]:
        """Every construction of a wrapper, as written (before resolving installers)."""
        wrappers = self.provider.graph_finder.wrappers()
        out: list[Installation] = []
        if not wrappers:
            return out
        names = {c[1].rpartition(".")[2] for c in wrappers}
        for fkey, fn, ctx in self.provider.graph_finder.functions():
            for ci, call in enumerate(fn.calls):
                if not call.func or call.func[-1] not in names:
                    continue
                for sym in self.index.resolve_chain(fkey[0], call.func):
                    w = wrappers.get((sym.path, sym.name)) if sym.kind is SymbolKind.CLASS else None
                    if w is not None:
                        out.append(self._construction(fkey, fn, ctx, call, w))
        return out

    def _construction(self, fkey: FuncKey, fn: FunctionFact, ctx: ClassKey | None, call: CallFact, w: GraphWrapper) -> Installation:
        init = self.index.method(w.cls, "__init__")
        params: dict[str, ExprFact] = {}
        first: str | None = None
        if init is not None:
            tgt = Target((init[0][0], f"{init[0][1]}.__init__"), w.cls, True)
            b = self.calls.bind(call, fn, tgt)
            params = {k: v.expr for k, v in b.params.items()}
            positional = [p.name for p in init[1].params[1:]]
            first = positional[0] if positional else None
        wrapped = params[first].text if first in params else (call.args[0].text if call.args else "?")
        key_fn = params.get(w.key_fn_param) if w.key_fn_param else None
        slot: tuple[str, ...] = ()
        for s in fn.attr_assigns:
            if s.line == call.line and s.value.called == call.func:
                slot = self.self_path(fn, s.target) or ()
                break
        key_text = None if key_fn is None or key_fn.text == "None" else key_fn.text
        return Installation(
            wrapper=w, site=fkey, line=call.line, col=call.col, root=ctx, slot=slot, wrapped=wrapped,
            key_fn=key_text, key_includes=self._key_includes(w, fkey, key_fn), guards=self.provider.guard_texts.guards(fkey, fn, ctx, call),
            via=(self.hop(fkey, call.line, f"builds {w.name}({wrapped}, …)"),),
        )

    def self_path(self, fn: FunctionFact, chain: Chain) -> tuple[str, ...] | None:
        """``self.a.b`` -> (a, b); a local bound to ``self.x`` or ``getattr(self, "x", d)``
        counts as ``self.x``."""
        if chain[0] == "self":
            return tuple(chain[1:])
        for v in fn.assigns.get(chain[0], ()):
            if v.chain and v.chain[0] == "self":
                return tuple(v.chain[1:]) + tuple(chain[1:])
            m = re.match(r"getattr\(\s*self\s*,\s*[\"'](\w+)[\"']", v.text)
            if m:
                return (m.group(1),) + tuple(chain[1:])
        return None

    def _key_includes(self, w: GraphWrapper, fkey: FuncKey, key_fn: ExprFact | None) -> tuple[str, ...]:
        if w.key_kind is not KeyKind.KEY_FN or key_fn is None or key_fn.text == "None":
            return w.key_params
        found = list(w.key_params) + [p for p in self.params if re.search(rf"\b{re.escape(p)}\b", key_fn.text)]
        if not found and key_fn.chain:
            fn = self.index.function(fkey)
            syms = self.index.resolve_chain(fkey[0], key_fn.chain) if fn is not None else []
            for sym in syms:
                target = self.index.function((sym.path, sym.name)) if sym.kind is SymbolKind.FUNCTION else None
                if target is None:
                    continue
                texts = [e.text for es in target.assigns.values() for e in es] + [e.text for e in target.returns]
                found += [p for p in self.params if p in target.param_names or any(p in t for t in texts)]
        return tuple(dict.fromkeys(found))

    def installations(self) -> list[Installation]:
        """Every installation, with installer methods resolved per caller: a construction
        whose wrapped callable or key function is a parameter of the function that builds
        it is installed once per call of that function, with the caller's arguments."""
        if self._installations is None:
            out: list[Installation] = []
            for inst in self._constructions():
                out.extend(self._per_caller(inst, 0))
            self._installations = sorted(set(out), key=lambda i: (i.site, i.line, i.slot, i.via))
        return self._installations

    def _passthrough(self, inst: Installation) -> list[str]:
        """Parameters of an installer method that the construction passes on as the wrapped
        callable or the key function (a constructor wrapping its own argument is not an
        installer: its callers build the outer object)."""
        fn = self.index.function(inst.site)
        name = inst.site[1].rpartition(".")[2]
        if fn is None or inst.root is None or (name.startswith("__") and name.endswith("__")):
            return []
        own = set(fn.param_names[1:])
        return [n for n in (inst.wrapped, inst.key_fn) if n is not None and n in own]

    def _per_caller(self, inst: Installation, depth: int) -> list[Installation]:
        fn = self.index.function(inst.site)
        if fn is None:
            return [inst]
        own = set(fn.param_names[1:])
        passthrough = self._passthrough(inst)
        if not passthrough or depth >= MAX_INSTALLER_DEPTH:
            if passthrough:
                self.limits.hit("installer depth")
            return [inst]
        name = inst.site[1].rpartition(".")[2]
        out: list[Installation] = []
        for ckey, cfn, cctx in self.provider.graph_finder.functions():
            for ci, call in enumerate(cfn.calls):
                if not call.func or call.func[-1] != name:
                    continue
                for tgt in self.calls.targets(ckey, cfn, cctx, ci):
                    if tgt.func != inst.site:
                        continue
                    b = self.calls.bind(call, cfn, tgt)
                    wrapped = b.params[inst.wrapped].expr.text if inst.wrapped in b.params else inst.wrapped
                    key_src = b.params[inst.key_fn].expr if inst.key_fn is not None and inst.key_fn in b.params else None
                    if inst.key_fn is not None and inst.key_fn in own and key_src is None:
                        key_text = None  # the caller does not pass one: the installer's default
                    else:
                        key_text = key_src.text if key_src is not None else inst.key_fn
                    receiver = self.self_path(cfn, call.func[:-1]) if len(call.func) > 1 else None
                    if receiver is None:
                        continue
                    includes = self._key_includes(inst.wrapper, ckey, key_src) if key_src is not None else ()
                    caller = Installation(
                        wrapper=inst.wrapper, site=ckey, line=call.line, col=call.col, root=cctx,
                        slot=receiver + inst.slot, wrapped=wrapped, key_fn=key_text,
                        key_includes=includes if key_src is not None else (
                            inst.wrapper.key_params if key_text is None else inst.key_includes),
                        guards=self.provider.guard_texts.guards(ckey, cfn, cctx, call) + inst.guards,
                        via=(self.hop(ckey, call.line, f"calls {inst.site[1]}({wrapped}, …)"),) + inst.via,
                    )
                    out.extend(self._per_caller(caller, depth + 1))
        return out or [inst]
