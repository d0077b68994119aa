"""Unpacking an sdist has limits on total size and member count (issue 20): configurable,
one line, nothing unpacked."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from auditor.source.archive_limits import MEMBERS_VAR, SIZE_VAR
from auditor.common.errors import FetchError, UsageError
from auditor.source.fetch import _unpack


def sdist(path: Path, files: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in {"vllm-9.9.9/vllm/__init__.py": b"", **files}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_too_many_members_is_refused_with_the_option_that_raises_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = sdist(tmp_path / "v.tar.gz", {f"vllm-9.9.9/vllm/m{i}.py": b"" for i in range(60)})
    monkeypatch.setenv(MEMBERS_VAR, "50")
    target = tmp_path / "releases" / "vllm-9.9.9"
    with pytest.raises(FetchError) as exc:
        _unpack(archive, target, {})
    message = str(exc.value)
    assert "more than 50 members" in message and MEMBERS_VAR in message and "\n" not in message
    assert not target.exists() and list(target.parent.iterdir()) == []
    monkeypatch.setenv(MEMBERS_VAR, "100")
    _unpack(archive, target, {})
    assert (target / "vllm/m59.py").is_file()


def test_a_decompression_bomb_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = sdist(tmp_path / "v.tar.gz", {"vllm-9.9.9/vllm/zeros.py": b"\0" * (3 * 1024 * 1024)})
    assert archive.stat().st_size < 100_000
    monkeypatch.setenv(SIZE_VAR, "2")
    target = tmp_path / "releases" / "vllm-9.9.9"
    with pytest.raises(FetchError, match=f"more than 2 MB .*{SIZE_VAR}"):
        _unpack(archive, target, {})
    assert list(target.parent.iterdir()) == []


def test_a_bad_limit_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    archive = sdist(tmp_path / "v.tar.gz", {})
    monkeypatch.setenv(SIZE_VAR, "lots")
    with pytest.raises(UsageError, match=SIZE_VAR):
        _unpack(archive, tmp_path / "r" / "vllm-9.9.9", {})


def test_temp_files_of_a_killed_fetch_are_removed_by_the_next(tmp_path: Path) -> None:
    """A download or unpacking killed with kill -9 leaves a temp entry; the next fetch
    removes it at once when its writer is gone, and keeps a live writer's."""
    import os
    import subprocess
    import sys

    from auditor.source.fetch import _remove_stale_temps
    from auditor.common.temp_owner import owner_tag

    dead = subprocess.Popen([sys.executable, "-c", "import os; print(os.getpid())"], stdout=subprocess.PIPE, text=True)
    dead_pid = int(dead.communicate()[0])
    gone = owner_tag().replace(f"-{os.getpid()}@", f"-{dead_pid}@")
    live = owner_tag().replace(f"-{os.getpid()}@", f"-{os.getppid()}@")
    (tmp_path / "sdists").mkdir()
    (tmp_path / "releases").mkdir()
    part = tmp_path / "sdists" / f".vllm-1.0.tar.gz.{gone}abc.part"
    part.write_bytes(b"half")
    unpacking = tmp_path / "releases" / f".vllm-1.0.{gone}abc.tmp"
    (unpacking / "vllm").mkdir(parents=True)
    running = tmp_path / "sdists" / f".vllm-2.0.tar.gz.{live}abc.part"
    running.write_bytes(b"being written")
    _remove_stale_temps(tmp_path)
    assert not part.exists() and not unpacking.exists()
    assert running.exists()
