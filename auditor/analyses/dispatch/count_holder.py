"""Where a draft model reads its layer count (issue 18): on the draft's hf config itself, or
on a config nested in it.

A multimodal checkpoint keeps the text model's fields one level down (``hf_config.
text_config``); a draft model built from it reads its layer count there
(``config = vllm_config.model_config.hf_config.text_config`` then ``self.num_mtp_layers =
config.num_nextn_predict_layers``), while dispatch may read the same field name at the top
level. ``layers --all`` gives each model its layer count where the model's constructor reads
it, so that a gate reading another level sees what it would see on such a checkpoint.

The read is the definition of the size attribute of the model's layer container in the
container owner's ``__init__`` (``FunctionFact.attr_defs``), its chain of attributes
followed through the constructor's single-definition locals (``local_defs``) and
``getattr(x, "f", default)``. The chain names the hf config by its role (``hf_config``); the
attributes between that and the field are the nested holder. Anything else keeps the top
level: a read the chain does not resolve, and a read through a text-config getter
(``get_text_config()``, vLLM's ``model_config.hf_text_config``), which returns the config
itself when it holds no sub-config, so a flat config is one it reads (a checkpoint that nests
its text config is planned with ``--set text_config.<field>=N``).
"""

from __future__ import annotations

from ...facts.extract import FunctionFact
from ...facts.statements import PAttr, PCall, PConst, PExpr, PName
from ...index.index import ClassKey
from .constructors import LOCAL_DEPTH
from .part import DispatchPart


def read_chain(fn: FunctionFact, e: PExpr, depth: int = 0) -> tuple[str, ...] | None:
    """The attribute chain ``e`` reads (``a.b.c`` -> ``("a", "b", "c")``), locals replaced by
    their single definition; None when it is not a plain chain."""
    if isinstance(e, PAttr):
        base = read_chain(fn, e.value, depth)
        return base + (e.attr,) if base is not None else None
    if isinstance(e, PName):
        if e.id in fn.local_defs and depth < LOCAL_DEPTH:
            return read_chain(fn, fn.local_defs[e.id], depth + 1)
        return (e.id,)
    if isinstance(e, PCall) and isinstance(e.func, PName) and e.func.id == "getattr" and len(e.args) >= 2:
        name = e.args[1]
        base = read_chain(fn, e.args[0], depth)
        if base is not None and isinstance(name, PConst) and isinstance(name.value, str):
            return base + (name.value,)
    return None


class CountHolder(DispatchPart):
    def count_field(self, model: ClassKey, fields: list[str]) -> str | None:
        """Of the config fields that size ``model``'s layer containers, the one a size
        attribute's definition reads (``self.num_mtp_layers = text_config.num_hidden_layers``:
        the count, not a field the elements are built with, such as ``cache_config``), dotted
        under the nested config it is read from; else the first field, at the top level."""
        for f in fields:
            found = self._read(model, f)
            if found is not None:
                return ".".join((*found, f))
        return fields[0] if fields else None

    def _read(self, model: ClassKey, count_field: str) -> tuple[str, ...] | None:
        """The fields of the draft hf config under which ``model``'s constructor reads
        ``count_field`` into a size attribute (``()``: the top level, or a holder the chain
        does not resolve); None: no size attribute reads it."""
        hf = self.roles["hf"]
        parts = self.registry.model_parts(model)
        # A base of another part runs as that part (its own constructor need not run).
        bases = {b for p in parts for b in self.index.mro(p)[1:]}
        for part in sorted(parts - bases):
            found = self.index.method(part, "__init__")  # the constructor that runs (an override need not call its base's)
            if found is None:
                continue
            owner, fn = found
            for c in self.types.containers(part):
                if count_field not in c.config_fields or c.owner != owner:
                    continue
                for a in c.size_attrs:
                    v = fn.attr_defs.get(a)
                    if not (isinstance(v, PAttr) and v.attr == count_field or _getattr_of(v, count_field)):
                        continue
                    chain = read_chain(fn, v) if v is not None else None
                    if chain is not None:
                        for i in range(len(chain) - 2, -1, -1):
                            if chain[i] == hf:
                                return chain[i + 1:-1]
                    return ()
        return None


def _getattr_of(e: PExpr | None, name: str) -> bool:
    """``getattr(x, "name", ...)``."""
    return (isinstance(e, PCall) and isinstance(e.func, PName) and e.func.id == "getattr" and len(e.args) >= 2
            and isinstance(e.args[1], PConst) and e.args[1].value == name)
