"""GitTree reads vllm/ sources from git objects; helpers for release tags and bisection."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import git
import pytest

from auditor.common.errors import GitError
from auditor.source.gittree import GitTree, NoVllmInTree, commits_between, list_release_tags, resolve_commit
from auditor.source.trees import FileTooLarge

ACTOR = git.Actor("Test", "test@example.invalid")


def commit_files(repo: git.Repo, files: dict[str, str | None], message: str) -> git.Commit:
    """Write (or delete, for None) files in the work tree and commit them."""
    root = Path(repo.working_tree_dir)
    for rel, text in files.items():
        p = root / rel
        if text is None:
            repo.index.remove([rel], working_tree=True)
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        repo.index.add([rel])
    return repo.index.commit(message, author=ACTOR, committer=ACTOR)


@pytest.fixture
def repo(tmp_path) -> git.Repo:
    r = git.Repo.init(tmp_path / "repo", initial_branch="main")
    commit_files(r, {
        "vllm/__init__.py": "",
        "vllm/model_executor/models/deepseek_mtp.py": "class DeepSeekMTP:\n    pass\n",
        "vllm/v1/spec_decode/eagle.py": "def propose():\n    return 0\n",
        "vllm/v1/spec_decode/config.json": "{}",
        "vllm/.hidden/skip.py": "x = 1\n",
        "vllm/__pycache__/skip.py": "x = 1\n",
        "setup.py": "",
        "tests/test_x.py": "",
    }, "first")
    r.create_tag("v0.1.0")
    return r


def test_lists_and_reads_python_files(repo):
    tree = GitTree(repo.working_tree_dir, "v0.1.0")
    assert tree.python_files() == [
        "vllm/__init__.py",
        "vllm/model_executor/models/deepseek_mtp.py",
        "vllm/v1/spec_decode/eagle.py",
    ]
    assert tree.read("vllm/model_executor/models/deepseek_mtp.py") == b"class DeepSeekMTP:\n    pass\n"
    assert tree.label.startswith("v0.1.0@") and tree.commit_sha == repo.head.commit.hexsha
    assert tree.problems() == []
    with pytest.raises(FileNotFoundError):
        tree.read("vllm/missing.py")
    with pytest.raises(FileNotFoundError):
        tree.read("setup.py")
    tree.close()


def test_blob_sha_matches_git_hash_object(repo):
    tree = GitTree(repo, "HEAD")
    path = "vllm/v1/spec_decode/eagle.py"
    expected = subprocess.run(
        ["git", "hash-object", path], cwd=repo.working_tree_dir, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert tree.blob_sha(path) == expected


def test_reads_old_commit_without_touching_work_tree_or_index(repo):
    root = Path(repo.working_tree_dir)
    commit_files(repo, {"vllm/v1/spec_decode/eagle.py": "def propose(step):\n    return step\n"}, "second")
    (root / "vllm/v1/spec_decode/eagle.py").write_text("uncommitted\n")
    status = repo.git.status("--porcelain")  # refreshes the index's stat data first
    index_bytes = (Path(repo.git_dir) / "index").read_bytes()
    old = GitTree(repo, "v0.1.0")
    new = GitTree(repo, "main")
    assert old.read("vllm/v1/spec_decode/eagle.py") == b"def propose():\n    return 0\n"
    assert new.read("vllm/v1/spec_decode/eagle.py") == b"def propose(step):\n    return step\n"
    assert old.blob_sha("vllm/__init__.py") == new.blob_sha("vllm/__init__.py")
    assert (root / "vllm/v1/spec_decode/eagle.py").read_text() == "uncommitted\n"
    assert (Path(repo.git_dir) / "index").read_bytes() == index_bytes
    assert repo.git.status("--porcelain") == status


def test_symlinks_and_submodules_are_problems(repo):
    root = Path(repo.working_tree_dir)
    os.symlink("__init__.py", root / "vllm" / "alias.py")
    repo.index.add(["vllm/alias.py"])
    # a gitlink (submodule) entry without a .gitmodules file
    sub_sha = repo.head.commit.hexsha
    repo.git.update_index("--add", "--cacheinfo", f"160000,{sub_sha},vllm/third_party")
    repo.index.update()
    repo.index.commit("links", author=ACTOR, committer=ACTOR)
    tree = GitTree(repo, "HEAD")
    assert "vllm/alias.py" not in tree.python_files()
    kinds = {(p, k) for p, k, _ in tree.problems()}
    assert ("vllm/alias.py", "symlink") in kinds
    assert ("vllm/third_party", "submodule") in kinds


def test_too_large_blob(repo, monkeypatch):
    import auditor.source.gittree as gt

    monkeypatch.setattr(gt, "MAX_FILE_BYTES", 10)
    tree = GitTree(repo, "HEAD")
    with pytest.raises(FileTooLarge):
        tree.read("vllm/model_executor/models/deepseek_mtp.py")


def test_bare_repository(repo, tmp_path):
    bare = git.Repo.clone_from(repo.working_tree_dir, tmp_path / "bare.git", bare=True)
    tree = GitTree(bare.git_dir, "v0.1.0")
    assert "vllm/__init__.py" in tree.python_files()


# --------------------------------------------------------------------------- errors


def test_not_a_repository(tmp_path):
    with pytest.raises(GitError, match="not a git repository"):
        GitTree(tmp_path, "HEAD")
    with pytest.raises(GitError, match="no such directory"):
        GitTree(tmp_path / "nope", "HEAD")


def test_bad_ref(repo):
    for rev in ("v9.9.9", "no-such-branch", "-x", "", "deadbeef" * 5):
        with pytest.raises(GitError) as err:
            GitTree(repo, rev)
        assert "\n" not in str(err.value)
    with pytest.raises(GitError, match="unknown revision 'v9.9.9'"):
        GitTree(repo, "v9.9.9")


def test_empty_repository(tmp_path):
    git.Repo.init(tmp_path / "empty")
    with pytest.raises(GitError, match="is empty"):
        GitTree(tmp_path / "empty", "HEAD")


def test_tree_without_vllm(tmp_path):
    r = git.Repo.init(tmp_path / "other")
    commit_files(r, {"README.md": "hi\n", "src/vllm_like.py": ""}, "no vllm")
    with pytest.raises(NoVllmInTree, match="has no vllm/ directory"):
        GitTree(r, "HEAD")
    assert issubclass(NoVllmInTree, GitError)


def test_shallow_clone_lacking_commit(repo, tmp_path):
    first = repo.head.commit.hexsha
    commit_files(repo, {"vllm/a.py": "a = 1\n"}, "second")
    commit_files(repo, {"vllm/b.py": "b = 1\n"}, "third")
    shallow = git.Repo.clone_from(f"file://{repo.working_tree_dir}", tmp_path / "shallow", depth=1)
    assert GitTree(shallow, "HEAD").python_files()
    with pytest.raises(GitError, match="shallow clone"):
        GitTree(shallow, first)
    with pytest.raises(GitError, match="shallow clone"):
        GitTree(shallow, first[:12])


# --------------------------------------------------------------------------- helpers for history


def test_list_release_tags_in_version_order(repo):
    for tag in ("v0.10.0", "v0.9.2", "v0.2.0", "v0.10.1rc1", "v0.11.0", "nightly", "v1.0", "release-1"):
        repo.create_tag(tag)
    repo.create_tag("v0.3.0", message="annotated")
    repo.create_tag("v0.4.0", ref=repo.head.commit.tree)  # a tag on a tree is no release
    assert list_release_tags(repo) == ["v0.1.0", "v0.2.0", "v0.3.0", "v0.9.2", "v0.10.0", "v0.11.0"]
    assert list_release_tags(repo, pattern=r"^v[\d.]+(rc\d+)?$", include_pre=True) == [
        "v0.1.0", "v0.2.0", "v0.3.0", "v0.9.2", "v0.10.0", "v0.10.1rc1", "v0.11.0", "v1.0"
    ]
    with pytest.raises(GitError, match="bad tag pattern"):
        list_release_tags(repo, pattern="(")


def test_commits_between_topological(repo):
    base = repo.head.commit
    c1 = commit_files(repo, {"vllm/a.py": "a = 1\n"}, "c1")
    # a side branch merged back in
    repo.git.checkout("-b", "side", base.hexsha)
    s1 = commit_files(repo, {"vllm/s.py": "s = 1\n"}, "s1")
    repo.git.checkout("main")
    repo.git.merge("--no-ff", "-m", "merge", "side", env={
        "GIT_AUTHOR_NAME": "T", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "T", "GIT_COMMITTER_EMAIL": "t@e"})
    m = repo.head.commit
    c2 = commit_files(repo, {"vllm/b.py": "b = 1\n"}, "c2")
    out = commits_between(repo, "v0.1.0", "main")
    assert set(out) == {c1.hexsha, s1.hexsha, m.hexsha, c2.hexsha}
    assert out[-1] == c2.hexsha
    assert out.index(m.hexsha) > out.index(c1.hexsha) and out.index(m.hexsha) > out.index(s1.hexsha)
    assert commits_between(repo, "main", "main") == []
    with pytest.raises(GitError, match="is not an ancestor"):
        commits_between(repo, "main", "v0.1.0")
    with pytest.raises(GitError, match="unknown revision"):
        commits_between(repo, "nope", "main")


def test_resolve_commit_peels_annotated_tags(repo):
    repo.create_tag("v0.5.0", message="annotated")
    assert resolve_commit(repo, "v0.5.0").hexsha == repo.head.commit.hexsha
