"""Robustness: hostile input, damaged caches, odd git repositories, a broken network.

For every case the scan finishes, the rest of the tree is analysed, the problem is listed
(text, json and sarif all carry it), the exit code is the documented one (0 clean, 1
findings, 2 error) and no traceback reaches the user. The CLI runs as a subprocess
(``python -m auditor.cli``) wherever the user-visible behaviour is the point.

Tests run as root in CI, and root reads a ``chmod 000`` file anyway: unreadable files and
directories are simulated with a FIFO (``lstat`` says it is not a regular file) and by
making ``open``/``os.scandir`` raise ``PermissionError`` (in-process with monkeypatch, and
in a CLI subprocess through a ``python -c`` wrapper that patches before ``main()``). A
read-only cache directory is simulated with a path under a regular file (every ``mkdir``
fails with ``ENOTDIR``, whoever runs it) and a full one by making writes raise ``ENOSPC``.
"""

from __future__ import annotations

import errno
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import unquote

import git
import pytest
from rules import all_rules
from scan_helpers import scan_tree, write_tree
from test_fetch import FakeIndex, closed_port, make_sdist
from test_scan_cli import BAD_WRAPPER, GOOD_WRAPPER, run_cli

import auditor.source.trees as source_mod
from auditor.facts.cache import FactsCache, content_key
from auditor.common.config import Config
from auditor.engine.scan import run_scan
from auditor.common.errors import AuditError, GitError
from auditor.facts.extract import FACTS_VERSION
from auditor.source.gittree import GitTree, NoVllmInTree
from auditor.output import render
from auditor.source.trees import DirectoryTree

WRAPPER_TEXT = BAD_WRAPPER["vllm/models/m_mtp.py"]
EXPECTED = ("MTP001", "vllm/models/m_mtp.py")  # the finding every hostile tree still yields


def findings(result) -> set[tuple[str, str]]:
    return {(f.rule, f.path) for f in result.findings}


def assert_listed_everywhere(result, path: str, kind: str) -> None:
    """The problem is in the result and in the text, json and sarif reports."""
    assert (path, kind) in {(p.path, p.kind) for p in result.problems}, result.problems
    text = render(result, "text")
    assert "Skipped files" in text and kind in text
    if "\n" not in path:
        assert path in text
    doc = json.loads(render(result, "json"))
    assert {"path": path, "kind": kind} in [{"path": p["path"], "kind": p["kind"]} for p in doc["problems"]]
    sarif = json.loads(render(result, "sarif"))
    notes = sarif["runs"][0]["invocations"][0]["toolExecutionNotifications"]
    uris = {
        unquote(loc["physicalLocation"]["artifactLocation"]["uri"]) for n in notes for loc in n.get("locations", [])
    }
    assert path in uris, uris
    assert any(n["descriptor"]["id"] == kind for n in notes)


def assert_one_line_error(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mtp-audit: error: "), r.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def cache_files(cache: Path) -> list[str]:
    if not cache.exists():
        return []
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if not p.is_dir())


# --------------------------------------------------------------------------- hostile files

