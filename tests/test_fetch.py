"""fetch_release: index discovery, verification, safe unpacking, caching, clear errors.

Every error path runs against a fake index served on 127.0.0.1; only the test marked
``release`` talks to the real configured index.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import socket
import tarfile
import threading
from pathlib import Path

import pytest

from auditor.source import fetch
from auditor.common.errors import FetchError
from auditor.source.fetch import (
    COMPLETE_MARKER,
    configured_index_url,
    default_cache_dir,
    fetch_release,
    redact,
    release_dir,
    release_metadata,
)

# --------------------------------------------------------------------------- helpers


def make_sdist(version: str, files: dict[str, bytes] | None = None, extra: list[tarfile.TarInfo] | None = None) -> bytes:
    top = f"vllm-{version}"
    files = files if files is not None else {
        "vllm/__init__.py": f"__version__ = {version!r}\n".encode(),
        "vllm/model_executor/models/deepseek_mtp.py": b"class DeepSeekMTP:\n    pass\n",
        "PKG-INFO": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n".encode(),
        "setup.py": b"# setup\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        dirs = set()
        for name in files:
            parts = name.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        for d in [""] + sorted(dirs):
            info = tarfile.TarInfo(f"{top}/{d}".rstrip("/"))
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 1700000000
            tar.addfile(info, io.BytesIO(data))
        for info in extra or []:
            tar.addfile(info, io.BytesIO(b"x" * info.size) if info.isfile() else None)
    return buf.getvalue()


class FakeIndex:
    """A tiny package index on 127.0.0.1: ``routes`` maps a path to (status, content type, body)."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, str, bytes]] = {}
        self.requests: list[tuple[str, str]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                owner.requests.append((self.path, self.headers.get("Accept", "")))
                status, ctype, body = owner.routes.get(self.path, (404, "text/plain", b"not found"))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def index(self) -> str:
        return self.url + "/simple"

    def add_release(self, version: str, data: bytes, sha: str | None = None, json_api: bool = True,
                    relative: bool = False, wheels: list[str] = ()) -> None:
        fname = f"vllm-{version}.tar.gz"
        self.routes[f"/files/{fname}"] = (200, "application/octet-stream", data)
        sha = sha or hashlib.sha256(data).hexdigest()
        self._files.append((fname, sha))
        for w in wheels:
            self._files.append((w, "0" * 64))
        self._render(json_api, relative)

    @property
    def _files(self) -> list:
        if not hasattr(self, "_file_list"):
            self._file_list = []
        return self._file_list

    def _render(self, json_api: bool, relative: bool) -> None:
        def url(fname):
            return f"../../files/{fname}" if relative else f"{self.url}/files/{fname}"

        if json_api:
            body = json.dumps({
                "meta": {"api-version": "1.1"},
                "name": "vllm",
                "files": [{"filename": f, "url": url(f), "hashes": {"sha256": s}} for f, s in self._files],
            }).encode()
            self.routes["/simple/vllm/"] = (200, "application/vnd.pypi.simple.v1+json", body)
        else:
            links = "".join(f'<a href="{url(f)}#sha256={s}">{f}</a><br/>' for f, s in self._files)
            body = f"<!DOCTYPE html><html><body>{links}</body></html>".encode()
            self.routes["/simple/vllm/"] = (200, "text/html; charset=utf-8", body)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def index(monkeypatch):
    idx = FakeIndex()
    monkeypatch.setenv("PIP_INDEX_URL", idx.index)
    yield idx
    idx.close()


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "cache"


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cache_files(cache: Path) -> list[str]:
    if not cache.exists():
        return []
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if not p.is_dir())


