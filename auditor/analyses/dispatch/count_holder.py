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

from collections.abc import Iterator

from ...facts.extract import FunctionFact
from ...facts.statements import PAttr, PCall, PConst, PExpr, PName
from ...index.bodies import FunctionBodies
from ...index.index import ClassKey
from ..partial_eval import Evaluator, Obj, Path, Unknown, Value
from .constructors import LOCAL_DEPTH, constructor_env, constructor_path
from .outcomes import Rejection
from .part import DispatchPart
from .syntax import BodiesWorld, expr_nodes


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
    _bodies: FunctionBodies | None = None  # the helpers' trees, extracted when a count asks for them

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


    def sized(self, model: ClassKey, count_field: str, n: int, root: Obj | None = None,
              hf: Obj | None = None) -> tuple[int | None, str | None]:
        """The layer count ``model`` builds when ``count_field`` holds ``n``: ``n`` when every
        definition of a size attribute of its layer containers that reads the field is a plain
        read of it (``self.n = config.f``, ``getattr(config, "f", d)``, through locals), the
        value of ``min``/``max`` of such a read and int literals, or, given the build's
        configuration (``root``, ``hf``), the int the definition evaluates to there, its locals
        through their single definitions and a helper it calls run with its statements
        extracted on demand (``self.n = _select(config.f, spec.num_speculative_tokens)``);
        else None, with the definition (the count is not the field's value)."""
        out: int | None = n
        for owner, fn, a, v in self._size_definitions(model, count_field):
            if isinstance(v, PConst) or _plain_read(fn, v, count_field):
                continue
            bounded = _min_max(fn, v, count_field, n)
            if bounded is None and root is not None and count_field in _names_read(fn, v):
                got, p = self._evaluated(owner, fn, a, v, root, hf)
                bounded = got if type(got) is int and not p.raised else None
            if bounded is not None:
                out = bounded
            elif count_field in _names_read(fn, v):
                return None, f"self.{a} in {owner[1]}.__init__"
        return out, None

    def build_raise(self, model: ClassKey, count_field: str, root: Obj, hf: Obj | None) -> Rejection | None:
        """The raise of a size attribute's definition that reads ``count_field`` (an
        unconditional statement of the constructor of a part of ``model`` that builds a layer
        container), evaluated over the build's configuration as :meth:`sized` evaluates it:
        a plain read of a field the draft config surely lacks (``Obj.missing``: AttributeError,
        vLLM 0.31.0's ``self.num_mtp_layers = config.num_nextn_predict_layers`` on an HYV3Config
        without it) rejects the configuration while the draft model is built."""
        for owner, fn, a, v in self._size_definitions(model, count_field):
            if count_field not in _names_read(fn, v):
                continue
            got, p = self._evaluated(owner, fn, a, v, root, hf)
            raised = got.raises if isinstance(got, Unknown) and got.raises else p.raised
            if raised:
                return Rejection(owner[0], _line(fn, a), f"{owner[1]}.__init__", raised, "build")
        return None

    def _size_definitions(self, model: ClassKey, count_field: str) -> Iterator[tuple[ClassKey, FunctionFact, str, PExpr]]:
        """Each size attribute of a layer container of ``model``'s parts built from
        ``count_field``, with its single unconditional definition in the container owner's
        constructor (owner, constructor, attribute, definition)."""
        for part in sorted(self.registry.model_parts(model)):
            for c in self.types.containers(part):
                if count_field not in c.config_fields:
                    continue
                found = self.index.method(c.owner, "__init__")
                if found is None:
                    continue
                owner, fn = found
                for a in c.size_attrs:
                    v = fn.attr_defs.get(a)
                    if v is not None:
                        yield owner, fn, a, v

    def _evaluated(self, owner: ClassKey, fn: FunctionFact, attr: str, v: PExpr, root: Obj,
                   hf: Obj | None) -> tuple[Value, Path]:
        """``self.<attr> = v`` in ``owner``'s constructor, evaluated over the build's
        configuration, with the path it is evaluated on."""
        key = (owner[0], f"{owner[1]}.__init__")
        if self._bodies is None or self._bodies.index is not self.index:
            self._bodies = FunctionBodies(self.index)
        ev = Evaluator(BodiesWorld(self._bodies, self.config.pure_methods, self.config.sub_config_getters), self.limits.hit)
        p = constructor_path(ev, key, fn, constructor_env(fn, self.roles, root, hf), v, _line(fn, attr))
        return ev.eval(v, p, key), p


def _line(fn: FunctionFact, attr: str) -> int:
    """The line of ``self.<attr> = ...`` in ``fn``."""
    return next((a.line for a in fn.attr_assigns if a.target == ("self", attr)), fn.line)


def _plain_read(fn: FunctionFact, e: PExpr, field: str, depth: int = 0) -> bool:
    """``e`` is the field's value: ``<x>.field`` (of whatever config ``x`` is), ``getattr(x,
    "field", d)``, or a local defined as one."""
    if isinstance(e, PName) and e.id in fn.local_defs and depth < LOCAL_DEPTH:
        return _plain_read(fn, fn.local_defs[e.id], field, depth + 1)
    return (isinstance(e, PAttr) and e.attr == field) or _getattr_of(e, field)


def _min_max(fn: FunctionFact, e: PExpr, field: str, n: int) -> int | None:
    """``min``/``max`` of plain reads of the field and int literals, evaluated at ``n``."""
    if not (isinstance(e, PCall) and isinstance(e.func, PName) and e.func.id in ("min", "max") and len(e.args) >= 2
            and not e.keywords):
        return None
    values: list[int] = []
    for a in e.args:
        if _plain_read(fn, a, field):
            values.append(n)
        elif isinstance(a, PConst) and type(a.value) is int:
            values.append(a.value)
        else:
            return None
    return min(values) if e.func.id == "min" else max(values)


def _names_read(fn: FunctionFact, e: PExpr, depth: int = 0) -> set[str]:
    """The attribute and local names ``e`` reads, locals followed to their definitions."""
    out: set[str] = set()
    for node in expr_nodes(e):
        if isinstance(node, PAttr):
            out.add(node.attr)
        elif isinstance(node, PName):
            out.add(node.id)
            if node.id in fn.local_defs and depth < LOCAL_DEPTH:
                out |= _names_read(fn, fn.local_defs[node.id], depth + 1)
        elif isinstance(node, PConst) and isinstance(node.value, str):
            out.add(node.value)  # getattr(x, "f")
    return out


def _getattr_of(e: PExpr | None, name: str) -> bool:
    """``getattr(x, "name", ...)``."""
    return (isinstance(e, PCall) and isinstance(e.func, PName) and e.func.id == "getattr" and len(e.args) >= 2
            and isinstance(e.args[1], PConst) and e.args[1].value == name)
