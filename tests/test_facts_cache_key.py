"""The facts cache key follows the extractor's own code (issue 18): an extractor changed
without a FACTS_VERSION bump must not be served the facts the old one wrote."""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec

from scan_helpers import write_tree

import auditor.facts.cache as cache
from auditor.facts import extract as facts_module
from auditor.facts import bindings as bindings_module
from auditor.facts import statements as statements_module
from auditor.facts.cache import FactsCache
from auditor.common.config import Config
from auditor.index.index import Index
from auditor.source.trees import DirectoryTree


def _clear() -> None:
    digest = getattr(cache, "extractor_digest", None)  # (absent before issue 18)
    if digest is not None:
        digest.cache_clear()


def _load_all(root: Path, cache_dir: Path) -> FactsCache:
    fc = FactsCache(cache_dir)
    index = Index(DirectoryTree(root), Config(), fc)
    for path in index.files:
        index.load(path)
    return fc


def _changed_extractor(tmp_path: Path, monkeypatch, module=facts_module) -> None:
    """One of the extractor's modules as another build would have it: same FACTS_VERSION,
    one line of code more."""
    edited = tmp_path / f"{module.__name__.rpartition('.')[2]}_edited.py"
    edited.write_bytes(Path(module.__file__).read_bytes() + b"\n_ANOTHER_BUILD = True\n")
    monkeypatch.setattr(module, "__file__", str(edited))
    _clear()


def test_the_digest_is_of_the_extractor_source(tmp_path, monkeypatch):
    _clear()
    h = hashlib.sha256()
    for module in (facts_module, statements_module, bindings_module):
        h.update(Path(module.__file__).read_bytes())
    assert cache.extractor_digest() == h.hexdigest()[:16]
    before = cache.content_key(b"x = 1\n", "vllm/a.py")
    for module in (facts_module, statements_module, bindings_module):  # a change to any module of the extractor
        _changed_extractor(tmp_path, monkeypatch, module)
        try:
            assert cache.content_key(b"x = 1\n", "vllm/a.py") != before
        finally:
            monkeypatch.undo()
            _clear()
        _clear()


def test_facts_written_by_another_extractor_are_not_served(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "t", {"vllm/a.py": "def f(x):\n    return x\n", "vllm/b.py": "X = 1\n"})
    cache_dir = tmp_path / "cache"
    _clear()
    first = _load_all(root, cache_dir)
    assert first.misses and not first.hits
    again = _load_all(root, cache_dir)
    assert again.hits == first.misses and not again.misses  # the same extractor: served
    _changed_extractor(tmp_path, monkeypatch)
    try:
        other = _load_all(root, cache_dir)
        assert other.hits == 0 and other.misses == first.misses  # another extractor: extracted again
    finally:
        monkeypatch.undo()
        _clear()


def _record_modules(t: object, seen: set[int] | None = None) -> set[str]:
    """The modules defining every struct and enum type reachable from a msgspec type info."""
    seen = set() if seen is None else seen
    if id(t) in seen:
        return set()
    seen.add(id(t))
    out: set[str] = set()
    if isinstance(t, (msgspec.inspect.StructType, msgspec.inspect.EnumType)):
        out.add(t.cls.__module__)
    if isinstance(t, msgspec.inspect.StructType):
        for f in t.fields:
            out |= _record_modules(f.type, seen)
    for attr in ("item_type", "key_type", "value_type"):
        if hasattr(t, attr):
            out |= _record_modules(getattr(t, attr), seen)
    for attr in ("item_types", "types"):
        for sub in getattr(t, attr, ()):
            out |= _record_modules(sub, seen)
    return out


def test_the_digest_hashes_every_module_of_ours_the_extractor_imports():
    """A helper moved out of the extractor into a module of its own must be hashed too."""
    import ast

    tree = ast.parse(Path(facts_module.__file__).read_text(encoding="utf-8"))
    ours = {f"auditor.facts.{n.module}" for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and n.level == 1 and n.module}
    hashed = {m.__name__ for m in cache.EXTRACTOR_MODULES}
    assert ours and ours <= hashed, ours - hashed


def test_the_extractor_digest_covers_the_shape_of_every_record():
    """The key hashes the extractor's two modules instead of the records' JSON schema: sound
    only while every record type the cache stores is defined in them."""
    from auditor.facts.extract import ModuleFacts

    modules = _record_modules(msgspec.inspect.type_info(ModuleFacts))
    assert {facts_module.__name__, statements_module.__name__} <= modules
    assert modules <= {facts_module.__name__, statements_module.__name__}, modules


class _Foreign(msgspec.Struct):
    x: int


class _Holder(msgspec.Struct):
    items: list[_Foreign]
    by_name: dict[str, tuple[_Foreign | None, ...]]


def test_a_record_defined_elsewhere_would_be_seen():
    assert _record_modules(msgspec.inspect.type_info(_Holder)) == {__name__}


def test_the_key_follows_the_msgspec_release(monkeypatch):
    before = cache.content_key(b"x = 1\n", "vllm/a.py")
    monkeypatch.setattr(msgspec, "__version__", "0.0.0-another")
    assert cache.content_key(b"x = 1\n", "vllm/a.py") != before