LATIN1_WRAPPER = b"# -*- coding: latin-1 -*-\n# caf\xe9\n" + WRAPPER_TEXT.encode()
TEN_MB = b"spec_step_idx = 0\n" + b"x = 1\n" * (10 * 1024 * 1024 // 6)


def _deep(kind: str) -> bytes:
    n = 100_000
    body = {
        "parens": "(" * 300 + "1" + ")" * 300,
        "binop": "+".join(["a"] * n),
        "attr": "a" + ".b" * n,
        "unary": "-" * n + "1",
        "ifexp": "a if b else " * n + "c",
    }[kind]
    return f"spec_step_idx = {body}\n".encode()


# name -> (files to add to the BAD_WRAPPER tree, path of the problem, kind) ; kind None: analysed, not listed
HOSTILE = {
    "syntax-error": ({"vllm/broken.py": b"def f(:\n    spec_step_idx\n"}, "vllm/broken.py", "parse-error"),
    "python2": ({"vllm/py2.py": b"print 'spec_step_idx'\nexec 'x = 1'\n"}, "vllm/py2.py", "parse-error"),
    "tab-error": ({"vllm/tabs.py": b"if x:\n\tspec_step_idx = 1\n        y = 2\n"}, "vllm/tabs.py", "parse-error"),
    "nul-bytes": ({"vllm/nul.py": b"spec_step_idx = 1\0\n"}, "vllm/nul.py", "decode-error"),
    "not-utf8-no-cookie": ({"vllm/l1.py": b"spec_step_idx = '\xe9'\n"}, "vllm/l1.py", "decode-error"),
    "unknown-coding-cookie": ({"vllm/k.py": b"# -*- coding: klingon -*-\nspec_step_idx = 1\n"}, "vllm/k.py", "decode-error"),
    "bom-and-latin1-cookie": (
        {"vllm/bom.py": b"\xef\xbb\xbf# coding: latin-1\nspec_step_idx = 1\n"}, "vllm/bom.py", "decode-error"),
    "ten-megabytes": ({"vllm/generated.py": TEN_MB}, "vllm/generated.py", "too-large"),
    "deep-parens": ({"vllm/deep.py": _deep("parens")}, "vllm/deep.py", "parse-error"),
    "deep-binop": ({"vllm/deep.py": _deep("binop")}, "vllm/deep.py", "parse-error"),
    "deep-attribute": ({"vllm/deep.py": _deep("attr")}, "vllm/deep.py", "parse-error"),
    "deep-unary": ({"vllm/deep.py": _deep("unary")}, "vllm/deep.py", "parse-error"),
    "deep-ifexp": ({"vllm/deep.py": _deep("ifexp")}, "vllm/deep.py", "parse-error"),
    # analysed, not listed
    "empty-file": ({"vllm/empty.py": b""}, None, None),
    "comment-only-seed": ({"vllm/c.py": b"# spec_step_idx\n"}, None, None),
    "latin1-with-cookie": ({"vllm/models/latin_mtp.py": LATIN1_WRAPPER}, None, None),
    "utf8-bom": ({"vllm/models/bom_mtp.py": b"\xef\xbb\xbf" + WRAPPER_TEXT.encode()}, None, None),
    "crlf": ({"vllm/models/crlf_mtp.py": WRAPPER_TEXT.replace("\n", "\r\n").encode()}, None, None),
    "odd-file-names": ({"vllm/models/my-model mtp.py": WRAPPER_TEXT.encode()}, None, None),
}
ANALYSED = {  # cases that must add a finding of their own: the file was really analysed
    "latin1-with-cookie": "vllm/models/latin_mtp.py",
    "utf8-bom": "vllm/models/bom_mtp.py",
    "crlf": "vllm/models/crlf_mtp.py",
    "odd-file-names": "vllm/models/my-model mtp.py",
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_file(tmp_path, case):
    extra, path, kind = HOSTILE[case]
    root = write_tree(tmp_path / "t", {**BAD_WRAPPER, **extra})
    result = scan_tree(root).result
    assert EXPECTED in findings(result)  # the rest of the tree is analysed
    if kind is not None:
        assert_listed_everywhere(result, path, kind)
    else:
        assert result.problems == []
    if case in ANALYSED:
        assert ("MTP001", ANALYSED[case]) in findings(result)
    r = run_cli("scan", str(root), "-q", "-f", "json", "--no-cache")
    assert r.returncode == 1, r.stderr
    assert r.stderr == ""
    doc = json.loads(r.stdout)
    assert doc["problems"] == [p.to_json() for p in result.problems]
    assert {(f["rule"], f["path"]) for f in doc["findings"]} == findings(result)


def _special_entries(root: Path, outside: Path) -> dict[str, str | None]:
    """Entries that write_tree cannot make; returns path -> expected problem kind (None: not listed)."""
    vllm = root / "vllm"
    os.mkfifo(vllm / "fifo.py")  # opening it would block forever: it is never opened
    (vllm / "pkg.py").mkdir()  # a directory named like a module: just a directory
    (vllm / "pkg.py" / "inner.py").write_text("# spec_step_idx\nx = 1\n")
    os.symlink("loop", vllm / "loop")  # a symlink loop, not named .py
    os.symlink("loop2.py", vllm / "loop1.py")
    os.symlink("loop1.py", vllm / "loop2.py")
    os.symlink(outside / "evil_mtp.py", vllm / "evil_mtp.py")  # file outside the tree
    os.symlink(outside, vllm / "ext")  # directory outside the tree
    os.symlink("missing_dir", vllm / "dangling")
    os.symlink(vllm / "models", vllm / "models_again")  # inside the tree, still not followed
    (vllm / os.fsdecode(b"bad\xff.py")).write_text(WRAPPER_TEXT)  # a name that is not UTF-8
    return {
        "vllm/fifo.py": "unreadable",
        "vllm/pkg.py": None,
        "vllm/loop": "symlink",
        "vllm/loop1.py": "symlink",
        "vllm/loop2.py": "symlink",
        "vllm/evil_mtp.py": "symlink",
        "vllm/ext": "symlink",
        "vllm/dangling": "symlink",
        "vllm/models_again": "symlink",
        "vllm/bad\ufffd.py": "unreadable",
    }


def test_special_entries_symlink_loops_fifo_bad_names(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil_mtp.py").write_text(WRAPPER_TEXT)
    root = write_tree(tmp_path / "t", BAD_WRAPPER)
    expected = _special_entries(root, outside)
    result = scan_tree(root).result
    assert findings(result) == {EXPECTED}  # nothing from outside the tree
    for path, kind in expected.items():
        if kind is None:
            assert path not in {p.path for p in result.problems}
        else:
            assert_listed_everywhere(result, path, kind)
    assert "vllm/pkg.py/inner.py" in DirectoryTree(root).python_files()
    for fmt in ("text", "json", "sarif", "github"):
        r = run_cli("scan", str(root), "-q", "-f", fmt, "--no-cache")
        assert r.returncode == 1 and r.stderr == "", (fmt, r.stderr)
    doc = json.loads(run_cli("scan", str(root), "-q", "-f", "json", "--workers", "2").stdout)
    assert {(p["path"], p["kind"]) for p in doc["problems"]} == {(p, k) for p, k in expected.items() if k}


UNREADABLE_WRAPPER = """
import errno, os, sys
import auditor.source.trees as s
real_open, real_scandir = open, os.scandir
def deny(path, *a, **k):
    if str(path).endswith(("secret.py",)):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))
    return real_open(path, *a, **k)
def scandir(path="."):
    if str(path).endswith("/locked"):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))
    return real_scandir(path)
s.open = deny
os.scandir = scandir
sys.argv = ["mtp-audit", *sys.argv[1:]]
from auditor.cli import main
main()
"""


def test_unreadable_file_and_directory(tmp_path, monkeypatch):
    """Root reads chmod-000 files, so unreadability is simulated: ``open`` and ``os.scandir`` raise EACCES."""
    root = write_tree(tmp_path / "t", {
        **BAD_WRAPPER,
        "vllm/secret.py": "spec_step_idx = 1\n",
        "vllm/locked/hidden_mtp.py": WRAPPER_TEXT,
    })
    r = subprocess.run([sys.executable, "-c", UNREADABLE_WRAPPER, "scan", str(root), "-q", "-f", "json", "--no-cache"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and r.stderr == "", r.stderr
    doc = json.loads(r.stdout)
    problems = {(p["path"], p["kind"]) for p in doc["problems"]}
    assert problems == {("vllm/secret.py", "unreadable"), ("vllm/locked", "unreadable")}
    assert {(f["rule"], f["path"]) for f in doc["findings"]} == {EXPECTED}
    # in-process too, so that every format can be checked
    real_open, real_scandir = open, os.scandir

    def deny(path, *a, **k):
        if str(path).endswith("secret.py"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *a, **k)

    def scandir(path="."):
        if str(path).endswith("/locked"):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(source_mod, "open", deny, raising=False)
    monkeypatch.setattr(os, "scandir", scandir)
    result = scan_tree(root).result
    assert findings(result) == {EXPECTED}
    assert_listed_everywhere(result, "vllm/secret.py", "unreadable")
    assert_listed_everywhere(result, "vllm/locked", "unreadable")


def test_file_vanishing_between_listing_and_reading(tmp_path):
    root = write_tree(tmp_path / "t", {**BAD_WRAPPER, "vllm/gone.py": "spec_step_idx = 1\n"})
    tree = DirectoryTree(root)
    tree.python_files()
    (root / "vllm" / "gone.py").unlink()
    result = run_scan(tree, Config(), all_rules(), FactsCache(None), 1).result
    assert findings(result) == {EXPECTED}
    assert_listed_everywhere(result, "vllm/gone.py", "unreadable")


def test_many_hostile_files_in_parallel_workers(tmp_path):
    """More than 8 files to parse goes through the process pool: same result as one worker."""
    files = dict(BAD_WRAPPER)
    for name, (extra, _, _) in HOSTILE.items():
        if name != "ten-megabytes":
            files.update({k.replace(".py", f"_{name.replace('-', '_')}.py"): v for k, v in extra.items()})
    root = write_tree(tmp_path / "t", files)
    one = run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(None), 1)
    two = run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(None), 2)
    assert one.timing["files_parsed"] > 8
    assert one.result.to_json() == two.result.to_json()
    assert len(one.result.problems) >= 10


# --------------------------------------------------------------------------- targets


@pytest.mark.parametrize("case", ["no-vllm", "vllm-is-a-file", "fifo", "dangling-symlink", "package-without-init"])
def test_bad_targets(tmp_path, case):
    t = tmp_path / "t"
    t.mkdir()
    (t / "setup.py").write_text("spec_step_idx = 1\n")
    if case == "no-vllm":
        (t / "src" / "vllm_like").mkdir(parents=True)
        target, needle = t, "no vllm/ package"
    elif case == "vllm-is-a-file":
        (t / "vllm").write_text("x = 1\n")
        target, needle = t, "no vllm/ package"
    elif case == "fifo":
        os.mkfifo(t / "pipe")
        target, needle = t / "pipe", "got a file"
    elif case == "dangling-symlink":
        os.symlink(t / "missing", t / "link")
        target, needle = t / "link", "path does not exist"
    else:
        (t / "vllm").mkdir()
        target, needle = t / "vllm", "no vllm/ package"
    assert_one_line_error(run_cli("scan", str(target), "-q"), needle)


def test_empty_package_is_clean(tmp_path):
    (tmp_path / "vllm").mkdir()
    r = run_cli("scan", str(tmp_path), "--no-cache")
    assert r.returncode == 0 and "0 findings" in r.stdout and "Traceback" not in r.stderr


def test_unwritable_output_file(tmp_path):
    root = write_tree(tmp_path / "t", BAD_WRAPPER)
    assert_one_line_error(run_cli("scan", str(root), "-q", "-o", str(tmp_path / "no" / "such" / "dir" / "r.json")),
                          "cannot write")


# --------------------------------------------------------------------------- caches


def _cold(root: Path) -> dict:
    return run_scan(DirectoryTree(root), Config(), all_rules(), FactsCache(None), 1).result.to_json()


CORRUPTIONS = {
    "truncated": lambda p, d: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
    "random-bytes": lambda p, d: p.write_bytes(os.urandom(256)),
    "empty": lambda p, d: p.write_bytes(b""),
    "json-null": lambda p, d: p.write_text("null"),
    "deeply-nested-json": lambda p, d: p.write_text("[" * 100_000 + "]" * 100_000),
    "a-directory": lambda p, d: (p.unlink(), p.mkdir()),
    "other-tool-version": lambda p, d: p.write_text(json.dumps({**d, "tool": "0.0.0-other"})),
    "other-facts-version": lambda p, d: p.write_text(json.dumps({**d, "facts": {**d["facts"], "version": FACTS_VERSION - 1}})),
    "wrong-key": lambda p, d: p.write_text(json.dumps({**d, "key": "0" * 64})),
    # valid JSON, right key and versions, another shape: a build that changed the facts
    # without bumping FACTS_VERSION, or a hand-edited entry
    "missing-field": lambda p, d: p.write_text(json.dumps({**d, "facts": {"version": FACTS_VERSION}})),
    "wrong-type": lambda p, d: p.write_text(json.dumps({**d, "facts": {**d["facts"], "classes": []}})),
    "wrong-inner-type": lambda p, d: p.write_text(json.dumps(
        {**d, "facts": {**d["facts"], "classes": {k: 1 for k in d["facts"]["classes"]} or {"X": 1}}})),
    "bad-import-entry": lambda p, d: p.write_text(json.dumps({**d, "facts": {**d["facts"], "imports": [[1]]}})),
}


@pytest.mark.parametrize("how", sorted(CORRUPTIONS))
def test_damaged_facts_cache_is_a_miss(tmp_path, how):
    root = write_tree(tmp_path / "t", {**BAD_WRAPPER, "vllm/broken.py": "def f(:\n  spec_step_idx\n"})
    cache = tmp_path / "cache"
    cold = _cold(root)
    assert scan_tree(root, cache_dir=cache).result.to_json() == cold
    entries = sorted((cache / "facts").rglob("*.json"))
    assert entries
    for p in entries:
        CORRUPTIONS[how](p, json.loads(p.read_text()))
    fc = FactsCache(cache)
    again = run_scan(DirectoryTree(root), Config(), all_rules(), fc, 1)
    assert again.result.to_json() == cold
    assert fc.hits == 0
    if how != "a-directory":  # rewritten: the next scan hits
        fc = FactsCache(cache)
        assert run_scan(DirectoryTree(root), Config(), all_rules(), fc, 1).result.to_json() == cold
        assert fc.hits == len(entries)


def test_damaged_result_cache_via_cli(tmp_path):
    root = write_tree(tmp_path / "t", BAD_WRAPPER)
    cache = tmp_path / "cache"
    cold = run_cli("scan", str(root), "-q", "-f", "json", "--no-cache")
    warm = run_cli("scan", str(root), "-q", "-f", "json", "--cache-dir", str(cache))
    assert cold.stdout == warm.stdout and warm.returncode == 1
    results = sorted((cache / "results").rglob("*.json"))
    assert results, cache_files(cache)
    for how in ("{broken", "null", json.dumps({"key": "x"}), json.dumps({"key": results[0].stem, "result": {"root": 1}})):
        for p in results:
            p.write_text(how)
        r = run_cli("scan", str(root), "-q", "-f", "json", "--cache-dir", str(cache))
        assert (r.returncode, r.stdout, r.stderr) == (1, cold.stdout, ""), how


def test_cache_dir_under_a_regular_file(tmp_path):
    """Unwritable for root too: every mkdir below a regular file fails with ENOTDIR."""
    root = write_tree(tmp_path / "t", BAD_WRAPPER)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a directory")
    cold = run_cli("scan", str(root), "-q", "-f", "json", "--no-cache")
    for cache in (blocker, blocker / "sub"):
        r = run_cli("scan", str(root), "-q", "-f", "json", "--cache-dir", str(cache))
        assert (r.returncode, r.stdout, r.stderr) == (1, cold.stdout, "")
    fc = FactsCache(blocker / "sub")
    assert run_scan(DirectoryTree(root), Config(), all_rules(), fc, 1).result.to_json() == _cold(root)
    assert fc.write_failures > 0 and fc.hits == 0
    assert blocker.read_text() == "a file, not a directory"


def test_read_only_cache_dir(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "t", BAD_WRAPPER)

    def refuse(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    fc = FactsCache(tmp_path / "cache")
    assert run_scan(DirectoryTree(root), Config(), all_rules(), fc, 1).result.to_json() == _cold(root)
    assert fc.write_failures > 0
    assert not list((tmp_path / "cache").rglob("*.json"))


def test_full_cache_dir(tmp_path, monkeypatch):
    root = write_tree(tmp_path / "t", BAD_WRAPPER)
    real_fdopen = os.fdopen

    class Full(io.RawIOBase):
        def __init__(self, fd):
            self.inner = real_fdopen(fd, "wb")

        def write(self, b):
            raise OSError(errno.ENOSPC, "No space left on device")

        def close(self):
            self.inner.close()
            super().close()

    monkeypatch.setattr(os, "fdopen", lambda fd, mode="r", *a, **k: Full(fd))
    fc = FactsCache(tmp_path / "cache")
    assert run_scan(DirectoryTree(root), Config(), all_rules(), fc, 1).result.to_json() == _cold(root)
    assert fc.write_failures > 0
    assert cache_files(tmp_path / "cache") == []  # no half-written temp file left


def test_two_scans_share_one_cache_concurrently(tmp_path):
    files = dict(BAD_WRAPPER)
    for i in range(30):  # enough files for the process pool and for the writers to overlap
        files[f"vllm/models/m{i}_mtp.py"] = WRAPPER_TEXT.replace("WrapperMTP", f"Wrapper{i}MTP")
    root = write_tree(tmp_path / "t", files)
    cache = tmp_path / "cache"
    cold = run_cli("scan", str(root), "-q", "-f", "json", "--no-cache")
    assert cold.returncode == 1
    cmd = [sys.executable, "-m", "auditor.cli", "scan", str(root), "-q", "-f", "json", "--workers", "2",
           "--cache-dir", str(cache)]
    for _ in range(2):
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
        for out, err, rc in outs:
            assert (rc, out, err) == (1, cold.stdout, "")
    leftovers = [p for p in cache.rglob("*") if p.name.startswith(".tmp-")]
    assert leftovers == []
    for p in cache.rglob("*.json"):
        json.loads(p.read_bytes())


def test_identical_files_at_two_paths_share_no_cache_entry(tmp_path):
    """Facts depend on the path (relative imports): a cache warmed by one tree must not
    change the findings of another tree holding the same bytes elsewhere (regression)."""
    wrapper = (
        "import torch.nn as nn\nfrom .pred import Predictor\n\n\nclass WrapperMTP(nn.Module):\n"
        "    def __init__(self, config):\n        super().__init__()\n        self.model = Predictor(config)\n\n"
        "    def forward(self, input_ids, positions, hidden_states, **kwargs):  # spec_step_idx in kwargs\n"
        "        return self.model(input_ids, positions, hidden_states)\n"
    )
    from rules._examples import PREDICTOR

    a = write_tree(tmp_path / "a", {"vllm/a/m_mtp.py": wrapper, "vllm/a/pred.py": PREDICTOR})
    b = write_tree(tmp_path / "b", {"vllm/b/m_mtp.py": wrapper, "vllm/b/pred.py": PREDICTOR})
    both = write_tree(tmp_path / "both", {"vllm/a/m_mtp.py": wrapper, "vllm/a/pred.py": PREDICTOR,
                                          "vllm/b/m_mtp.py": wrapper, "vllm/b/pred.py": PREDICTOR + "\n# b\n"})
    cache = tmp_path / "cache"
    for tree in (a, b, both):
        cold = _cold(tree)
        assert cold["findings"]
        scan_tree(tree, cache_dir=cache)
        assert scan_tree(tree, cache_dir=cache).result.to_json() == cold
    assert content_key(b"x", "vllm/a/m.py") != content_key(b"x", "vllm/b/m.py")


# --------------------------------------------------------------------------- git

ACTOR = git.Actor("Test", "test@example.invalid")


def _commit(repo: git.Repo, files: dict[str, str], message: str) -> git.Commit:
    root = Path(repo.working_tree_dir)
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        repo.index.add([rel])
    return repo.index.commit(message, author=ACTOR, committer=ACTOR)


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in root.rglob("*") if p.is_file() and not p.is_symlink()}


def _git_scan(repo, rev: str) -> dict:
    with GitTree(repo, rev) as tree:
        doc = run_scan(tree, Config(), all_rules(), FactsCache(None), 1).result.to_json()
    doc.pop("root")
    return doc


def _dir_scan(root: Path) -> dict:
    doc = _cold(root)
    doc.pop("root")
    return doc


@pytest.fixture
def vrepo(tmp_path) -> git.Repo:
    r = git.Repo.init(tmp_path / "repo", initial_branch="main")
    _commit(r, {"README.md": "no vllm yet\n"}, "before vllm")
    r.create_tag("v0.0.1")  # a tag at a tree without vllm/
    _commit(r, {**BAD_WRAPPER, "vllm/__init__.py": "", "vllm/models/__init__.py": ""}, "add vllm")
    r.create_tag("v0.1.0")
    return r


def test_git_scan_never_touches_a_dirty_work_tree(vrepo, tmp_path):
    root = Path(vrepo.working_tree_dir)
    (root / "vllm/models/m_mtp.py").write_text(GOOD_WRAPPER["vllm/models/m_mtp.py"])  # uncommitted fix
    (root / "vllm/untracked_mtp.py").write_text(WRAPPER_TEXT)  # untracked
    (root / "vllm/__init__.py").write_text("# staged\n")
    vrepo.index.add(["vllm/__init__.py"])
    status = vrepo.git.status("--porcelain")
    index_bytes = (Path(vrepo.git_dir) / "index").read_bytes()
    before = _snapshot(root)
    doc = _git_scan(vrepo, "HEAD")
    assert {(f["rule"], f["path"]) for f in doc["findings"]} == {EXPECTED}  # the committed, unfixed code
    assert _git_scan(vrepo, "v0.1.0") == doc
    assert _snapshot(root) == before
    assert (Path(vrepo.git_dir) / "index").read_bytes() == index_bytes
    assert vrepo.git.status("--porcelain") == status
    # the work tree itself, scanned as a directory, shows the uncommitted fix and the untracked file
    assert {(f["rule"], f["path"]) for f in _dir_scan(root)["findings"]} == {("MTP001", "vllm/untracked_mtp.py")}


def test_git_scan_equals_directory_scan(vrepo, tmp_path):
    files = {**BAD_WRAPPER, **{k: v.decode() for k, v in HOSTILE["python2"][0].items()}}
    _commit(vrepo, files, "more")
    plain = write_tree(tmp_path / "plain", {**files, "vllm/__init__.py": "", "vllm/models/__init__.py": ""})
    assert _git_scan(vrepo, "HEAD") == _dir_scan(plain)


def test_shallow_clone_scans_like_the_full_repository(vrepo, tmp_path):
    _commit(vrepo, {"vllm/models/other_mtp.py": WRAPPER_TEXT}, "second")
    shallow = git.Repo.clone_from(f"file://{vrepo.working_tree_dir}", tmp_path / "shallow", depth=1)
    assert (Path(shallow.git_dir) / "shallow").is_file()
    assert _git_scan(shallow, "HEAD") == _git_scan(vrepo, "HEAD")


@pytest.mark.parametrize("rev, needle", [
    ("v0.0.1", "has no vllm/ directory"),  # a tag pointing at a tree without vllm/
    ("tree-tag", "unknown revision"),  # a tag pointing at a tree object, not a commit
    ("v9.9.9", "unknown revision"),
    ("HEAD~5", "unknown revision"),
    ("main..v0.0.1", "unknown revision"),
    ("--output=/tmp/x", "bad revision"),
])
def test_git_bad_revisions_are_one_line_errors(vrepo, rev, needle):
    vrepo.create_tag("tree-tag", ref=vrepo.head.commit.tree)
    with pytest.raises(GitError) as err:
        GitTree(vrepo, rev)
    assert needle in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, AuditError)  # the CLI's one-line, exit 2 path
    assert not Path("/tmp/x").exists() or rev != "--output=/tmp/x"
    if rev == "v0.0.1":
        assert isinstance(err.value, NoVllmInTree)


def test_git_empty_repository_and_not_a_repository(tmp_path):
    git.Repo.init(tmp_path / "empty")
    for path, needle in ((tmp_path / "empty", "is empty"), (tmp_path, "not a git repository")):
        with pytest.raises(GitError, match=needle):
            GitTree(path, "HEAD")


# --------------------------------------------------------------------------- network


@pytest.fixture
def index():
    idx = FakeIndex()
    yield idx
    idx.close()


def _release(index_url: str, cache: Path, version: str, *extra: str) -> subprocess.CompletedProcess:
    return run_cli("scan", "--release", version, "-q", "--cache-dir", str(cache), *extra,
                   env={"PIP_INDEX_URL": index_url, "MTP_AUDIT_CACHE_DIR": str(cache)})


SDIST_FILES = {
    "vllm/__init__.py": b"",
    "vllm/models/__init__.py": b"",
    "vllm/models/m_mtp.py": WRAPPER_TEXT.encode(),
    "PKG-INFO": b"Metadata-Version: 2.1\nName: vllm\nVersion: 0.1.0\n",
}


def test_release_scan_through_fake_index_then_offline(index, tmp_path):
    cache = tmp_path / "cache"
    index.add_release("0.1.0", make_sdist("0.1.0", SDIST_FILES))
    r = _release(index.index, cache, "0.1.0", "-f", "json")
    assert r.returncode == 1, r.stderr
    assert [(f["rule"], f["path"]) for f in json.loads(r.stdout)["findings"]] == [EXPECTED]
    offline = _release(f"http://127.0.0.1:{closed_port()}/simple", cache, "0.1.0", "-f", "json")
    assert (offline.returncode, offline.stdout) == (1, r.stdout)


def _assert_fetch_failed(r, cache: Path, *needles: str) -> None:
    assert_one_line_error(r, *needles)
    assert [f for f in cache_files(cache) if not f.startswith(("facts/", "results/"))] == []
    assert not [f for f in cache_files(cache) if ".tmp" in f or ".part" in f]


def test_release_unknown_version(index, tmp_path):
    for v in ("0.1.0", "0.2.0"):
        index.add_release(v, make_sdist(v, {**SDIST_FILES, "PKG-INFO": b"x"}))
    cache = tmp_path / "cache"
    _assert_fetch_failed(_release(index.index, cache, "0.1.5"), cache, "0.1.5 is not on", "0.1.0", "0.2.0", index.index)


def test_release_no_network(tmp_path):
    cache = tmp_path / "cache"
    url = f"http://127.0.0.1:{closed_port()}/simple"
    _assert_fetch_failed(_release(url, cache, "0.1.0"), cache, "cannot reach package index", url)


@pytest.mark.parametrize("ctype, body", [
    ("application/vnd.pypi.simple.v1+json", b"{garbage"),
    ("application/vnd.pypi.simple.v1+json", b'{"files": "nope"}'),
    ("text/html", b"\x00\xff garbage"),
    ("text/html", b"<html>" * 1000),
])
def test_release_index_answers_garbage(index, tmp_path, ctype, body):
    index.routes["/simple/vllm/"] = (200, ctype, body)
    cache = tmp_path / "cache"
    _assert_fetch_failed(_release(index.index, cache, "0.1.0"), cache, index.index)


def test_release_wrong_sha256(index, tmp_path):
    index.add_release("0.1.0", make_sdist("0.1.0", SDIST_FILES), sha="ab" * 32)
    cache = tmp_path / "cache"
    _assert_fetch_failed(_release(index.index, cache, "0.1.0"), cache, "sha256 mismatch")


def test_release_garbage_archive_with_right_sha256(index, tmp_path):
    index.add_release("0.1.0", os.urandom(4096))
    cache = tmp_path / "cache"
    _assert_fetch_failed(_release(index.index, cache, "0.1.0"), cache, "cannot unpack")
