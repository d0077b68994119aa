"""A new `layers` question on a tree analysed before runs only its own plans
(:mod:`auditor.engine.prepared`): the answers are the cold path's, byte for byte; a damaged
entry is recomputed, never trusted; ``--no-cache`` reads and writes nothing; an entry never
depends on the question asked. And a directory tree's digest reuses the blob ids of files
unchanged on disk (:mod:`auditor.source.sha_memo`), and sees an edit
(bench/before_after_s5_fast.md has the timings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_runner import invoke
from scan_helpers import write_tree

from auditor.analyses.analysis import Analysis
from auditor.analyses.dispatch import DispatchProvider, Setting
from auditor.common.config import Config
from auditor.engine.prepared import PreparedCache
from auditor.engine.scan import run_scan, tree_digest
from auditor.facts.cache import FactsCache
from auditor.source import trees
from auditor.source.trees import DirectoryTree
from rules import all_rules
from trees import gate_tree

def _files() -> dict[str, str]:
    return gate_tree()  # QwenMTP's plans cite an MTP006: the recorded findings are part of the answers


QUESTIONS = [
    ("--arch", "DeepMTPModel", "--set", "num_nextn_predict_layers=3", "--k", "3", "--runner", "v2", "-f", "json"),
    ("--arch", "DeepMTPModel", "--set", "num_nextn_predict_layers=2", "--k", "4"),
    ("--arch", "QwenMTP", "--k", "2", "-f", "json", "--engine-mode", "eager"),
    ("--arch", "DeepMTPModel", "--k", "1", "--runner", "v1"),
    ("--all", "--k", "2", "-f", "json"),
    ("--arch", "NoSuchMTP", "--k", "2"),  # a usage error (exit 2), from the plans' own choice
]


def ask(root: Path, cache: Path, question: tuple[str, ...], *more: str) -> tuple[int, str, str]:
    r = invoke("layers", str(root), *question, "--cache-dir", str(cache), "-q", *more)
    return r.returncode, r.stdout, r.stderr


def entries(cache: Path, folder: str) -> list[Path]:
    return sorted(p for p in (cache / folder).rglob("*") if p.is_file())


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "t", _files())


def test_new_questions_from_a_prepared_entry_answer_as_the_cold_path(tree: Path, tmp_path: Path, monkeypatch) -> None:
    cold = {q: ask(tree, tmp_path / f"cold{i}", q) for i, q in enumerate(QUESTIONS)}
    assert cold[QUESTIONS[2]][0] == 0 and "MTP006" in cold[QUESTIONS[2]][1]  # a plan cites a finding
    assert cold[QUESTIONS[-1]][0] == 2 and "unknown draft architecture" in cold[QUESTIONS[-1]][2]
    warm = tmp_path / "warm"
    ask(tree, warm, ("--arch", "DeepMTPModel", "--k", "5"))  # another question records the entry
    assert len(entries(warm, "prepared")) == 1

    def no_loading_phase(self: Analysis) -> None:
        raise AssertionError("a new question on a prepared tree ran the loading phase")

    monkeypatch.setattr(Analysis, "prepare", no_loading_phase)
    for q in QUESTIONS:
        assert ask(tree, warm, q) == cold[q], q
        assert ask(tree, warm, q) == cold[q], q  # asked before: the rendered document
    assert len(entries(warm, "prepared")) == 1


def test_an_entry_never_depends_on_the_question(tree: Path, tmp_path: Path) -> None:
    written = []
    for i, q in enumerate(QUESTIONS[:4]):
        cache = tmp_path / f"c{i}"
        assert ask(tree, cache, q)[0] == 0
        [entry] = entries(cache, "prepared")
        written.append((entry.name, entry.read_bytes()))
    assert all(w == written[0] for w in written)


def test_a_damaged_prepared_entry_is_recomputed_never_trusted(tree: Path, tmp_path: Path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    question = QUESTIONS[2]
    first = ask(tree, cache, ("--arch", "DeepMTPModel", "--k", "5"))
    assert first[0] == 0
    [entry] = entries(cache, "prepared")
    raw = entry.read_bytes()
    # The findings edited away (a plan would no longer cite MTP006), cut short, or foreign.
    header, _, payload = raw.partition(b"\n")
    no_findings = json.loads(payload)
    for v in no_findings["variants"]:
        v["findings"] = []
    damaged_entries = [raw[: len(raw) // 2], header + b"\n" + json.dumps(no_findings).encode(), payload, b""]
    expected = ask(tree, tmp_path / "cold", question)
    prepares = []
    real_prepare = Analysis.prepare

    def counted(self: Analysis) -> None:
        prepares.append(1)
        real_prepare(self)

    monkeypatch.setattr(Analysis, "prepare", counted)
    for n, damaged in enumerate(damaged_entries):
        entry.write_bytes(damaged)
        for d in entries(cache, "layers"):
            d.unlink()
        assert ask(tree, cache, question) == expected
        assert len(prepares) == n + 1  # the damaged entry was not used: the loading phase ran
        assert entry.read_bytes() == raw  # removed and written again


def test_no_cache_reads_and_writes_nothing(tree: Path, tmp_path: Path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    answer = ask(tree, cache, QUESTIONS[1])
    expected = ask(tree, tmp_path / "cold", QUESTIONS[0])
    [entry] = entries(cache, "prepared")
    before = {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()}

    def unread(self: PreparedCache, key: str) -> None:
        raise AssertionError("--no-cache read a prepared entry")

    monkeypatch.setattr(PreparedCache, "get", unread)
    assert ask(tree, cache, QUESTIONS[0], "--no-cache") == expected
    assert {p: p.read_bytes() for p in cache.rglob("*") if p.is_file()} == before
    fresh = tmp_path / "never"
    assert ask(tree, fresh, QUESTIONS[1], "--no-cache") == answer
    assert not fresh.exists()


SETTING = Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3),))


class _Plans:
    """A query planning ``SETTING``; ``extra``: a file it loads too (as a plan reading other
    override code would)."""

    def __init__(self, extra: str | None = None) -> None:
        self.extra = extra
        self.plans: list[object] = []

    def ask(self, analysis: Analysis) -> None:
        self.plans = [analysis.get(DispatchProvider).plan(SETTING)]
        if self.extra is not None:
            analysis.index.load(self.extra)


def test_a_question_that_loads_other_files_starts_over_and_the_entry_learns_them(tmp_path: Path, monkeypatch) -> None:
    files = _files()
    files["vllm/unrelated.py"] = "def nothing_to_do_with_dispatch():\n    return 1\n"
    root = write_tree(tmp_path / "t", files)
    cache_root = tmp_path / "cache"
    prepares = []
    real_prepare = Analysis.prepare

    def counted(self: Analysis) -> None:
        prepares.append(1)
        real_prepare(self)

    monkeypatch.setattr(Analysis, "prepare", counted)

    def scan(query: _Plans) -> list[str]:
        s = run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(cache_root), 1, queries=[query],
                     prepared=PreparedCache(cache_root))
        return sorted(f.fingerprint for f in s.result.findings)

    plain, loading = _Plans(), _Plans("vllm/unrelated.py")
    cold = scan(plain)
    assert prepares == [1]
    assert scan(_Plans()) == cold and prepares == [1]  # the entry answers
    assert scan(loading) == cold and prepares == [1, 1]  # no findings for those files yet: from the start
    assert scan(_Plans("vllm/unrelated.py")) == cold and prepares == [1, 1]  # now recorded
    assert scan(_Plans()) == cold and prepares == [1, 1]  # the first kept beside it
    [entry] = entries(cache_root, "prepared")
    payload = json.loads(entry.read_bytes().partition(b"\n")[2])
    assert sorted(v["extra"] for v in payload["variants"]) == [[], ["vllm/unrelated.py"]]
    assert plain.plans == loading.plans


def test_a_tree_digest_reuses_blob_ids_of_unchanged_files_and_sees_an_edit(tmp_path: Path, monkeypatch) -> None:
    root = write_tree(tmp_path / "t", {"vllm/a.py": "x = 1\n", "vllm/b.py": "y = 2\n"})
    cache = tmp_path / "cache"
    monkeypatch.setattr(trees, "SETTLED_NS", 0)  # every file counts as settled
    from auditor.source import sha_memo

    monkeypatch.setattr(sha_memo, "SETTLED_NS", 0)
    first = tree_digest(DirectoryTree(root), cache)
    assert first == tree_digest(DirectoryTree(root))  # the same digest as without the memo
    opened: list[str] = []
    real_open = open

    def spy(file, *a, **k):  # type: ignore[no-untyped-def]
        opened.append(str(file))
        return real_open(file, *a, **k)

    monkeypatch.setattr("builtins.open", spy)
    assert tree_digest(DirectoryTree(root), cache) == first
    assert not [p for p in opened if p.endswith(".py")]  # nothing read again
    monkeypatch.setattr("builtins.open", real_open)
    (root / "vllm/a.py").write_text("x = 3\n")  # same size, new bytes
    edited = tree_digest(DirectoryTree(root), cache)
    assert edited != first and edited == tree_digest(DirectoryTree(root))
    [memo] = entries(cache, "tree-shas")
    memo.write_bytes(memo.read_bytes().replace(b'"vllm/b.py"', b'"vllm/a.py"'))  # edited: not trusted
    assert tree_digest(DirectoryTree(root), cache) == edited
    assert entries(cache, "tree-shas") == [memo]


def test_an_immutable_tree_takes_its_listing_and_blob_ids_from_the_memo(tmp_path: Path, monkeypatch) -> None:
    root = write_tree(tmp_path / "t", {"vllm/a.py": "x = 1\n", "vllm/b.py": "y = 2\n"})
    cache = tmp_path / "cache"
    from auditor.source import sha_memo

    monkeypatch.setattr(trees, "SETTLED_NS", 0)
    monkeypatch.setattr(sha_memo, "SETTLED_NS", 0)
    first = tree_digest(DirectoryTree(root, immutable=True), cache)
    assert first == tree_digest(DirectoryTree(root))

    def no_walk(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("an immutable tree was listed again")

    monkeypatch.setattr(trees.os, "walk", no_walk)
    again = DirectoryTree(root, immutable=True)
    assert tree_digest(again, cache) == first
    assert again.python_files() == ["vllm/__init__.py", "vllm/a.py", "vllm/b.py"]
    with pytest.raises(AssertionError):  # a directory tree is listed every time
        tree_digest(DirectoryTree(root), cache)
