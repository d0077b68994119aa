"""Whole-tree index: modules, classes, functions and import resolution, loaded lazily.

Only files that can matter are parsed: the *seeds* (files whose text mentions a
threaded parameter, a draft-loop count or a registry table) and, on demand, every
module that resolution reaches from them (base classes, called functions,
attribute types, registry targets). Each parsed file's facts come from
:mod:`auditor.facts`, through the content-hash cache.
"""

from __future__ import annotations

import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Iterable, Iterator

from ..facts.cache import FactsCache, content_key
from ..common.config import Config
from ..facts.extract import Chain, ClassFact, FunctionFact, ModuleFacts, extract
from ..model.findings import Problem
from ..source.trees import FileTooLarge, SourceTree
from ..facts.suppressions import MARKER
from .patches import PatchTable
from ..common.child_guard import die_with_parent

# A class or function is identified by (path, qualname): the same class name in
# several files (platform copies) stays distinct.
ClassKey = tuple[str, str]
FuncKey = tuple[str, str]

EXTERNAL = ("<external>", "")


class SymbolKind(str, Enum):
    CLASS = "class"
    FUNCTION = "function"
    MODULE = "module"
    TABLE = "table"


@dataclass(frozen=True)
class Symbol:
    kind: SymbolKind
    path: str
    name: str  # qualname, or module name for kind == "module"


class IndexFrozen(RuntimeError):
    """A file was loaded after the loading phase: a command's question was not declared
    as a query before the scan (its answer would silently miss files)."""


def module_name(relpath: str) -> tuple[str, bool]:
    parts = relpath[:-3].split("/")
    is_pkg = parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    return ".".join(parts), is_pkg


def decode_source(data: bytes) -> str:
    # PEP 263: honour a coding cookie; fall back to utf-8 (and report otherwise).
    import io
    import tokenize

    if b"\0" in data:
        raise ValueError("file contains NUL bytes")
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


def _extract_worker(args: tuple[str, bytes, str, bool]) -> tuple[str, ModuleFacts | None, tuple[str, str] | None]:
    path, data, module, is_pkg = args
    try:
        text = decode_source(data)
    except (UnicodeDecodeError, LookupError, SyntaxError, ValueError) as exc:
        return path, None, ("decode-error", f"cannot decode: {exc}")
    try:
        return path, extract(text, path, module, is_pkg), None
    except SyntaxError as exc:
        where = f"line {exc.lineno}: " if exc.lineno else ""
        return path, None, ("parse-error", f"{where}{exc.msg}")
    except (RecursionError, MemoryError):
        return path, None, ("parse-error", "expression nesting too deep to analyse")
    except ValueError as exc:
        return path, None, ("parse-error", str(exc))


class LazyFacts(dict[str, "ModuleFacts | None"]):
    """The index's facts by path, where some are decoded only when first read: an index
    restored from :mod:`auditor.engine.prepared` holds every file the recorded one held, and a
    new question reads less than half of them. ``path in facts`` and the order of the paths
    are those of the loaded files whether decoded or not."""

    def __init__(self) -> None:
        super().__init__()
        self._pending: dict[str, Callable[[], "ModuleFacts | None"]] = {}

    def defer(self, path: str, decode: Callable[[], "ModuleFacts | None"]) -> None:
        super().__setitem__(path, None)
        self._pending[path] = decode

    def _ready(self, path: str) -> None:
        decode = self._pending.pop(path, None)
        if decode is not None:
            super().__setitem__(path, decode())

    def __getitem__(self, path: str) -> "ModuleFacts | None":
        self._ready(path)
        return super().__getitem__(path)

    def get(self, path: str, default: "ModuleFacts | None" = None) -> "ModuleFacts | None":  # type: ignore[override]
        self._ready(path)
        return super().get(path, default)

    def __setitem__(self, path: str, facts: "ModuleFacts | None") -> None:
        self._pending.pop(path, None)
        super().__setitem__(path, facts)

    def values(self) -> Any:
        for path in list(self._pending):
            self._ready(path)
        return super().values()

    def items(self) -> Any:
        for path in list(self._pending):
            self._ready(path)
        return super().items()


