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

The conclusion depends on the checkpoint's names, so the rejection carries that condition; a
mapper that is not a literal (a comprehension, a class attribute, a positional argument, a
regex or renaming field), a target that does not address a container, or a tree without the
checks claims nothing.
"""

from __future__ import annotations

import ast
import re

from ...facts.extract import PCall, PConst, PDict, PExpr, POpaque, PSeq
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
        if mapper is None:
            return []
        entries = _literal_fields(mapper, self.config.weight_mapper_fields)
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
            cond = (f"when the checkpoint names its MTP layers as the mapper's source prefixes "
                    f"({stem}{{i}}., i < {n}): the mapper renames only {stem}"
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


def _target_start(v: PExpr) -> str | None:
    """A target as written up to its first substitution (None: dropped, or not a string)."""
    if isinstance(v, PSeq) and v.elts:  # a stacked field's (name, shard)
        v = v.elts[0]
    if isinstance(v, PConst):
        return v.value if isinstance(v.value, str) else None
    if isinstance(v, POpaque):
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
