"""What makes a new `layers` question cheaper, and that it never changes an answer: a plan
made while the index loads is not made again after the freeze when the index held the same
files throughout, and a directory tree reads a file's bytes once per command while the file
stays the same on disk (bench/before_after_s4_speed.md has the timings)."""

from __future__ import annotations

import os

from scan_helpers import write_tree

from auditor.analyses.dispatch import DispatchProvider, Setting
from auditor.common.config import Config
from auditor.engine.scan import run_scan
from auditor.facts.cache import FactsCache
from auditor.source import trees
from auditor.source.trees import DirectoryTree
from rules import all_rules
from trees import gate_tree

SETTING = Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3),))


def test_a_plan_is_made_again_only_when_the_index_loaded_a_file_since(tmp_path):
    files = gate_tree()
    files["vllm/unrelated.py"] = "def nothing_to_do_with_dispatch():\n    return 1\n"
    root = write_tree(tmp_path / "t", files)
    seen: dict[str, object] = {}

    class Asks:
        def ask(self, analysis):
            d = analysis.get(DispatchProvider)
            index = analysis.index
            assert "vllm/unrelated.py" not in index.facts
            d.plan(SETTING)  # may load the files the plan needs: then not kept
            seen["second"] = d.plan(SETTING)
            seen["third"] = d.plan(SETTING)
            index.load("vllm/unrelated.py")  # the index changed: the plan is made again
            seen["after_load"] = d.plan(SETTING)
            listed = Setting("v2", 3, architecture="DeepMTPModel", fields=(("num_nextn_predict_layers", 3), ("extra", [1, 2])))
            seen["unhashable"] = (d.plan(listed), d.plan(listed))  # a list value: planned, never kept

    scan = run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(None), 1, queries=[Asks()])
    assert scan.analysis is not None
    d = scan.analysis.get(DispatchProvider)
    assert seen["third"] is seen["second"]
    assert seen["after_load"] is not seen["third"] and seen["after_load"] == seen["third"]
    after_freeze = d.plan(SETTING)
    assert after_freeze is seen["after_load"]  # nothing loaded since: the same plan
    assert [s.verdict for s in after_freeze.steps] == ["threaded"] * 3
    a, b = seen["unhashable"]
    assert a == b and a is not b


def test_a_tree_keeps_bytes_of_settled_files_and_reads_a_replaced_file_again(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "t", {"vllm/a.py": "x = 1\n"})
    tree = DirectoryTree(root)
    monkeypatch.setattr(trees, "SETTLED_NS", 0)  # every file counts as settled
    assert tree.read("vllm/a.py") == b"x = 1\n"
    opened: list[str] = []
    real_open = open

    def counting_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(trees, "open", counting_open, raising=False)
    assert tree.read("vllm/a.py") == b"x = 1\n"
    assert opened == []  # kept: not opened again
    # Replaced by a file of the same size (another inode, as an editor or `fix` writes it).
    tmp = root / "vllm" / "a.py.new"
    tmp.write_bytes(b"x = 2\n")
    os.replace(tmp, root / "vllm" / "a.py")
    assert tree.read("vllm/a.py") == b"x = 2\n"
    assert len(opened) == 1
    assert tree.blob_sha("vllm/a.py") == trees.git_blob_sha(b"x = 2\n")


def test_a_file_changed_just_before_it_was_read_is_read_again(tmp_path, monkeypatch):
    """A rewrite in place within the file system's clock tick keeps inode, size and times:
    a file changed that recently is never kept (read again), as git treats a racily clean
    entry. The rewrite is simulated by handing the read the first stat again."""
    root = write_tree(tmp_path / "t", {"vllm/a.py": "x = 1\n"})
    path = str(root / "vllm" / "a.py")
    tree = DirectoryTree(root)
    first = os.lstat(path)
    real_lstat = os.lstat
    monkeypatch.setattr(os, "lstat", lambda p, *a, **k: first if str(p) == path else real_lstat(p, *a, **k))
    assert tree.read("vllm/a.py") == b"x = 1\n"
    with open(path, "r+b") as fh:  # same inode, same size; the stat the read sees is the same
        fh.write(b"x = 3\n")
    assert tree.read("vllm/a.py") == b"x = 3\n"
    # The same file, settled (changed long before it was read), is kept: the stat cannot tell.
    monkeypatch.setattr(trees, "SETTLED_NS", 0)
    assert tree.read("vllm/a.py") == b"x = 3\n"
    with open(path, "r+b") as fh:
        fh.write(b"x = 4\n")
    assert tree.read("vllm/a.py") == b"x = 3\n"


def test_a_tree_keeps_no_more_bytes_than_its_limit(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "t", {"vllm/a.py": "x = 1\n", "vllm/b.py": "y = 2\n"})
    tree = DirectoryTree(root)
    monkeypatch.setattr(trees, "SETTLED_NS", 0)
    monkeypatch.setattr(trees, "KEPT_BYTES", 6)  # room for one of the two files
    assert tree.read("vllm/a.py") == b"x = 1\n" and tree.read("vllm/b.py") == b"y = 2\n"
    assert sorted(tree._kept) == ["vllm/a.py"] and tree._kept_bytes == 6
    assert tree.read("vllm/b.py") == b"y = 2\n"


def test_a_plan_derives_its_draft_config_once_and_each_caller_gets_its_own_copy(tmp_path, monkeypatch):
    from auditor.analyses.dispatch.factory_runs import FactoryRuns

    files = gate_tree()
    files["vllm/unrelated.py"] = "X = 1\n"
    root = write_tree(tmp_path / "t", files)
    derived: list[Setting] = []
    real = FactoryRuns._draft_config

    def counted(self, setting):
        derived.append(setting)
        return real(self, setting)

    monkeypatch.setattr(FactoryRuns, "_draft_config", counted)
    seen: dict[str, object] = {}

    class Asks:
        def ask(self, analysis):
            runs = analysis.get(DispatchProvider).factory_runs
            runs.draft_config(SETTING)  # may load files: then not kept
            runs.draft_config(SETTING)  # loads nothing: kept
            before = len(derived)
            first, second = runs.draft_config(SETTING), runs.draft_config(SETTING)
            seen["kept"] = len(derived) - before
            first[2].append("a caller's own note")
            first[0].fields["num_nextn_predict_layers"] = 99
            seen["second"], seen["third"] = second, runs.draft_config(SETTING)
            analysis.index.load("vllm/unrelated.py")
            before = len(derived)
            runs.draft_config(SETTING)
            seen["after_load"] = len(derived) - before

    run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(None), 1, queries=[Asks()])
    assert seen["kept"] == 0  # answered from the memo
    second, third = seen["second"], seen["third"]
    assert "a caller's own note" not in second[2] and "a caller's own note" not in third[2]
    assert third[0].fields["num_nextn_predict_layers"] == 3
    assert seen["after_load"] == 1  # the index changed: derived again