class Index(PatchTable):
    """The facts of one tree's modules, loaded on demand until :meth:`freeze`, and the
    lookups over them (imports, symbols, classes, methods, MRO); plugin patches are
    tracked by :class:`~auditor.index.patches.PatchTable`."""

    def __init__(self, tree: SourceTree, config: Config, cache: FactsCache | None = None, workers: int = 1) -> None:
        self.tree = tree
        self.config = config
        self.cache = cache or FactsCache(None)
        self.workers = workers
        # Sorted: nothing below may depend on the order in which a tree lists its files.
        self.files = sorted(tree.python_files())
        self.path_of_module: dict[str, str] = {}
        for p in self.files:
            mod, is_pkg = module_name(p)
            if mod in self.path_of_module and not is_pkg:
                continue  # `x/__init__.py` beside `x.py`: Python imports the package
            self.path_of_module[mod] = p
        self.packages: set[str] = set()
        for mod in self.path_of_module:
            parts = mod.split(".")
            for i in range(1, len(parts)):
                self.packages.add(".".join(parts[:i]))
        self._file_set = set(self.files)
        # A plain dict; an index restored from auditor.engine.prepared swaps in LazyFacts first
        # (a dict subclass costs every lookup a Python call: only where it saves decoding).
        self.facts: dict[str, ModuleFacts | None] = {}
        self.facts_keys: dict[str, str] = {}  # path -> its facts-cache key (auditor.engine.prepared records it)
        self.problems: dict[str, Problem] = {}
        for path, kind, msg in tree.problems():
            self.problems[path] = Problem(path, kind, msg)
        self._import_map: dict[str, dict[str, list[tuple[str, str | None]]]] = {}
        self._resolve_memo: dict[tuple[str, str], list[Symbol]] = {}
        self._mro_memo: dict[ClassKey, list[ClassKey]] = {}
        self.parsed = 0
        self.seeds: list[str] = []
        self.suppression_files: list[str] = []  # files with a `mtp-audit:` comment marker
        # Phases: the engine loads the seeds, the analyses load what resolution reaches,
        # then the engine calls freeze(): from there on nothing is parsed, so rules
        # resolve only within a fixed set of files and findings never depend on the
        # order in which rules happen to run.
        self._frozen = False
        # Issue 12: words whose files the capture analysis asks for, noted while the seeds
        # are read (one pass over the tree instead of two).
        self._premark = [w.encode() for w in config.graph_capture_apis]
        # Public so that an index of the same tree content can be restored without the seeds' pass
        # (auditor.engine.prepared).
        self.premarked: dict[bytes, list[str]] = {w: [] for w in self._premark}
        self.premark_done = False
        PatchTable.__init__(self)

    # -- loading -------------------------------------------------------
    def _read(self, path: str) -> bytes | None:
        try:
            return self.tree.read(path)
        except FileTooLarge as exc:
            self.problems[path] = Problem(path, "too-large", str(exc))
        except OSError as exc:
            self.problems[path] = Problem(path, "unreadable", exc.strerror or str(exc))
        return None

    def load_seeds(self) -> None:
        """Parse the files the analysis starts from: those that mention a threaded parameter
        or a registry table, and those with a ``range(...)`` over a draft-step count (a draft
        loop). A file that merely mentions ``num_speculative_tokens`` (config, scheduler,
        metrics) is parsed only if resolution reaches it."""
        # Plain substring tests first: several times faster than a regex over 45 MB.
        always = [w.encode() for w in self.config.threaded_params + self.config.registry_tables]
        counts = [w.encode() for w in self.config.draft_loop_counts]
        loop = re.compile(
            rb"\brange\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\b(?:"
            + b"|".join(re.escape(c) for c in counts)
            + rb")\b"
        )
        pending: list[tuple[str, bytes, str]] = []
        self.premark_done = True
        files = self.files
        narrow = getattr(self.tree, "files_containing", None)
        if narrow is not None:
            # A git tree can search its blobs natively; read only the candidates.
            hits = narrow(always + counts + [MARKER] + self._premark)
            files = [p for p in self.files if p in hits]
        for path in files:
            data = self._read(path)
            if data is None:
                self.facts[path] = None
                continue
            if MARKER in data:
                self.suppression_files.append(path)
            for word in self._premark:
                if word in data:
                    self.premarked[word].append(path)
            if any(n in data for n in always) or (any(c in data for c in counts) and loop.search(data)):
                self.seeds.append(path)
                pending.append((path, data, content_key(data, path)))
        self._load_many(pending)

    def files_mentioning(self, words: list[bytes]) -> list[str]:
        """Files whose bytes contain any of ``words`` (a plain substring test, as for the
        seeds; a git tree searches its blobs natively). Issue 12: the capture analysis
        finds graph wrappers and the places that install them this way."""
        if not words:
            return []
        if self.premark_done and all(w in self.premarked for w in words):
            return sorted({p for w in words for p in self.premarked[w]})
        files = self.files
        narrow = getattr(self.tree, "files_containing", None)
        if narrow is not None:
            hits = narrow(words)
            files = [p for p in self.files if p in hits]
        out = []
        for path in files:
            try:
                data = self.tree.read(path)
            except OSError:
                continue
            if any(w in data for w in words):
                out.append(path)
        return out

    def _load_many(self, pending: list[tuple[str, bytes, str]]) -> None:
        todo: list[tuple[str, bytes, str, bool]] = []
        keys: dict[str, str] = {}
        for path, data, key in pending:
            self.facts_keys[path] = key
            cached = self.cache.get(key, path)
            if cached is not None:
                self.facts[path] = cached
                continue
            mod, is_pkg = module_name(path)
            todo.append((path, data, mod, is_pkg))
            keys[path] = key
        if not todo:
            return
        if self.workers > 1 and len(todo) > 8:
            # workers die with this process, even when it is killed (auditor.child_guard)
            with ProcessPoolExecutor(max_workers=self.workers, initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
                results = list(pool.map(_extract_worker, todo, chunksize=4))
        else:
            results = [_extract_worker(t) for t in todo]
        for path, facts, problem in results:
            self.parsed += 1
            if facts is None:
                assert problem is not None
                self.problems[path] = Problem(path, problem[0], problem[1])
                self.facts[path] = None
                continue
            self.facts[path] = facts
            self.cache.put(keys[path], facts)

    def load_keyed(self, path: str, key: str) -> bool:
        """Load ``path`` whose bytes have facts-cache key ``key`` (recorded from an index of the
        same tree content: :mod:`auditor.engine.prepared`), without reading it when the facts
        cache holds it; its facts are decoded when first read. False when the file now has
        other bytes or gives no facts."""
        if self._frozen:
            raise IndexFrozen(f"{path} was asked for after the index was frozen")
        payload = self.cache.payload(key)
        if payload is not None:
            if isinstance(self.facts, LazyFacts):
                self.facts.defer(path, lambda: self._decoded(path, key, payload))
            else:
                self.facts[path] = self._decoded(path, key, payload)
            self.facts_keys[path] = key
            return isinstance(self.facts, LazyFacts) or self.facts.get(path) is not None
        data = self._read(path)
        if data is None or content_key(data, path) != key:
            return False
        self._load_many([(path, data, key)])
        return self.facts.get(path) is not None

    def _decoded(self, path: str, key: str, payload: bytes) -> ModuleFacts | None:
        """The facts of a verified cache entry; extracted from the file again should the entry
        be of another build (its key names this build's extractor and schema: not expected)."""
        facts = self.cache.decode(key, path, payload)
        if facts is not None:
            return facts
        data = self._read(path)  # pragma: no cover - see above
        if data is None or content_key(data, path) != key:  # pragma: no cover
            return None
        mod, is_pkg = module_name(path)  # pragma: no cover
        return _extract_worker((path, data, mod, is_pkg))[1]  # pragma: no cover

    def freeze(self) -> None:
        """End of the loading phase (called by the engine, once, before the rules run)."""
        self._frozen = True

    @property
    def frozen(self) -> bool:
        return self._frozen

    def load(self, path: str) -> ModuleFacts | None:
        if path in self.facts:
            return self.facts[path]
        if self._frozen:
            raise IndexFrozen(f"{path} was asked for after the index was frozen: ask for it in a query run_scan takes")
        data = self._read(path)
        if data is None:
            self.facts[path] = None
            return None
        self._load_many([(path, data, content_key(data, path))])
        return self.facts.get(path)

    def lookup(self, path: str) -> ModuleFacts | None:
        """The facts of ``path`` for a lookup: loaded on demand while the index loads; once
        frozen, only what was loaded (a lookup never parses during the rules)."""
        return self.facts.get(path) if self._frozen else self.load(path)

    def loaded(self) -> Iterator[tuple[str, ModuleFacts]]:
        for path in sorted(self.facts):
            f = self.facts[path]
            if f is not None:
                yield path, f

    # -- symbols -------------------------------------------------------
    def imports_of(self, path: str) -> dict[str, list[tuple[str, str | None]]]:
        m = self._import_map.get(path)
        if m is None:
            m = {}
            facts = self.facts.get(path)
            for imp in facts.imports if facts is not None else ():
                m.setdefault(imp.local, []).append((imp.module, imp.name))
            self._import_map[path] = m
        return m

    def resolve(self, path: str, name: str, _depth: int = 0) -> list[Symbol]:
        """What a module-level ``name`` in file ``path`` can be (all alternatives)."""
        memo_key = (path, name)
        if memo_key in self._resolve_memo and not (self._frozen and not self._resolve_memo[memo_key]):
            return self._resolve_memo[memo_key]
        if _depth > 12:
            return []
        self._resolve_memo[memo_key] = []  # cycle guard
        facts = self.lookup(path)
        out: list[Symbol] = []
        if facts is not None:
            if name in facts.classes:
                out.append(Symbol(SymbolKind.CLASS, path, name))
            if name in facts.functions:
                out.append(Symbol(SymbolKind.FUNCTION, path, name))
            if name in facts.tables:
                out.append(Symbol(SymbolKind.TABLE, path, name))
            if not out:
                for module, attr in self.imports_of(path).get(name, []):
                    out.extend(self._resolve_import(module, attr, _depth))
                if not out:
                    for module, attr in self.imports_of(path).get("*", []):
                        target = self.path_of_module.get(module)
                        if target:
                            out.extend(self.resolve(target, name, _depth + 1))
                if not out:
                    # module-level alias: Foo = Bar
                    for e in facts.module_assigns.get(name, ()):
                        ch = e.chain
                        if ch and len(ch) == 1 and ch[0] != name:
                            out.extend(self.resolve(path, ch[0], _depth + 1))
        out = list(dict.fromkeys(out))
        self._resolve_memo[memo_key] = out
        return out

    def _resolve_import(self, module: str, attr: str | None, depth: int) -> list[Symbol]:
        if attr is None:
            known = module in self.path_of_module or module in self.packages
            return [Symbol(SymbolKind.MODULE, self.path_of_module.get(module, ""), module)] if known else []
        sub = f"{module}.{attr}"
        if sub in self.path_of_module:
            return [Symbol(SymbolKind.MODULE, self.path_of_module[sub], sub)]
        target = self.path_of_module.get(module)
        if target is None:
            return []
        return self.resolve(target, attr, depth + 1)

    def resolve_chain(self, path: str, chain: Chain) -> list[Symbol]:
        """Resolve a dotted chain (``mod.sub.Cls``) from the module namespace of ``path``."""
        syms = self.resolve(path, chain[0])
        for part in chain[1:]:
            nxt: list[Symbol] = []
            for s in syms:
                if s.kind is SymbolKind.MODULE:
                    sub = f"{s.name}.{part}"
                    if sub in self.path_of_module:
                        nxt.append(Symbol(SymbolKind.MODULE, self.path_of_module[sub], sub))
                    elif s.path:
                        nxt.extend(self.resolve(s.path, part))
                elif s.kind is SymbolKind.CLASS:
                    nested = f"{s.name}.{part}"
                    facts = self.lookup(s.path)
                    cls = self.class_fact((s.path, s.name))
                    if facts and nested in facts.classes:
                        nxt.append(Symbol(SymbolKind.CLASS, s.path, nested))
                    elif cls is not None and part in cls.methods:
                        nxt.append(Symbol(SymbolKind.FUNCTION, s.path, f"{s.name}.{part}"))
            syms = nxt
        return syms

    def resolve_module_path(self, module: str, relative_to: str) -> str | None:
        """Registry tables name modules either absolutely or relative to their own package."""
        if module in self.path_of_module:
            return self.path_of_module[module]
        pkg = module_name(relative_to)[0].rsplit(".", 1)[0]
        cand = f"{pkg}.{module}"
        return self.path_of_module.get(cand)

    # -- classes -------------------------------------------------------
    def class_fact(self, key: ClassKey) -> ClassFact | None:
        facts = self.lookup(key[0]) if key[0] in self._file_set else None
        if facts is None:
            return None
        return facts.classes.get(key[1])

    def methods(self, key: ClassKey) -> dict[str, FunctionFact]:
        """The methods a class defines itself (not inherited ones), with the functions a
        plugin patched onto it in place of its own."""
        cls = self.class_fact(key)
        own = cls.methods if cls is not None else {}
        if self._pending_patches:
            self._settle(key[1].rpartition(".")[2])
        patched = self._replaced_methods.get(key)
        if patched:
            own = dict(own)
            for name, fkey in patched.items():
                fn = self.function(fkey)
                if fn is not None:
                    own[name] = fn
        return own

    def method_key(self, cls: ClassKey, name: str) -> FuncKey:
        """The function that runs for ``cls.name`` (``cls`` being where the MRO found it)."""
        if self._pending_patches:
            self._settle(cls[1].rpartition(".")[2])
        patched = self._replaced_methods.get(cls)
        if patched and name in patched:
            return patched[name]
        return (cls[0], f"{cls[1]}.{name}")

    def bases(self, key: ClassKey) -> list[ClassKey]:
        cf = self.class_fact(key)
        out: list[ClassKey] = []
        for chain in cf.bases if cf is not None else ():
            if not chain or not re.match(r"^[A-Za-z_()]", chain[0]):
                continue
            for s in self.resolve_chain(key[0], chain):
                if s.kind is SymbolKind.CLASS:
                    out.append((s.path, s.name))
        return out

    def mro(self, key: ClassKey) -> list[ClassKey]:
        if key in self._mro_memo:
            return self._mro_memo[key]
        self._mro_memo[key] = [key]
        seqs = [self.mro(b) for b in self.bases(key)]
        seqs.append(self.bases(key))
        result = [key]
        # C3 linearisation; on inconsistent hierarchies fall back to DFS order.
        seqs = [list(s) for s in seqs if s]
        while seqs:
            for seq in seqs:
                head = seq[0]
                if not any(head in s[1:] for s in seqs):
                    break
            else:
                head = seqs[0][0]
            result.append(head)
            seqs = [[c for c in s if c != head] for s in seqs]
            seqs = [s for s in seqs if s]
        result = list(dict.fromkeys(result))
        self._mro_memo[key] = result
        return result

    def method(self, key: ClassKey, name: str, after: ClassKey | None = None) -> tuple[ClassKey, FunctionFact] | None:
        mro = self.mro(key)
        if after is not None and after in mro:
            mro = mro[mro.index(after) + 1 :]
        for cls in mro:
            m = self.methods(cls).get(name)
            if m is not None:
                return cls, m
        return None

    def function(self, key: FuncKey) -> FunctionFact | None:
        facts = self.lookup(key[0])
        if facts is None:
            return None
        qual = key[1]
        if qual in facts.functions:
            return facts.functions[qual]
        cls, _, meth = qual.rpartition(".")
        c = facts.classes.get(cls)
        if c is not None:
            return c.methods.get(meth)
        return None

    def all_classes(self) -> Iterable[ClassKey]:
        for path, facts in self.loaded():
            for qual in facts.classes:
                yield (path, qual)


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))
