"""Layers no checkpoint name reaches (issue 18, agreement matrix: ERNIE with N >= 2 MTP layers
is rejected at load by vLLM 0.32.0's strict check, ``default_loader.py:564``).

A draft model class's checkpoint-name mapper (``weight-mapper-attrs``: vLLM's
``hf_to_vllm_mapper``, set once in a constructor that runs and handed on by the class's
``load_weights``) is a call whose keyword arguments are literal dicts (``weight-mapper-fields``:
how each of vLLM's ``WeightsMapper`` fields matches a name). An entry of a renaming field whose
source is a per-layer prefix ``<stem><i>.`` with a literal index ``i`` and whose target starts
(as written, an f-string up to its first ``{``) with the path of a layer container of the model
(``<holder>.<container>.``) renames the checkpoint's MTP layer ``i`` into that container. When
the configuration's layer count N exceeds the indices below N that the entries of one stem
cover, the container's other entries take no weight under that stem: a checkpoint that names
its MTP layers ``<stem><j>.`` (``j < N``) keeps the other names as they are (no entry of any
field matches ``<stem><j>.``, checked literally), and they name no entry of the container (the
stem is not its path). vLLM then rejects the model while loading it: its strict check of the
parameters not initialised from the checkpoint (``weight-load-checks``, read from the tree with
its message and file:line) or the model loader's raise for a name no module has.

A model without such a mapper whose ``load_weights`` runs a hand-written method on each name
(``name = self._rewrite_spec_layer_name(self.config, name)``, vLLM 0.23/0.24 ERNIE) is read the
same way when that method only rewrites with ``str.replace`` (:func:`_replace_entries`: each
source a literal or an f-string over a loop's literal list, every return the name): each
replace is a substring entry. (Such a loader may raise first for the name it leaves as it is,
``params_dict[name]``; the checks named are where vLLM's own checks reject it.)

The conclusion depends on the checkpoint's names, so the rejection carries that condition; a
mapper that is not a literal (a comprehension, a class attribute, a positional argument, a
regex or renaming field), a target that does not address a container, or a tree without the
checks claims nothing.
"""

from __future__ import annotations

import ast
import re

from ...facts.extract import ExprFact, FunctionFact, PCall, PConst, PDict, PExpr, PFormat, POpaque, PSeq, parse_pexpr
from ...index.index import ClassKey
from ..types import REGISTRY
from .outcomes import Rejection
from .part import DispatchPart

_LAYER_PREFIX = re.compile(r"^(?P<stem>.*\.)(?P<index>\d+)\.$")