# --------------------------------------------------------------------------- config


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("MTP_AUDIT_CACHE_DIR", str(tmp_path / "x"))
    assert default_cache_dir() == tmp_path / "x"
    monkeypatch.delenv("MTP_AUDIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "mtp-audit"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "mtp-audit"


def test_index_url_precedence(monkeypatch, tmp_path):
    conf = tmp_path / "pip.conf"
    monkeypatch.setattr(fetch, "_pip_config_files", lambda: [conf])
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    assert configured_index_url() == "https://pypi.org/simple"
    conf.write_text("[global]\nindex-url = https://mirror.example/simple/\nextra-index-url = file:///opt/x\n")
    assert configured_index_url() == "https://mirror.example/simple"
    conf.write_text("[global]\nindex-url = https://a.example/simple\n[install]\nindex-url = https://b.example/simple\n")
    assert configured_index_url() == "https://b.example/simple"
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    assert configured_index_url() == "http://127.0.0.1:9/simple"


def test_pip_config_file_env_is_read_last(monkeypatch, tmp_path):
    conf = tmp_path / "env.conf"
    conf.write_text("[global]\nindex-url = https://env.example/simple\n")
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert fetch._pip_config_files()[-1] == conf
    assert configured_index_url() == "https://env.example/simple"
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    assert fetch._pip_config_files() == []


def test_redact():
    assert redact("https://user:secret@host.example/simple") == "https://user:***@host.example/simple"
    assert redact("https://host.example/simple") == "https://host.example/simple"


# --------------------------------------------------------------------------- success paths


def test_fetch_json_index_and_reuse_without_network(index, cache, monkeypatch):
    data = make_sdist("0.1.0")
    index.add_release("0.1.0", data, wheels=["vllm-0.1.0-cp38-abi3-manylinux1_x86_64.whl"])
    root = fetch_release("0.1.0", cache, progress=False)
    assert root == release_dir("0.1.0", cache) == cache / "releases" / "vllm-0.1.0"
    assert (root / "vllm" / "__init__.py").read_text() == "__version__ = '0.1.0'\n"
    assert (root / "vllm" / "model_executor" / "models" / "deepseek_mtp.py").is_file()
    assert (root / COMPLETE_MARKER).is_file()
    meta = release_metadata(root)
    assert meta["sha256"] == hashlib.sha256(data).hexdigest()
    assert meta["version"] == "0.1.0"
    assert (cache / "sdists" / "vllm-0.1.0.tar.gz").read_bytes() == data
    assert index.requests[0][1].startswith("application/vnd.pypi.simple.v1+json")
    # no temp files left anywhere
    assert not [p for p in cache.rglob("*") if p.name.startswith(".vllm")]
    n = len(index.requests)
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{closed_port()}/simple")
    assert fetch_release("v0.1.0", cache, progress=False) == root
    assert len(index.requests) == n


def test_short_version_means_the_release_and_is_stored_once(index, cache, monkeypatch):
    """``0.1`` is the release 0.1.0 (PEP 440): downloaded under its own name, never a second copy."""
    index.add_release("0.1.0", make_sdist("0.1.0"))
    lines: list[str] = []
    root = fetch_release("0.1", cache, progress=False, log=lines.append)
    assert root == cache / "releases" / "vllm-0.1.0"
    assert [p.name for p in (cache / "releases").iterdir()] == ["vllm-0.1.0"]
    assert lines[0].startswith("downloading vllm-0.1.0.tar.gz") and lines[1].startswith("unpacking")
    # cached: no network for either spelling
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{closed_port()}/simple")
    assert fetch_release("0.1", cache, progress=False) == root
    assert fetch_release("v0.1.0.0", cache, progress=False) == root
    assert [p.name for p in (cache / "releases").iterdir()] == ["vllm-0.1.0"]


def test_fetch_html_fallback_with_relative_links(index, cache):
    data = make_sdist("0.2.0")
    index.add_release("0.2.0", data, json_api=False, relative=True)
    root = fetch_release("0.2.0", cache, progress=False)
    assert (root / "vllm" / "__init__.py").is_file()
    assert release_metadata(root)["sha256"] == hashlib.sha256(data).hexdigest()


def test_incomplete_release_dir_is_redone(index, cache):
    index.add_release("0.1.0", make_sdist("0.1.0"))
    half = cache / "releases" / "vllm-0.1.0"
    (half / "vllm").mkdir(parents=True)
    (half / "vllm" / "stale.py").write_text("x = 1\n")
    root = fetch_release("0.1.0", cache, progress=False)
    assert not (root / "vllm" / "stale.py").exists()
    assert (root / COMPLETE_MARKER).is_file()


def test_cached_sdist_is_reused_for_unpacking(index, cache):
    data = make_sdist("0.1.0")
    index.add_release("0.1.0", data)
    root = fetch_release("0.1.0", cache, progress=False)
    (root / COMPLETE_MARKER).unlink()
    index.routes.pop("/files/vllm-0.1.0.tar.gz")  # only the index page is served now
    root = fetch_release("0.1.0", cache, progress=False)
    assert (root / COMPLETE_MARKER).is_file()


# --------------------------------------------------------------------------- error paths


def test_unknown_version_lists_nearest(index, cache):
    for v in ("0.1.0", "0.2.0", "0.3.0"):
        index.add_release(v, make_sdist(v))
    with pytest.raises(FetchError) as err:
        fetch_release("0.2.5", cache, progress=False)
    msg = str(err.value)
    assert "0.2.5 is not on" in msg and "0.2.0" in msg and "0.3.0" in msg
    assert index.index in msg
    assert "\n" not in msg
    assert cache_files(cache) == []


def test_version_with_wheels_only(index, cache):
    index.add_release("0.1.0", make_sdist("0.1.0"), wheels=["vllm-0.2.0-cp38-abi3-manylinux1_x86_64.whl"])
    with pytest.raises(FetchError, match=r"0\.2\.0 has no source distribution .*wheels only.*0\.1\.0"):
        fetch_release("0.2.0", cache, progress=False)


def test_invalid_version_string(cache):
    with pytest.raises(FetchError, match="not a version number"):
        fetch_release("latest!", cache, progress=False)


def test_sha256_mismatch_leaves_nothing(index, cache):
    index.add_release("0.1.0", make_sdist("0.1.0"), sha="ab" * 32)
    with pytest.raises(FetchError, match="sha256 mismatch for vllm-0.1.0.tar.gz"):
        fetch_release("0.1.0", cache, progress=False)
    assert cache_files(cache) == []


def test_missing_sha256_is_refused(index, cache):
    index.routes["/simple/vllm/"] = (200, "application/vnd.pypi.simple.v1+json", json.dumps(
        {"files": [{"filename": "vllm-0.1.0.tar.gz", "url": "/files/vllm-0.1.0.tar.gz", "hashes": {}}]}).encode())
    with pytest.raises(FetchError, match="no sha256"):
        fetch_release("0.1.0", cache, progress=False)


@pytest.mark.parametrize(
    "ctype, body, match",
    [
        ("application/vnd.pypi.simple.v1+json", b"{not json", "invalid JSON"),
        ("application/vnd.pypi.simple.v1+json", b'{"name": "vllm"}', "without a 'files' list"),
        ("application/vnd.pypi.simple.v1+json", b'{"files": [42]}', "malformed file entry"),
        ("text/html", b"<html><body>maintenance</body></html>", "no distribution links"),
        ("text/html", b"\xff\xfe\x00garbage", "not UTF-8"),
        ("image/png", b"\x89PNG", "unexpected content type"),
    ],
)
def test_index_garbage(index, cache, ctype, body, match):
    index.routes["/simple/vllm/"] = (200, ctype, body)
    with pytest.raises(FetchError, match=match):
        fetch_release("0.1.0", cache, progress=False)
    assert cache_files(cache) == []


def test_index_http_errors(index, cache):
    with pytest.raises(FetchError, match="has no project 'vllm'"):
        fetch_release("0.1.0", cache, progress=False)
    index.routes["/simple/vllm/"] = (503, "text/plain", b"down")
    with pytest.raises(FetchError, match="answered HTTP 503"):
        fetch_release("0.1.0", cache, progress=False)


def test_index_unreachable_names_url(monkeypatch, cache):
    url = f"http://127.0.0.1:{closed_port()}/simple"
    monkeypatch.setenv("PIP_INDEX_URL", url)
    with pytest.raises(FetchError) as err:
        fetch_release("0.1.0", cache, progress=False)
    assert f"cannot reach package index {url}" in str(err.value)


def test_credentials_are_sent_but_not_shown(monkeypatch, cache):
    url = f"http://alice:s3cret@127.0.0.1:{closed_port()}/simple"
    monkeypatch.setenv("PIP_INDEX_URL", url)
    with pytest.raises(FetchError) as err:
        fetch_release("0.1.0", cache, progress=False)
    assert "s3cret" not in str(err.value) and "alice:***@" in str(err.value)


def test_download_404(index, cache):
    index.add_release("0.1.0", make_sdist("0.1.0"))
    index.routes.pop("/files/vllm-0.1.0.tar.gz")
    with pytest.raises(FetchError, match="download of vllm-0.1.0.tar.gz .* failed: HTTP 404"):
        fetch_release("0.1.0", cache, progress=False)
    assert cache_files(cache) == []


def _member(name: str, type_=tarfile.REGTYPE, linkname: str = "", size: int = 1) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = type_
    info.linkname = linkname
    info.size = size if type_ == tarfile.REGTYPE else 0
    return info


@pytest.mark.parametrize(
    "extra, match",
    [
        ([_member("/etc/evil.py")], "absolute path"),
        ([_member("vllm-0.1.0/../evil.py")], r"'\.\.'"),
        ([_member("vllm-0.1.0/vllm/link", tarfile.SYMTYPE, "../../../etc/passwd")], "points outside"),
        ([_member("vllm-0.1.0/vllm/abs", tarfile.SYMTYPE, "/etc/passwd")], "points outside"),
        ([_member("vllm-0.1.0/vllm/hard", tarfile.LNKTYPE, "/etc/passwd")], "points outside"),
        ([_member("vllm-0.1.0/dev", tarfile.CHRTYPE)], "special file"),
        ([_member("other-top/x.py")], "single top-level directory"),
    ],
)
def test_unsafe_archives_are_rejected(index, cache, extra, match):
    index.add_release("0.1.0", make_sdist("0.1.0", extra=extra))
    with pytest.raises(FetchError, match=match):
        fetch_release("0.1.0", cache, progress=False)
    assert cache_files(cache) == []
    assert not Path("/etc/evil.py").exists()


def test_inner_symlink_is_allowed(index, cache):
    extra = [_member("vllm-0.1.0/vllm/alias.py", tarfile.SYMTYPE, "__init__.py")]
    index.add_release("0.1.0", make_sdist("0.1.0", extra=extra))
    root = fetch_release("0.1.0", cache, progress=False)
    assert (root / "vllm" / "alias.py").is_symlink()


def test_sdist_without_vllm_package(index, cache):
    index.add_release("0.1.0", make_sdist("0.1.0", files={"README.md": b"hi\n"}))
    with pytest.raises(FetchError, match="has no vllm/ package"):
        fetch_release("0.1.0", cache, progress=False)
    assert cache_files(cache) == []


def test_corrupt_archive(index, cache):
    data = make_sdist("0.1.0")[:200]
    index.add_release("0.1.0", data)
    with pytest.raises(FetchError, match="cannot unpack"):
        fetch_release("0.1.0", cache, progress=False)
    assert cache_files(cache) == []


def test_unwritable_cache_dir(index, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    index.add_release("0.1.0", make_sdist("0.1.0"))
    with pytest.raises(FetchError, match="cannot write to cache directory"):
        fetch_release("0.1.0", blocker, progress=False)
    with pytest.raises(FetchError, match="cannot write to cache directory"):
        fetch_release("0.1.0", blocker / "sub", progress=False)


def test_read_only_cache_dir(index, tmp_path, monkeypatch):
    index.add_release("0.1.0", make_sdist("0.1.0"))
    cache = tmp_path / "ro"
    cache.mkdir()

    def refuse(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(fetch.tempfile, "mkstemp", refuse)
    with pytest.raises(FetchError, match=r"cannot write to cache directory .*not writable \(Read-only file system\)"):
        fetch_release("0.1.0", cache, progress=False)


def test_disk_full_during_download(index, cache, monkeypatch):
    index.add_release("0.1.0", make_sdist("0.1.0"))
    real_fdopen = os.fdopen

    class Full(io.RawIOBase):
        def __init__(self, fd):
            self.inner = real_fdopen(fd, "wb")

        def write(self, b):
            raise OSError(28, "No space left on device")

        def close(self):
            self.inner.close()

    monkeypatch.setattr(fetch.os, "fdopen", lambda fd, mode: Full(fd))
    with pytest.raises(FetchError, match="no space left on device"):
        fetch_release("0.1.0", cache, progress=False)
    assert cache_files(cache) == []


# --------------------------------------------------------------------------- real index


@pytest.mark.release
def test_real_release_0_10_0(monkeypatch, tmp_path_factory):
    from release_cache import shared_cache_dir

    cache = shared_cache_dir(tmp_path_factory)
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    index = configured_index_url()
    root = fetch_release("0.10.0", cache, progress=False)
    assert (root / "vllm" / "__init__.py").is_file()
    meta = release_metadata(root)
    assert meta["index"] == redact(index)
    assert meta["filename"] == "vllm-0.10.0.tar.gz"
    assert meta["sha256"] == "a44e9013db26082a82c3931ed8772ac884d6d60566d36ecdb0e8dc01c65b241a"
    sdist = cache / "sdists" / "vllm-0.10.0.tar.gz"
    if sdist.exists():
        assert hashlib.sha256(sdist.read_bytes()).hexdigest() == meta["sha256"]
    # the second call must not touch the network
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{closed_port()}/simple")
    assert fetch_release("0.10.0", cache, progress=False) == root


def test_file_index(monkeypatch, tmp_path):
    """A local file:// mirror laid out like PEP 503 (pip accepts these as index-url)."""
    data = make_sdist("0.3.0")
    sha = hashlib.sha256(data).hexdigest()
    simple = tmp_path / "mirror" / "simple"
    (simple / "vllm").mkdir(parents=True)
    (tmp_path / "mirror" / "files").mkdir()
    (tmp_path / "mirror" / "files" / "vllm-0.3.0.tar.gz").write_bytes(data)
    (simple / "vllm" / "index.html").write_text(
        f'<html><body><a href="../../files/vllm-0.3.0.tar.gz#sha256={sha}">vllm-0.3.0.tar.gz</a></body></html>'
    )
    monkeypatch.setenv("PIP_INDEX_URL", simple.as_uri())
    root = fetch_release("0.3.0", tmp_path / "cache", progress=False)
    assert (root / "vllm" / "__init__.py").is_file()


def test_stale_temp_files_are_cleaned(index, cache):
    index.add_release("0.1.0", make_sdist("0.1.0"))
    old_dir = cache / "releases" / ".vllm-0.0.9.abc.tmp"
    old_part = cache / "sdists" / ".vllm-0.0.9.tar.gz.abc.part"
    fresh = cache / "releases" / ".vllm-0.0.8.def.tmp"
    old_dir.mkdir(parents=True)
    old_part.parent.mkdir(parents=True)
    old_part.write_bytes(b"partial")
    fresh.mkdir()
    for p in (old_dir, old_part):
        os.utime(p, (1_000_000, 1_000_000))
    fetch_release("0.1.0", cache, progress=False)
    assert not old_dir.exists() and not old_part.exists()
    assert fresh.exists()  # may belong to a run in progress
