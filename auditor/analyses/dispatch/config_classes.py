"""The config class vLLM loads a checkpoint's ``config.json`` into (issue 18: a config.json read
as exactly its fields misses what the class supplies; vLLM 0.28.0 loads a ``kimi_k3``
checkpoint into ``KimiK3Config``, which wraps its ``text_config`` as a ``KimiLinearConfig``
whose ``num_nextn_predict_layers`` defaults to 0).

The class is the one vLLM's config registry names for the config's ``model_type``
(``config-registries``: ``"<file>:<table>"``, a module-level table of strings, and the package
its class names resolve in: by the package's imports, or a table of the package mapping the
name to the module defining it, as a lazy ``__getattr__`` reads it). What the class gives a
config is read from its ``__init__`` (the one its MRO resolves), never run:

* a parameter with a literal default that the constructor stores unchanged, once and
  unconditionally (``self.p = p``, :attr:`FunctionFact.attr_defs`), is that default when the
  config.json lacks the field;
* a parameter the constructor turns into another class of the tree, ``self.p = C(**p)`` (in
  any arm), is a sub-config: a nested object of the config.json gets ``C``'s defaults the same
  way; ``self.p = C()`` builds one with only its defaults when the config.json lacks it.

Anything else the class does (a field computed from others, a base outside the tree such as
transformers' ``PretrainedConfig``) is not read: the config keeps what the file says.

What an object of the class may hold beyond the file's fields is known when every base of its
MRO outside the tree is a config base (``config-bases``: transformers' ``PretrainedConfig``,
whose instances hold ``config-base-attributes`` besides the file's fields) or one of
``head-free-bases``: the names its classes bind in their bodies (class attributes, annotated
fields, methods, properties), assign on ``self`` or map (``attribute_map``). A plain read of a
name none of these holds raises AttributeError, as CPython does (vLLM 0.31.0's HYV3Config
without ``num_nextn_predict_layers``: the MTP predictor's constructor reads it plainly);
``getattr``'s default and ``hasattr`` already treated it as absent. A class that may set a
name not written as a literal (``setattr(self, name, ...)``, ``self.__dict__``) may hold
anything: its reads stay unknown. A class
that hooks attribute reads (``__getattribute__``/``__getattr__``: Glm5NextConfig answers a read
from its ``text_config``) may answer a field the file lacks at the top level with anything:
those reads are unknown, the class's own defaults included (a field the file gives at the top
level is taken as given).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...facts.extract import FunctionFact, PCall, PConst, PName, parse_pexpr
from ...index.index import ClassKey, SymbolKind
from ..partial_eval import Obj, Unknown, Value
from .part import DispatchPart
from .syntax import _names, sets_attrs

MAX_NESTING = 3
#: The config field the registry is keyed on (transformers' ``PretrainedConfig.model_type``).
REGISTRY_KEY = "model_type"
#: Methods through which a class answers attribute reads itself.
ATTRIBUTE_HOOKS = ("__getattribute__", "__getattr__")


@dataclass(frozen=True)
class ClassDefaults:
    """What a config class's constructor gives a config: literal defaults, and sub-configs
    (parameter -> (class, built when the file lacks it))."""

    fields: dict[str, Value] = field(default_factory=dict)
    subs: dict[str, tuple[ClassKey, bool]] = field(default_factory=dict)


class ConfigClasses(DispatchPart):
    def __init__(self, provider: Any) -> None:
        super().__init__(provider)
        self._classes: dict[str, ClassKey | None] = {}
        self._defaults: dict[ClassKey, ClassDefaults | None] = {}
        self._may_hold: dict[ClassKey, frozenset[str] | None] = {}

    def apply(self, hf: Obj) -> ClassKey | None:
        """Give ``hf`` (a config.json as read, closed) the defaults of the config class its
        model type loads into, nested sub-configs included; the class (None: no registered
        class of the tree)."""
        model_type = hf.fields.get(REGISTRY_KEY)
        cls = self.class_for(model_type) if isinstance(model_type, str) else None
        if cls is None:
            return None
        given = set(hf.fields)
        self._fill(hf, cls, 0)
        self._mark_lacks(hf, cls)
        hook = next((m for m in ATTRIBUTE_HOOKS if self.index.method(cls, m) is not None), None)
        if hook is not None:
            # A field the file lacks at the top level reads as the hook's answer, the class's
            # own default included: unknown. ``__getattribute__`` sees every read: a field the file
            # gives at the top level and, differently, in a sub-config may read as the sub-config's
            # (Glm5NextConfig mirrors its text_config), except the registry's key that chose the class.
            hf.closed = False
            nested: dict[str, set[str]] = {}
            if hook == "__getattribute__":
                for sub in (v for v in hf.fields.values() if isinstance(v, Obj)):
                    for k, v in sub.fields.items():
                        nested.setdefault(k, set()).add(repr(v))
            for name in sorted(hf.fields):
                if isinstance(hf.fields[name], Obj) or name == REGISTRY_KEY:
                    continue
                if name not in given or (name in nested and nested[name] != {repr(hf.fields[name])}):
                    hf.fields[name] = Unknown(f"{hf.label}.{name} ({cls[1]}.{hook} answers it)")
        return cls

    def class_for(self, model_type: str) -> ClassKey | None:
        """The config class of the tree the registry names for ``model_type``."""
        if model_type in self._classes:
            return self._classes[model_type]
        found: ClassKey | None = None
        for where, package in sorted(self.config.config_registries.items()):
            path, _, table = where.partition(":")
            facts = self.index.lookup(path) if path in self.index.files else None
            name = facts.name_tables.get(table, {}).get(model_type) if facts is not None else None
            if name is not None:
                found = self._resolve(package, name)
                if found is not None:
                    break
        if not self.index.frozen or found is not None:
            self._classes[model_type] = found
        return found

    def _fill(self, obj: Obj, cls: ClassKey, depth: int) -> None:
        got = self.defaults(cls)
        if got is None or depth >= MAX_NESTING:
            return
        for name, value in got.fields.items():
            if name not in obj.fields and name not in obj.roles:
                obj.fields[name] = value
        for name, (sub, when_absent) in got.subs.items():
            held = obj.fields.get(name)
            if isinstance(held, Obj):
                self._fill(held, sub, depth + 1)
                self._mark_lacks(held, sub)
            elif name not in obj.fields and name not in obj.roles and when_absent:
                built = Obj(f"{obj.label}.{name}", closed=True)
                self._fill(built, sub, depth + 1)
                self._mark_lacks(built, sub)
                obj.fields[name] = built

    def _mark_lacks(self, obj: Obj, cls: ClassKey) -> None:
        """``obj`` (closed, an object of ``cls``) raises on a plain read of a name it lacks
        when :meth:`may_hold` knows every name an object of ``cls`` may hold."""
        names = self.may_hold(cls)
        if names is not None and obj.closed:
            obj.lacks = (cls[1], names)

    def may_hold(self, cls: ClassKey) -> frozenset[str] | None:
        """Every name an object of ``cls`` may hold besides the fields its file gives (see the
        module docstring); None when that is not known (a base outside the tree that is no
        config base, a hook on attribute reads, an attribute set by a name not written as a
        literal, an ``attribute_map`` that is not a literal dict)."""
        if cls in self._may_hold:
            return self._may_hold[cls]
        self._may_hold[cls] = None
        names: set[str] = set()
        config_base = False
        for c in self.index.mro(cls):
            cf = self.index.class_fact(c)
            if cf is None or any(h in cf.methods for h in ATTRIBUTE_HOOKS):
                return None
            for b in cf.bases:
                if any(sym.kind is SymbolKind.CLASS for sym in self.index.resolve_chain(c[0], b)):
                    continue
                if ".".join(b) in self.config.head_free_bases:
                    continue
                if not any(_names(self.index, c[0], b, *dotted.rsplit(".", 1)) for dotted in self.config.config_bases):
                    return None
                config_base = True
            names.update(cf.class_attrs, cf.methods, cf.field_types, cf.field_defaults, cf.body_names)
            mapped = cf.class_attrs.get("attribute_map")
            if mapped is not None:
                if not (mapped.has_literal and isinstance(mapped.literal, dict)):
                    return None
                names.update(k for k in mapped.literal if isinstance(k, str))
            for m in cf.methods.values():
                if sets_attrs([m], ("self",)) or any(c.func == ("self", "__dict__", "update") for c in m.calls):
                    return None
                names.update(a.target[1] for a in m.attr_assigns if len(a.target) == 2 and a.target[0] == "self")
        if config_base:
            names.update(self.config.config_base_attributes)
        self._may_hold[cls] = frozenset(names)
        return self._may_hold[cls]

    def _resolve(self, package: str, name: str) -> ClassKey | None:
        if package not in self.index.files:
            return None
        for sym in self.index.resolve(package, name):
            if sym.kind is SymbolKind.CLASS:
                return (sym.path, sym.name)
        facts = self.index.lookup(package)
        for table in (facts.name_tables.values() if facts is not None else ()):
            module = table.get(name)
            path = self.index.path_of_module.get(module) if module is not None else None
            if path is not None and path in self.index.files and self.index.lookup(path) is not None \
                    and self.index.class_fact((path, name)) is not None:
                return (path, name)
        return None

    def defaults(self, cls: ClassKey) -> ClassDefaults | None:
        if cls in self._defaults:
            return self._defaults[cls]
        self._defaults[cls] = None  # (a class that nests itself)
        found = self.index.method(cls, "__init__")
        got = _read_init(self, found[0], found[1]) if found is not None else None
        self._defaults[cls] = got
        return got


def _read_init(part: ConfigClasses, owner: ClassKey, fn: FunctionFact) -> ClassDefaults:
    fields: dict[str, Value] = {}
    subs: dict[str, tuple[ClassKey, bool]] = {}
    params = {p.name: p for p in fn.params if p.name != "self"}
    for name, p in params.items():
        v = fn.attr_defs.get(name)
        if p.default is not None and isinstance(v, PName) and v.id == name:
            default = parse_pexpr(p.default)
            if isinstance(default, PConst) and (default.value is None or isinstance(default.value, (bool, int, float, str))):
                fields[name] = default.value
    for a in fn.attr_assigns:
        if len(a.target) != 2 or a.target[0] != "self" or a.target[1] not in params:
            continue
        call = parse_pexpr(a.value.text)
        if not isinstance(call, PCall) or call.args or not isinstance(call.func, PName):
            continue
        name = a.target[1]
        if call.keywords and not (len(call.keywords) == 1 and call.keywords[0].name is None
                                  and call.keywords[0].value == PName(id=name)):
            continue
        cls = next(((s.path, s.name) for s in part.index.resolve(owner[0], call.func.id)
                    if s.kind is SymbolKind.CLASS), None)
        if cls is None:
            continue
        # Built with no arguments in some arm: the constructor makes one when the file has none.
        subs[name] = (cls, not call.keywords or subs.get(name, (cls, False))[1])
    return ClassDefaults(fields, subs)