class WeightNames(DispatchPart):
    def rejections(self, model: ClassKey, n: int | None) -> list[Rejection]:
        """The load-time rejections when ``model`` with ``n`` MTP layers leaves layers without
        weights (empty when it does not, or cannot be told)."""
        if n is None or n < 2:
            return []
        mapper = self._mapper(model)
        renamer = self._renamer(model) if mapper is None else None
        if mapper is not None:
            entries, by, whose = _literal_fields(mapper, self.config.weight_mapper_fields), "the mapper", "the mapper's"
        elif renamer is not None:
            entries, by, whose = (_replace_entries(renamer[1], renamer[2]),
                                  f"{renamer[0]} (hand-written, run by load_weights)", "its")
        else:
            return []
        if entries is None:
            return []
        paths = self._container_paths(model)
        stems: dict[str, set[int]] = {}
        for kind, src, target in entries:
            m = _LAYER_PREFIX.match(src) if kind in ("substr", "prefix") else None
            if m is None or target is None:
                continue
            into = [p for p in paths if target.startswith(p + ".")]
            if into:
                stems.setdefault(m.group("stem"), set()).add(int(m.group("index")))
        for stem, covered in sorted(stems.items()):
            missing = [j for j in range(n) if j not in covered]
            if not missing or stem.rstrip(".") in paths:
                continue
            if not all(_survives(f"{stem}{j}.", entries) for j in missing):
                continue
            cond = (f"when the checkpoint names its MTP layers as {whose} source prefixes "
                    f"({stem}{{i}}., i < {n}): {by} renames only {stem}"
                    f"{'/'.join(str(i) for i in sorted(covered))}., so {len(missing)} of the {n} layer(s) "
                    f"take no weights under {stem}{{i}}. (and the model is unquantized: vLLM's strict check "
                    f"runs by default only then)")
            checks = self._checks(cond)
            if checks:
                return checks
        return []

    def _mapper(self, model: ClassKey) -> PCall | None:
        """The mapper ``model``'s constructors set once and its ``load_weights`` hands on."""
        for attr in self.config.weight_mapper_attrs:
            found = self.index.method(model, "load_weights")
            if found is None or not any(
                    any(kw.value.chain == ("self", attr) for kw in c.keywords)
                    or any(a.chain == ("self", attr) for a in c.args) for c in found[1].calls):
                continue
            for _, fn in self.provider.load_checks.constructors(model):
                v = fn.attr_defs.get(attr)
                if v is not None:
                    return v if isinstance(v, PCall) else None
        return None

    def _renamer(self, model: ClassKey) -> tuple[str, FunctionFact, str] | None:
        """A hand-written method of the model that ``load_weights`` runs on each checkpoint
        name (``name = self._rewrite(self.config, name)`` with ``name`` a target of one of its
        loops): its qualified name, facts and the parameter taking the name."""
        found = self.index.method(model, "load_weights")
        if found is None:
            return None
        lw = found[1]
        loop_names = {t for lp in lw.loops for t in lp.targets}
        for c in lw.calls:
            if not (c.func and len(c.func) == 2 and c.func[0] == "self") or c.keywords or c.star_args:
                continue
            at = [i for i, a in enumerate(c.args) if a.chain is not None and len(a.chain) == 1 and a.chain[0] in loop_names]
            if len(at) != 1:
                continue
            name = c.args[at[0]].chain[0]  # type: ignore[index]
            if not any(e.called == c.func for e in lw.assigns.get(name, ())):
                continue
            renamer = self.index.method(model, c.func[1])
            params = [q.name for q in renamer[1].params if q.name != "self"] if renamer is not None else []
            if renamer is not None and at[0] < len(params):
                return renamer[1].qualname, renamer[1], params[at[0]]
        return None

    def _container_paths(self, model: ClassKey) -> set[str]:
        """The module paths of the layer containers the model builds (``layers`` on the
        model itself, ``model.layers`` on a part it holds in ``self.model``)."""
        holders: dict[ClassKey, list[str]] = {model: [""]}
        for a in self.types.self_attributes(model):
            for t in self.types.attr_types(model, a):
                if t != REGISTRY:
                    holders.setdefault(t, []).append(a + ".")
        out: set[str] = set()
        for part, prefixes in holders.items():
            for c in self.types.containers(part):
                out.update(p + c.attr for p in prefixes)
        return out

    def _checks(self, condition: str) -> list[Rejection]:
        located = self.provider.location.weight_load_checks()
        out: list[Rejection] = []
        for key in located:
            fn = self.index.function(key)
            for r in fn.raises if fn is not None else ():
                out.append(Rejection(key[0], r.line, key[1], r.exc, "weights", condition))
        return out


Entry = tuple[str, str, "str | None"]  # (how the field matches, source, literal start of the target)


def _literal_fields(call: PCall, fields: dict[str, str]) -> list[Entry] | None:
    """Every entry of the mapper call's fields, or None when one is not a literal dict of
    string keys (or a field is one vLLM matches by regex or a renaming object)."""
    if call.args:
        return None
    out: list[Entry] = []
    for kw in call.keywords:
        kind = fields.get(kw.name or "")
        if kind is None or kind not in ("substr", "prefix", "suffix") or not isinstance(kw.value, PDict):
            return None
        for k, v in zip(kw.value.keys, kw.value.values):
            if not isinstance(k, PConst) or not isinstance(k.value, str):
                return None
            out.append((kind, k.value, _target_start(v)))
    return out


_MAX_SOURCES = 64


