"""Platform plugins (issue 13): what a plugin changes in vLLM when it is loaded.

A scan with ``--plugin`` sees vLLM and the plugin's packages as one namespace
(:class:`auditor.source.CombinedTree`), so the plugin's subclasses of vLLM classes and
their overrides resolve through the ordinary MRO. Two more things a plugin does at
import time need facts of their own, read here from the plugin's files:

* **registrations** — ``ModelRegistry.register_model("Arch", "pkg.mod:Class")`` or
  ``register_model("Arch", Class)``: the plugin's class replaces the registry entry for
  that architecture (the registry provider asks :meth:`PluginProvider.registrations`);
* **monkeypatches** — ``VllmClass.method = function``, ``setattr(VllmClass, "method",
  function)`` and ``vllm_module.function = function``, at module level (also under
  ``if``/``try``) or inside the plugin's functions (its patch functions and entry
  points): the patched function becomes the method. :meth:`PluginProvider.install`
  tells the index, before any method is resolved, so call resolution reaches the
  plugin's function, the original drops out of the functions rules examine, and the
  call chains name the plugin's file and the patch site.

Only the plugin's own files are read for these, and only those whose text can hold one
(a registration call, a module-level dotted assignment, or a dotted assignment or
``setattr(`` whose owner is a name imported from vLLM). Patch candidates are resolved on
demand, when the analysis first asks about a class or function they may change.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from ..facts.extract import AttrAssignFact, CallFact, Chain, ExprFact, FunctionFact
from ..index.index import ClassKey, FuncKey, SymbolKind
from .base import Analyses, Provider

# A dotted assignment (``Owner.attr = value``) is found by its ``.attr =`` part, then the
# start of its line: at module level a candidate monkeypatch, inside a function one when
# the owner's head is a name imported from the host (vLLM).
_ATTR_ASSIGN = re.compile(rb"\.[A-Za-z_]\w*[ \t]*=(?!=)")
_LINE_HEAD = re.compile(rb"([ \t]*)([A-Za-z_]\w*)(?:\.[A-Za-z_]\w*)*")
# ``setattr(owner, ...)`` with an owner that is not ``self``.
_SETATTR = re.compile(rb"setattr\(\s*(?!self\b)([A-Za-z_]\w*)")


def _host_imports(data: bytes, hosts: list[str]) -> set[bytes]:
    """Names a file binds by importing from the host packages (``from vllm.x import A``,
    ``import vllm.x as y``), read from its text."""
    alt = b"|".join(re.escape(h.encode()) for h in hosts)
    pattern = re.compile(
        rb"(?m)^[ \t]*from[ \t]+(?:" + alt + rb")(?:\.\S+)?[ \t]+import[ \t]+(?:\(([^)]*)\)|([^(\n]*)$)"
        rb"|^[ \t]*import[ \t]+((?:" + alt + rb")\S*)(?:[ \t]+as[ \t]+(\w+))?"
    )
    names: set[bytes] = set()
    for m in pattern.finditer(data):
        listed = m.group(1) or m.group(2)
        if listed:
            for part in re.sub(rb"#[^\n]*", b"", listed).split(b","):
                words = part.split()
                if words:
                    names.add(words[-1])
        elif m.group(3):
            names.add(m.group(4) or m.group(3).split(b".")[0])
    return names


def _referenced(data: bytes, name: str) -> bool:
    """The text uses ``name`` somewhere else than in ``def name``."""
    key = name.encode()
    if key not in data:
        return False
    for m in re.finditer(rb"\b" + re.escape(key) + rb"\b", data):
        if data[max(0, m.start() - 4) : m.start()] != b"def ":
            return True
    return False


# Wrappers whose first argument is the function that becomes the method.
_METHOD_WRAPPERS = frozenset({"staticmethod", "classmethod"})


class PatchForm(str, Enum):
    ASSIGN = "assignment"  # Owner.attr = value
    SETATTR = "setattr"  # setattr(Owner, "attr", value)


@dataclass(frozen=True)
class PatchSite:
    path: str
    line: int
    function: str  # the plugin function that patches, "" at module level

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class Registration:
    """``register_model(arch, cls)`` in a plugin file."""

    arch: str
    cls: ClassKey
    site: PatchSite


@dataclass(frozen=True)
class Patch:
    """A plugin assigns a function to a vLLM class attribute or module attribute."""

    original: FuncKey  # (path, "Class.method") or (path, "function")
    owner: ClassKey | None  # the patched class; None for a module attribute
    replacement: FuncKey | None  # None: not a function the scan can read (lambda, nested def, property)
    site: PatchSite
    form: PatchForm
    keeps_original: bool = False  # the plugin saved the original first (a wrapper may call it)


@dataclass(frozen=True)
class PatchCandidate:
    """An assignment to an attribute of a module-level name in a plugin file: a patch
    if the owner turns out to be a vLLM class or module."""

    path: str
    function: str  # qualname of the enclosing function, "" at module level
    owner: Chain
    attr: str
    value: ExprFact
    line: int
    form: PatchForm


class PluginProvider(Provider):
    dependencies = ()

    def __init__(self, analyses: Analyses) -> None:
        super().__init__(analyses)
        self._files: list[str] | None = None
        self._registrations: list[Registration] | None = None
        self._patches: list[Patch] | None = None
        self._candidates: list[PatchCandidate] | None = None
        self._resolved: dict[PatchCandidate, list[Patch]] = {}
        self._applied: dict[FuncKey, tuple[str, int]] = {}
        self._installed = False

    # -- which files ------------------------------------------------------
    def plugin_files(self) -> list[str]:
        """Files of the plugin roots that can hold a registration or a patch (loaded)."""
        if self._files is None:
            tree = self.index.tree
            roots = getattr(tree, "plugin_roots", None)
            out: list[str] = []
            if roots:
                calls = [c.encode() for c in self.config.plugin_register_calls]
                for root in roots:
                    for path in root.tree.python_files():
                        data = self._bytes(path)
                        if data is not None and self._may_patch(data, calls):
                            if self.index.load(path) is not None:
                                out.append(path)
            self._files = sorted(out)
        return self._files

    def _bytes(self, path: str) -> bytes | None:
        try:
            return self.index.tree.read(path)
        except OSError:
            return None  # the index reports it when (if) the analysis needs the file

    def _may_patch(self, data: bytes, calls: list[bytes]) -> bool:
        """A cheap text test before a file's facts are read: can it register or patch?"""
        if any(c in data for c in calls):
            return True
        heads: set[bytes] = set()
        module_level = False
        for m in _ATTR_ASSIGN.finditer(data):
            start = data.rfind(b"\n", 0, m.start()) + 1
            head = _LINE_HEAD.fullmatch(data, start, m.start())
            if head is None or head.group(2) == b"self":
                continue
            if head.group(1):
                heads.add(head.group(2))
            else:
                module_level = True
        if b"setattr(" in data:
            heads.update(m.group(1) for m in _SETATTR.finditer(data))
        if not heads and not module_level:
            return False
        imported = _host_imports(data, self._host_packages())
        return bool(imported) and (module_level or bool(heads & imported))

    def _host_packages(self) -> list[str]:
        roots = getattr(self.index.tree, "roots", [])
        return sorted({p for r in roots if not r.plugin for p in r.tree.packages}) or ["vllm"]

    def is_plugin_path(self, path: str) -> bool:
        tree = self.index.tree
        root_of = getattr(tree, "root_of", None)
        return bool(root_of is not None and root_of(path).plugin)

    # -- statements -------------------------------------------------------
    def _statements(self) -> list[tuple[str, FunctionFact | None, list[AttrAssignFact], list[CallFact]]]:
        """(path, enclosing function or None, attribute assignments, calls) per scope."""
        out: list[tuple[str, FunctionFact | None, list[AttrAssignFact], list[CallFact]]] = []
        for path in self.plugin_files():
            facts = self.index.facts.get(path)
            if facts is None:
                continue
            out.append((path, None, list(facts.module_attr_assigns), list(facts.module_calls)))
            fns = [fn for _, fn in sorted(facts.functions.items())]
            for _, cls in sorted(facts.classes.items()):
                fns.extend(m for _, m in sorted(cls.methods.items()))
            for fn in fns:
                if fn.attr_assigns or fn.calls:
                    out.append((path, fn, list(fn.attr_assigns), list(fn.calls)))
        return out

    @staticmethod
    def _local(fn: FunctionFact | None, head: str) -> bool:
        """A name bound inside the function (a parameter, a local): not the module's."""
        return fn is not None and (head in fn.param_names or head in fn.assigns or head in ("self", "cls", "super()"))

    def _resolve_classes(self, path: str, fn: FunctionFact | None, chain: Chain | None) -> list[ClassKey]:
        if not chain or self._local(fn, chain[0]):
            return []
        return [(s.path, s.name) for s in self.index.resolve_chain(path, chain) if s.kind is SymbolKind.CLASS]

    # -- registrations ----------------------------------------------------
    def registrations(self) -> list[Registration]:
        if self._registrations is None:
            found: list[Registration] = []
            names = set(self.config.plugin_register_calls)
            for path, fn, _assigns, calls in self._statements():
                for call in calls:
                    if not call.func or call.func[-1] not in names or len(call.args) < 2:
                        continue
                    arch = call.args[0]
                    if not (arch.has_literal and isinstance(arch.literal, str)):
                        continue
                    site = PatchSite(path, call.line, fn.qualname if fn else "")
                    for cls in self._registered_classes(path, fn, call.args[1]):
                        found.append(Registration(arch.literal, cls, site))
            self._registrations = sorted(set(found), key=lambda r: (r.arch, r.site.path, r.site.line, r.cls))
        return self._registrations

    def _registered_classes(self, path: str, fn: FunctionFact | None, target: ExprFact) -> list[ClassKey]:
        if target.has_literal and isinstance(target.literal, str):
            module, sep, name = target.literal.partition(":")
            mpath = self.index.path_of_module.get(module.strip())
            if not sep or mpath is None:
                return []
            return [(s.path, s.name) for s in self.index.resolve(mpath, name.strip()) if s.kind is SymbolKind.CLASS]
        return self._resolve_classes(path, fn, target.chain)

    # -- patches ----------------------------------------------------------
    def candidates(self) -> list[PatchCandidate]:
        """Every ``Owner.attr = value`` / ``setattr(Owner, "attr", value)`` in the plugin
        files whose owner is a module-level name (not yet resolved)."""
        if self._candidates is None:
            found: list[PatchCandidate] = []
            for path, fn, assigns, calls in self._statements():
                where = fn.qualname if fn else ""
                for a in assigns:
                    if len(a.target) >= 2 and not self._local(fn, a.target[0]):
                        found.append(PatchCandidate(path, where, a.target[:-1], a.target[-1], a.value, a.line, PatchForm.ASSIGN))
                for call in calls:
                    if call.func == ("setattr",) and len(call.args) == 3:
                        owner, attr, value = call.args
                        if owner.chain and attr.has_literal and isinstance(attr.literal, str) and not self._local(fn, owner.chain[0]):
                            found.append(PatchCandidate(path, where, owner.chain, attr.literal, value, call.line, PatchForm.SETATTR))
            # A patch inside a function counts when the plugin runs that function: an entry
            # point names it, or the plugin's code refers to it (calls it, imports it under
            # another name, passes it on, patches it onto vLLM).
            by_path: dict[str, set[str]] = {}
            for c in found:
                if c.function:
                    by_path.setdefault(c.path, set()).add(c.function.rpartition(".")[2])
            run = self._called(by_path) if by_path else set()
            self._candidates = [c for c in found if not c.function or c.function.rpartition(".")[2] in run]
        return self._candidates

    def _called(self, by_path: dict[str, set[str]]) -> set[str]:
        """Which of these functions (names per defining file) the plugin runs: named by
        one of its ``vllm.*_plugins`` entry points, or referred to in its code (the name
        outside its own ``def``: in its own file first, else in any plugin file's text)."""
        from ..source.trees import plugin_entry_points

        found: set[str] = set()
        roots = getattr(self.index.tree, "plugin_roots", [])
        for root in roots:
            if root.path is not None:
                found.update(t.rpartition(":")[2].rpartition(".")[2] for t in plugin_entry_points(root.path))
        remaining: set[str] = set()
        for path, names in sorted(by_path.items()):
            data = self._bytes(path) or b""
            for name in sorted(names - found):
                (found if _referenced(data, name) else remaining).add(name)
        remaining -= found
        for root in roots:
            for path in root.tree.python_files():
                if not remaining:
                    return found
                text = self._bytes(path)
                if text is None:
                    continue
                hits = {name for name in remaining if _referenced(text, name)}
                found |= hits
                remaining -= hits
        return found

    def patches(self) -> list[Patch]:
        """Every candidate resolved (all of them: for reports and tests; a scan resolves
        them on demand through :meth:`install`)."""
        if self._patches is None:
            found: list[Patch] = []
            for c in self.candidates():
                found.extend(self._resolve_candidate(c))
            self._patches = sorted(set(found), key=lambda p: (p.site.path, p.site.line, p.original))
        return self._patches

    def _resolve_candidate(self, c: PatchCandidate) -> list[Patch]:
        done = self._resolved.get(c)
        if done is None:
            fn = self._function_named(c.path, c.function)
            done = self._patch(c.path, fn, c.owner, c.attr, c.value, c.line, c.form)
            self._resolved[c] = done
        return done

    def _function_named(self, path: str, qualname: str) -> FunctionFact | None:
        return self.index.function((path, qualname)) if qualname else None

    def _key_names(self, c: PatchCandidate) -> list[str]:
        """The class name the owner may denote (through a module-level alias in the
        plugin's file: ``_TARGET = VllmClass``), and ``fn:<attr>`` for a module function."""
        heads = [c.owner[-1]]
        if len(c.owner) == 1:
            facts = self.index.facts.get(c.path)
            for alias in facts.module_assigns.get(c.owner[0], ()) if facts is not None else ():
                if alias.chain:
                    heads.append(alias.chain[-1])
            # ``from vllm.x import VllmClass as Target``: the class is named VllmClass.
            heads.extend(name for _module, name in self.index.imports_of(c.path).get(c.owner[0], []) if name)
        return [*dict.fromkeys(heads), "fn:" + c.attr]

    def _patch(
        self, path: str, fn: FunctionFact | None, owner: Chain, attr: str, value: ExprFact, line: int, form: PatchForm
    ) -> list[Patch]:
        if self._local(fn, owner[0]):
            return []
        site = PatchSite(path, line, fn.qualname if fn else "")
        replacement = self._function_value(path, fn, value)
        keeps = self._saves_original(path, fn, owner, attr)
        out: list[Patch] = []
        for sym in self.index.resolve_chain(path, owner):
            if sym.kind is SymbolKind.CLASS:
                cls = (sym.path, sym.name)
                if self.index.class_fact(cls) is None or self.is_plugin_path(cls[0]):
                    continue  # a plugin patching its own classes changes nothing in vLLM
                # The attribute may be inherited: the patch shadows it on this class.
                found = self.index.method(cls, attr)
                if found is None and replacement is None:
                    continue  # not a method, and not a function either: a plain attribute
                out.append(Patch((cls[0], f"{cls[1]}.{attr}"), cls, replacement, site, form, keeps))
            elif sym.kind is SymbolKind.MODULE and sym.path and not self.is_plugin_path(sym.path):
                facts = self.index.load(sym.path)
                if facts is not None and attr in facts.functions:
                    out.append(Patch((sym.path, attr), None, replacement, site, form, keeps))
        return out

    def _saves_original(self, path: str, fn: FunctionFact | None, owner: Chain, attr: str) -> bool:
        """``_orig = VllmClass.method`` (or ``getattr(VllmClass, "method", ...)``) in the
        patching file or function: the replacement is a wrapper that may still run the
        original, so the original's code stays examined."""
        target = owner + (attr,)
        dotted = ".".join(owner)
        getattr_texts = (f'getattr({dotted}, "{attr}"', f"getattr({dotted}, '{attr}'")
        facts = self.index.facts.get(path)
        values = [v for vs in facts.module_assigns.values() for v in vs] if facts is not None else []
        if fn is not None:
            values += [v for vs in fn.assigns.values() for v in vs]
        return any(v.chain == target or v.text.startswith(getattr_texts) for v in values)

    def _function_value(self, path: str, fn: FunctionFact | None, value: ExprFact) -> FuncKey | None:
        chain = value.chain
        if value.called and value.called[-1] in _METHOD_WRAPPERS:
            chain = value.first_arg
        if not chain or self._local(fn, chain[0]):
            return None
        for sym in self.index.resolve_chain(path, chain):
            if sym.kind is SymbolKind.FUNCTION:
                return (sym.path, sym.name)
        return None

    # -- effect -----------------------------------------------------------
    def install(self) -> None:
        """Hand the patch candidates to the index (once, before the analyses resolve
        methods): the index resolves those that may change a class or function when it is
        first asked about it. Patches of one attribute apply in path and line order, the
        last one winning (the order in which a plugin imports its patch modules is not
        read)."""
        if self._installed:
            return
        self._installed = True
        by_name: dict[str, list[object]] = {}
        for c in self.candidates():
            for name in self._key_names(c):
                by_name.setdefault(name, []).append(c)
        self.index.defer_patches(by_name, self._apply)

    def _apply(self, candidate: object) -> None:
        assert isinstance(candidate, PatchCandidate)
        for p in self._resolve_candidate(candidate):
            if p.replacement is not None and self._applied.get(p.original, (p.site.path, p.site.line)) <= (p.site.path, p.site.line):
                self._applied[p.original] = (p.site.path, p.site.line)
                self.index.replace_function(p.original, p.replacement, p.owner, str(p.site), p.keeps_original)

    def settle_loaded(self) -> None:
        """Before the index freezes: resolve the pending candidates that name a class or
        function of a file already read, so that nothing depends on when it was asked."""
        pending = self.index.pending_patch_names()
        if not pending:
            return  # nothing to settle (no plugin): the loaded files need not be read
        names: set[str] = set()
        for _path, facts in self.index.loaded():
            names.update(cls.rpartition(".")[2] for cls in facts.classes)
            names.update("fn:" + f for f in facts.functions)
        self.index.settle_patches(sorted(names & pending))
