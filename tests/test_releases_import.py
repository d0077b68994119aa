"""releases_import: a bare git repository with one tagged commit per release sdist."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import git
import pytest
import typer
from typer.testing import CliRunner

from auditor.common.errors import AuditError, FetchError, GitError
from auditor.source.fetch import COMPLETE_MARKER, METADATA_FILE
from auditor.source.gittree import GitTree, list_release_tags
from auditor.cli.releases import import_command
from auditor.source.releases import import_releases, run_import


def fake_release(cache: Path, version: str, body: str = "", upload: str | None = "2025-01-02T03:04:05Z") -> Path:
    """A release directory as fetch_release leaves it, so no network is needed."""
    root = cache / "releases" / f"vllm-{version}"
    (root / "vllm" / "model_executor" / "models").mkdir(parents=True)
    (root / "vllm" / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (root / "vllm" / "model_executor" / "models" / "deepseek_mtp.py").write_text(body or "class DeepSeekMTP:\n    pass\n")
    (root / "vllm" / "model_executor" / "models" / "config.json").write_text("{}\n")
    (root / "vllm" / "__pycache__").mkdir()
    (root / "vllm" / "__pycache__" / "x.py").write_text("")
    (root / "vllm" / "alias.py").symlink_to("__init__.py")
    (root / "csrc").mkdir()
    (root / "csrc" / "kernel.cu").write_text("// big\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_a.py").write_text("")
    (root / "PKG-INFO").write_text(f"Name: vllm\nVersion: {version}\n")
    (root / "setup.py").write_text("# setup\n")
    meta = {"filename": f"vllm-{version}.tar.gz", "sha256": "ab" * 32, "version": version}
    if upload:
        meta["upload_time"] = upload
    (root / METADATA_FILE).write_text(json.dumps(meta))
    (root / COMPLETE_MARKER).write_text("ok\n")
    return root


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    c = tmp_path / "cache"
    for v in ("0.9.2", "0.10.0", "0.10.1", "0.11.0"):
        fake_release(c, v, body=f"class DeepSeekMTP:\n    version = {v!r}\n")
    # any attempt to use the network fails loudly
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    return c


def log(repo_dir: Path) -> list[str]:
    return git.Repo(repo_dir).git.log("--format=%s", "main").splitlines()


def test_import_creates_tagged_linear_history(cache, tmp_path):
    into = tmp_path / "releases.git"
    created = import_releases(["0.10.0", "v0.9.2"], into, cache_dir=cache, progress=False)
    assert created == ["v0.9.2", "v0.10.0"]
    repo = git.Repo(into)
    assert repo.bare
    assert log(into) == ["vLLM 0.10.0", "vLLM 0.9.2"]
    assert list_release_tags(into) == ["v0.9.2", "v0.10.0"]
    head = repo.commit("v0.10.0")
    assert [p.hexsha for p in head.parents] == [repo.commit("v0.9.2").hexsha]
    assert head.author.name == head.committer.name == "mtp-audit release import"
    assert head.authored_datetime.isoformat() == "2025-01-02T03:04:05+00:00"
    assert "Sdist-SHA256: " + "ab" * 32 in head.message
    files = sorted(repo.git.ls_tree("-r", "--name-only", "v0.10.0").splitlines())
    assert files == [
        "PKG-INFO",
        "setup.py",
        "vllm/__init__.py",
        "vllm/model_executor/models/deepseek_mtp.py",
    ]
    tree = GitTree(into, "v0.9.2")
    assert tree.read("vllm/model_executor/models/deepseek_mtp.py") == b"class DeepSeekMTP:\n    version = '0.9.2'\n"
    tree.close()
    assert subprocess.run(["git", "fsck", "--strict"], cwd=into, capture_output=True).returncode == 0


def test_import_is_deterministic(cache, tmp_path):
    a = run_import(["0.9.2", "0.10.0"], tmp_path / "a", cache_dir=cache, progress=False)
    b = run_import(["0.10.0", "0.9.2"], tmp_path / "b", cache_dir=cache, progress=False)
    assert a.commits == b.commits and len(a.commits) == 2


def test_existing_tags_are_skipped_and_older_versions_appended(cache, tmp_path):
    into = tmp_path / "r"
    first = run_import(["0.10.0"], into, cache_dir=cache, progress=False)
    tip = first.commits["v0.10.0"]
    again = run_import(["0.10.0", "0.11.0", "0.9.2"], into, cache_dir=cache, progress=False)
    assert again.skipped == ["v0.10.0"]
    assert again.created == ["v0.9.2", "v0.11.0"]
    repo = git.Repo(into)
    assert repo.commit("v0.10.0").hexsha == tip  # never rewritten
    assert log(into) == ["vLLM 0.11.0", "vLLM 0.9.2", "vLLM 0.10.0"]  # import order
    assert list_release_tags(into) == ["v0.9.2", "v0.10.0", "v0.11.0"]  # version order
    assert import_releases(["0.9.2"], into, cache_dir=cache, progress=False) == []


def test_date_falls_back_without_upload_time(tmp_path, monkeypatch):
    cache = tmp_path / "c"
    fake_release(cache, "0.1.0", upload=None)
    into = tmp_path / "r"
    run_import(["0.1.0"], into, cache_dir=cache, progress=False)
    when = git.Repo(into).commit("v0.1.0").authored_date
    assert when > 946684800


def test_refuses_foreign_directories(cache, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine\n")
    with pytest.raises(GitError, match="not empty and not a releases repository"):
        import_releases(["0.10.0"], plain, cache_dir=cache, progress=False)
    assert sorted(p.name for p in plain.iterdir()) == ["notes.txt"]

    foreign = git.Repo.init(tmp_path / "foreign")
    with pytest.raises(GitError, match="not made by mtp-audit"):
        import_releases(["0.10.0"], Path(foreign.working_tree_dir), cache_dir=cache, progress=False)
    assert not list_release_tags(foreign.working_tree_dir)

    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(GitError, match="is a file"):
        import_releases(["0.10.0"], afile, cache_dir=cache, progress=False)


def test_empty_directory_is_accepted(cache, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert import_releases(["0.10.0"], empty, cache_dir=cache, progress=False) == ["v0.10.0"]


def test_bad_version_leaves_nothing(cache, tmp_path):
    into = tmp_path / "r"
    with pytest.raises(FetchError, match="not a version number"):
        import_releases(["0.10.0", "banana"], into, cache_dir=cache, progress=False)
    with pytest.raises(FetchError, match="cannot reach package index"):
        import_releases(["0.10.0", "0.12.0"], into, cache_dir=cache, progress=False)
    assert not into.exists()
    run_import(["0.10.0"], into, cache_dir=cache, progress=False)
    with pytest.raises(FetchError):
        import_releases(["0.11.0", "0.12.0"], into, cache_dir=cache, progress=False)
    assert list_release_tags(into) == ["v0.10.0"]


def test_import_command(cache, tmp_path):
    app = typer.Typer()
    app.command()(import_command)
    into = tmp_path / "cli"
    runner = CliRunner()
    res = runner.invoke(app, ["0.9.2", "0.10.0", "--into", str(into), "--cache-dir", str(cache)])
    assert res.exit_code == 0, res.output
    assert "created v0.9.2" in res.output and "2 created, 0 skipped" in res.output
    # not a terminal: a line per phase on stderr (the cache already holds both releases)
    assert "mtp-audit: releases import: fetching 0.9.2 (1/2)" in res.stderr
    assert "mtp-audit: releases import: committing v0.10.0" in res.stderr
    res = runner.invoke(app, ["0.10", "--into", str(into), "--cache-dir", str(cache), "-q"])
    assert "skipped v0.10.0 (tag exists)" in res.output and res.stderr == ""
    res = runner.invoke(app, ["0.1.2.3.x", "--into", str(into), "--cache-dir", str(cache)])
    assert isinstance(res.exception, AuditError)


@pytest.mark.release
def test_import_real_release(tmp_path):
    from release_cache import release_cache_dir, release_root

    release_root("0.10.0")
    into = tmp_path / "real"
    assert import_releases(["0.10.0"], into, cache_dir=release_cache_dir(), progress=False) == ["v0.10.0"]
    tree = GitTree(into, "v0.10.0")
    files = tree.python_files()
    assert "vllm/__init__.py" in files and len(files) > 500
    assert b"import" in tree.read("vllm/v1/spec_decode/eagle.py")
    tree.close()