def _replace_entries(fn: FunctionFact, name: str) -> list[Entry] | None:
    """A renaming function of ``name`` that only rewrites it with ``str.replace`` (every
    assignment to ``name`` is ``name.replace(a, b)``, no loop binds it, every return is
    ``name``) as ``("substr", a, start of b)`` entries: ``a`` a string literal, or an f-string
    whose substitutions are targets of the function's loops over a literal list of strings
    (one entry per element); None when a source is anything else."""
    if not fn.returns or any(e.chain != (name,) for e in fn.returns) or any(name in lp.targets for lp in fn.loops):
        return None
    if any(e.called != (name, "replace") for e in fn.assigns.get(name, ())):
        return None
    out: list[Entry] = []
    for c in fn.calls:
        if c.func != (name, "replace"):
            continue
        if len(c.args) != 2 or c.keywords or c.star_args or c.star_kwargs:
            return None
        sources = _sources(fn, c.args[0])
        if sources is None:
            return None
        target = c.args[1]
        start = target.literal if target.has_literal and isinstance(target.literal, str) else _target_start(POpaque(target.text))
        out.extend(("substr", src, start) for src in sources)
    return out


def _sources(fn: FunctionFact, e: ExprFact) -> list[str] | None:
    """Every string ``e`` can be: a literal, or an f-string over loop targets each ranging
    over a literal list of strings the function binds once (None: anything else)."""
    if e.has_literal:
        return [e.literal] if isinstance(e.literal, str) else None
    try:
        node = ast.parse(e.text.strip(), mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(node, ast.JoinedStr):
        return None
    out = [""]
    for part in node.values:
        if isinstance(part, ast.Constant) and isinstance(part.value, str):
            out = [o + part.value for o in out]
            continue
        if not (isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name)
                and part.conversion == -1 and part.format_spec is None):
            return None
        values = _loop_strings(fn, part.value.id)
        if values is None or len(out) * len(values) > _MAX_SOURCES:
            return None
        out = [o + v for o in out for v in values]
    return out


def _loop_strings(fn: FunctionFact, target: str) -> list[str] | None:
    """The strings a ``for target in xs`` loop of ``fn`` takes: ``xs`` a literal list or tuple
    of strings, written in the loop or bound once to a local."""
    loops = [lp for lp in fn.loops if lp.targets == (target,)]
    if len(loops) != 1:
        return None
    it = loops[0].iter
    seq: PExpr | None = fn.local_defs.get(it.chain[0]) if it.chain is not None and len(it.chain) == 1 else parse_pexpr(it.text)
    if not isinstance(seq, PSeq) or seq.kind not in ("list", "tuple"):
        return None
    values = [x.value for x in seq.elts if isinstance(x, PConst) and isinstance(x.value, str)]
    return values if len(values) == len(seq.elts) else None


def _target_start(v: PExpr) -> str | None:
    """A target as written up to its first substitution (None: dropped, or not a string)."""
    if isinstance(v, PSeq) and v.elts:  # a stacked field's (name, shard)
        v = v.elts[0]
    if isinstance(v, PConst):
        return v.value if isinstance(v.value, str) else None
    if isinstance(v, (POpaque, PFormat)):  # an f-string as written
        try:
            node = ast.parse(v.text.strip(), mode="eval").body
        except SyntaxError:
            return None
        if isinstance(node, ast.JoinedStr):
            head = ""
            for part in node.values:
                if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                    break
                head += part.value
            return head
    return None


def _survives(stem: str, entries: list[Entry]) -> bool:
    """No entry rewrites a name that starts with ``stem`` within the stem: a substring source
    neither in it nor overlapping its end (but at its final dot when its target keeps a leading
    dot), a prefix source neither starting it nor started by it, a suffix source not in it."""
    for kind, src, target in entries:
        if kind == "prefix":
            if stem.startswith(src) or src.startswith(stem):
                return False
        elif kind == "suffix":
            if stem in src or src in stem:
                return False
        else:
            if src in stem:
                return False
            for m in range(1, len(src)):
                if stem.endswith(src[:m]) and not (src[:m] == "." and (target or "").startswith(".")):
                    return False
    return True
