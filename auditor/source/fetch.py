"""Download and unpack vLLM release source distributions (``vllm-X.Y.Z.tar.gz``).

The package index is the one pip is configured to use (``PIP_INDEX_URL``, else
``index-url`` from pip's configuration files, else ``https://pypi.org/simple``);
``extra-index-url`` entries are ignored. The index is read through the PEP 691 JSON
simple API, with a fallback to PEP 503 HTML (``#sha256=`` fragments).

Cache layout (``default_cache_dir()``, overridable with ``MTP_AUDIT_CACHE_DIR``)::

    <cache>/sdists/vllm-X.Y.Z.tar.gz        verified download, renamed in atomically
    <cache>/releases/vllm-X.Y.Z/            unpacked sdist (holds vllm/), renamed in atomically
    <cache>/releases/vllm-X.Y.Z/.complete   written last; a directory without it is redone
    <cache>/releases/vllm-X.Y.Z/.mtp-audit-release.json   where it came from (index, url, sha256)

A complete release directory is reused without touching the network. Nothing here
imports or executes anything from the downloaded source.
"""

from __future__ import annotations

import base64
import bisect
import configparser
import errno
import hashlib
import html.parser
import json
import os
import re
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable
from pathlib import Path, PurePosixPath


from packaging.version import InvalidVersion, Version

from .archive_limits import limited_members
from ..common.errors import FetchError
from ..common.paths import default_cache_dir
from ..common.temp_owner import owner_is_gone, owner_tag

if TYPE_CHECKING:
    import ssl
    import urllib.request

PROJECT = "vllm"
DEFAULT_INDEX_URL = "https://pypi.org/simple"
COMPLETE_MARKER = ".complete"
METADATA_FILE = ".mtp-audit-release.json"
JSON_ACCEPT = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.01"
)
SDIST_SUFFIXES = (".tar.gz", ".tgz")
_CHUNK = 1 << 16
_MAX_INDEX_PAGE = 64 * 1024 * 1024


# --------------------------------------------------------------------------- cache dir
# default_cache_dir lives in auditor.paths (imported above).


def release_dir(version: str, cache_dir: Path | None = None, project: str = PROJECT) -> Path:
    """Where ``fetch_release(version)`` puts (or finds) the unpacked release."""
    v = parse_version(version)
    return Path(cache_dir or default_cache_dir()) / "releases" / f"{project_key(project)}-{v}"


def is_cached(version: str, cache_dir: Path | None = None, project: str = PROJECT) -> bool:
    return (release_dir(version, cache_dir, project) / COMPLETE_MARKER).is_file()


def project_key(project: str) -> str:
    """PEP 503 normalised project name (``vllm_Ascend`` -> ``vllm-ascend``)."""
    return re.sub(r"[-_.]+", "-", project).lower()


def _display(project: str) -> str:
    return "vLLM" if project == PROJECT else project


# --------------------------------------------------------------------------- pip config


def _pip_config_files() -> list[Path]:
    """pip's configuration files in the order pip loads them (later ones win)."""
    files: list[Path] = []
    xdg_dirs = os.environ.get("XDG_CONFIG_DIRS") or "/etc/xdg"
    # global
    for d in reversed([p for p in xdg_dirs.split(os.pathsep) if p]):
        files.append(Path(d) / "pip" / "pip.conf")
    files.append(Path("/etc/pip.conf"))
    # user (legacy location first, then the XDG one)
    home = Path.home()
    files.append(home / ".pip" / "pip.conf")
    xdg_home = os.environ.get("XDG_CONFIG_HOME") or str(home / ".config")
    files.append(Path(xdg_home) / "pip" / "pip.conf")
    # site (the running interpreter's environment, and an activated virtualenv)
    files.append(Path(sys.prefix) / "pip.conf")
    venv = os.environ.get("VIRTUAL_ENV")
    if venv and Path(venv) / "pip.conf" not in files:
        files.append(Path(venv) / "pip.conf")
    # PIP_CONFIG_FILE is loaded last (pip: "env" variant); os.devnull disables all files
    env_file = os.environ.get("PIP_CONFIG_FILE")
    if env_file:
        if env_file == os.devnull:
            return []
        files.append(Path(env_file))
    return files


def _pip_setting(key: str) -> str | None:
    """A pip option: ``PIP_<KEY>`` env, else ``[install]``/``[global]`` in pip's config files."""
    env = os.environ.get("PIP_" + key.upper().replace("-", "_"))
    if env:
        return env
    value: str | None = None
    for path in _pip_config_files():
        if not path.is_file():
            continue
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue  # pip would fail loudly; an unreadable file just contributes nothing here
        for section in ("global", "install"):  # install overrides global
            for k in (key, key.replace("-", "_")):
                if parser.has_option(section, k):
                    v = parser.get(section, k).strip()
                    if v:
                        value = v
    return value


def configured_index_url() -> str:
    """The index pip would use: PIP_INDEX_URL, else config ``index-url``, else pypi.org/simple."""
    url = _pip_setting("index-url") or DEFAULT_INDEX_URL
    # pip accepts whitespace-separated lists only for extra-index-url; take the first token
    url = url.split()[0]
    return url.rstrip("/")


def redact(url: str) -> str:
    """The URL with any password replaced by ``***`` (for messages)."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None and "@" not in parts.netloc:
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = parts.username or ""
    netloc = f"{user}:***@{host}" if user else host
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


# --------------------------------------------------------------------------- HTTP


@dataclass(frozen=True)
class SdistFile:
    filename: str
    url: str
    sha256: str
    version: str
    size: int | None = None
    upload_time: str | None = None
    yanked: bool = False


def _timeout() -> float:
    raw = _pip_setting("timeout") or _pip_setting("default-timeout") or "15"
    try:
        return max(1.0, float(raw))
    except ValueError:
        return 15.0


def _ssl_context() -> ssl.SSLContext:
    import ssl  # only to download (a cached release is found without it: start-up time)

    cert = _pip_setting("cert")
    if cert and Path(cert).exists():
        if Path(cert).is_dir():
            return ssl.create_default_context(capath=cert)
        return ssl.create_default_context(cafile=cert)
    return ssl.create_default_context()


def _request(url: str, accept: str | None = None) -> urllib.request.Request:
    import urllib.request  # only to download (it imports http.client and email)

    parts = urllib.parse.urlsplit(url)
    headers = {"User-Agent": "mtp-audit (urllib)"}
    if accept:
        headers["Accept"] = accept
    if parts.username is not None:
        token = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(token.encode()).decode()
        host = parts.hostname or ""
        if parts.port:
            host += f":{parts.port}"
        url = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return urllib.request.Request(url, headers=headers)


def _open(url: str, accept: str | None = None) -> Any:
    import urllib.request

    req = _request(url, accept)
    ctx = _ssl_context() if url.startswith("https:") else None
    return urllib.request.urlopen(req, timeout=_timeout(), context=ctx)


def _describe_urlerror(exc: BaseException) -> str:
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, BaseException):
        text = str(reason) or type(reason).__name__
    else:
        text = str(reason)
    return text.replace("\n", " ")


# --------------------------------------------------------------------------- index page


class BadArchive(FetchError):
    """The downloaded sdist is corrupt or unsafe to unpack (it is removed from the cache)."""


class _LinkParser(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[dict[str, str | None]] = []
        self.base: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        if tag == "a":
            a = dict(attrs)
            if a.get("href"):
                self.links.append(a)


def _sdist_version(filename: str, project: str = PROJECT) -> str | None:
    """``vllm-0.10.0.tar.gz`` -> ``0.10.0``; None for anything that is not a vllm sdist."""
    for suffix in SDIST_SUFFIXES:
        if filename.endswith(suffix):
            stem = filename[: -len(suffix)]
            break
    else:
        return None
    name, sep, ver = stem.rpartition("-")
    if not sep or re.sub(r"[-_.]+", "-", name).lower() != project_key(project):
        return None
    try:
        return str(Version(ver))
    except InvalidVersion:
        return None


def _any_version(filename: str, project: str = PROJECT) -> str | None:
    """The version of any vllm distribution file (sdist or wheel), for 'nearest versions'."""
    v = _sdist_version(filename, project)
    if v:
        return v
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        if len(parts) >= 2 and project_key(parts[0]) == project_key(project):
            try:
                return str(Version(parts[1]))
            except InvalidVersion:
                return None
    return None


def _parse_json_page(body: bytes, page_url: str, index: str, project: str = PROJECT) -> tuple[list[SdistFile], set[str]]:
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FetchError(f"index {redact(index)} returned invalid JSON for {project}: {exc}") from None
    except RecursionError:
        raise FetchError(f"index {redact(index)} returned JSON nested too deeply for {project}") from None
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        raise FetchError(f"index {redact(index)} returned JSON without a 'files' list for {project}")
    sdists: list[SdistFile] = []
    versions: set[str] = set()
    for v in data.get("versions") or []:
        try:
            versions.add(str(Version(str(v))))
        except InvalidVersion:
            pass
    for entry in data["files"]:
        if not isinstance(entry, dict):
            raise FetchError(f"index {redact(index)} returned a malformed file entry for {project}")
        filename, url = entry.get("filename"), entry.get("url")
        if not isinstance(filename, str) or not isinstance(url, str):
            raise FetchError(f"index {redact(index)} returned a file entry without filename/url for {project}")
        anyv = _any_version(filename, project)
        if anyv:
            versions.add(anyv)
        ver = _sdist_version(filename, project)
        if ver is None:
            continue
        raw_hashes = entry.get("hashes")
        hashes: dict[str, Any] = raw_hashes if isinstance(raw_hashes, dict) else {}
        sha = str(hashes.get("sha256", "")).lower()
        size = entry.get("size") if isinstance(entry.get("size"), int) else None
        upload = entry.get("upload-time") if isinstance(entry.get("upload-time"), str) else None
        sdists.append(
            SdistFile(filename, urllib.parse.urljoin(page_url, url), sha, ver, size, upload, bool(entry.get("yanked")))
        )
    return sdists, versions


def _parse_html_page(body: bytes, page_url: str, index: str, project: str = PROJECT) -> tuple[list[SdistFile], set[str]]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise FetchError(f"index {redact(index)} returned a page that is not UTF-8 for {project}") from None
    parser = _LinkParser()
    try:
        parser.feed(text)
        parser.close()
    except Exception as exc:  # html.parser is lenient; anything raised here means garbage
        raise FetchError(f"index {redact(index)} returned unreadable HTML for {project}: {exc}") from None
    base = urllib.parse.urljoin(page_url, parser.base) if parser.base else page_url
    sdists: list[SdistFile] = []
    versions: set[str] = set()
    for a in parser.links:
        href = a["href"] or ""
        full = urllib.parse.urljoin(base, href)
        url, _, fragment = full.partition("#")
        filename = urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
        anyv = _any_version(filename, project)
        if anyv:
            versions.add(anyv)
        ver = _sdist_version(filename, project)
        if ver is None:
            continue
        frag = urllib.parse.parse_qs(fragment)
        sha = (frag.get("sha256") or [""])[0].lower()
        sdists.append(SdistFile(filename, url, sha, ver, yanked="data-yanked" in a))
    if not parser.links:
        raise FetchError(f"index {redact(index)} returned a page with no distribution links for {project}")
    return sdists, versions


def _project_page_url(index: str, project: str = PROJECT) -> str:
    if index.startswith("file:"):
        import urllib.request

        path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(index).path)) / project_key(project)
        if path.is_dir():
            path = path / "index.html"
        return path.as_uri()
    return f"{index}/{project_key(project)}/"


def list_sdists(index_url: str | None = None, project: str = PROJECT) -> tuple[list[SdistFile], list[str]]:
    """(sdist files, every version the index knows) for ``project`` on the configured index."""
    index = (index_url or configured_index_url()).rstrip("/")
    page = _project_page_url(index, project)
    try:
        with _open(page, accept=JSON_ACCEPT) as resp:
            ctype = (resp.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            body = resp.read(_MAX_INDEX_PAGE + 1)
            final_url = resp.geturl()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise FetchError(f"index {redact(index)} has no project '{project}' (HTTP 404)") from None
        raise FetchError(f"index {redact(index)} answered HTTP {exc.code} for {project}: {exc.reason}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise FetchError(f"cannot reach package index {redact(index)}: {_describe_urlerror(exc)}") from None
    if len(body) > _MAX_INDEX_PAGE:
        raise FetchError(f"index {redact(index)} returned an oversized page for {project}")
    if ctype.endswith("json"):
        sdists, versions = _parse_json_page(body, final_url, index, project)
    elif ctype in ("text/html", "application/vnd.pypi.simple.v1+html", "") or final_url.startswith("file:"):
        stripped = body.lstrip()
        if stripped.startswith(b"{"):
            sdists, versions = _parse_json_page(body, final_url, index, project)
        else:
            sdists, versions = _parse_html_page(body, final_url, index, project)
    else:
        raise FetchError(f"index {redact(index)} returned unexpected content type '{ctype}' for {project}")
    ordered = sorted(versions, key=Version)
    return sdists, ordered


# --------------------------------------------------------------------------- selection


def parse_version(version: str) -> str:
    text = version.strip()
    if text[:1] in ("v", "V"):
        text = text[1:]
    try:
        return str(Version(text))
    except InvalidVersion:
        raise FetchError(f"not a version number: '{version}' (expected X.Y.Z, e.g. 0.10.0)") from None


def _nearest(target: str, versions: list[str], k: int = 3) -> str:
    if not versions:
        return "none"
    vs = sorted(versions, key=Version)
    keys = [Version(v) for v in vs]
    i = bisect.bisect_left(keys, Version(target))
    near = vs[max(0, i - k) : i + k]
    return ", ".join(near)


def select_sdist(version: str, sdists: list[SdistFile], versions: list[str], index: str, project: str = PROJECT) -> SdistFile:
    want = parse_version(version)
    matches = [s for s in sdists if Version(s.version) == Version(want)]
    if not matches:
        sdist_versions = sorted({s.version for s in sdists}, key=Version)
        if any(Version(v) == Version(want) for v in versions):
            raise FetchError(
                f"{_display(project)} {want} has no source distribution on {redact(index)} (wheels only); "
                f"nearest versions with an sdist: {_nearest(want, sdist_versions)}"
            )
        raise FetchError(
            f"{_display(project)} {want} is not on {redact(index)}; nearest versions: {_nearest(want, sdist_versions or versions)}"
        )
    matches.sort(key=lambda s: (not s.filename.endswith(".tar.gz"), s.yanked))
    chosen = matches[0]
    if not re.fullmatch(r"[0-9a-f]{64}", chosen.sha256 or ""):
        raise FetchError(f"index {redact(index)} gives no sha256 for {chosen.filename}; refusing an unverified download")
    return chosen


# --------------------------------------------------------------------------- download


def _cache_error(path: Path, exc: OSError) -> FetchError:
    reason = exc.strerror or str(exc)
    if exc.errno == errno.ENOSPC:
        reason = "no space left on device"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        reason = f"not writable ({reason})"
    return FetchError(f"cannot write to cache directory {path}: {reason} (set MTP_AUDIT_CACHE_DIR to another directory)")


def _progress_bar(enabled: bool, total: int | None, description: str) -> Any:
    if not (enabled and sys.stderr.isatty()):
        return None
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    prog = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = prog.add_task(description, total=total)
    return prog, task


def _download(sdist: SdistFile, dest: Path, index: str, progress: bool) -> None:
    """Download to a temp file beside ``dest``, verify sha256, rename into place."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{sdist.filename}.{owner_tag()}", suffix=".part", dir=dest.parent)
    except OSError as exc:
        raise _cache_error(dest.parent, exc) from None
    tmp = Path(tmp_name)
    ok = False
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            try:
                resp = _open(sdist.url)
            except urllib.error.HTTPError as exc:
                raise FetchError(f"download of {sdist.filename} from {redact(index)} failed: HTTP {exc.code} {exc.reason}") from None
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise FetchError(
                    f"cannot download {sdist.filename} from {redact(index)}: {_describe_urlerror(exc)}"
                ) from None
            with resp:
                length = resp.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else sdist.size
                bar = _progress_bar(progress, total, f"{sdist.filename.rsplit('-', 1)[0]} {sdist.version}")
                if bar:
                    bar[0].start()
                try:
                    while True:
                        try:
                            chunk = resp.read(_CHUNK)
                        except (OSError, ValueError) as exc:
                            raise FetchError(
                                f"download of {sdist.filename} from {redact(index)} broke off: {_describe_urlerror(exc)}"
                            ) from None
                        if not chunk:
                            break
                        digest.update(chunk)
                        try:
                            out.write(chunk)
                        except OSError as exc:
                            raise _cache_error(dest.parent, exc) from None
                        if bar:
                            bar[0].update(bar[1], advance=len(chunk))
                finally:
                    if bar:
                        bar[0].stop()
            try:
                out.flush()
                os.fsync(out.fileno())
            except OSError as exc:
                raise _cache_error(dest.parent, exc) from None
        got = digest.hexdigest()
        if got != sdist.sha256:
            raise FetchError(
                f"sha256 mismatch for {sdist.filename} from {redact(index)}: index says {sdist.sha256}, "
                f"download is {got}; nothing was kept"
            )
        try:
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, dest)
        except OSError as exc:
            raise _cache_error(dest.parent, exc) from None
        ok = True
    finally:
        if not ok:
            tmp.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _verify_file(path: Path, sha256: str) -> bool:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest() == sha256


# --------------------------------------------------------------------------- unpack


def _safe_members(tar: tarfile.TarFile, archive: str) -> tuple[str, list[tarfile.TarInfo]]:
    """Check every member and return (top-level directory, members with it stripped)."""
    members = limited_members(tar, archive)  # the decompression limits (auditor.archive_limits)
    tops = set()
    for m in members:
        name = m.name
        p = PurePosixPath(name)
        if name.startswith("/") or p.is_absolute() or re.match(r"^[A-Za-z]:", name) or "\\" in name:
            raise BadArchive(f"unsafe sdist {archive}: absolute path {name!r}; nothing was unpacked")
        if ".." in p.parts:
            raise BadArchive(f"unsafe sdist {archive}: path with '..' {name!r}; nothing was unpacked")
        if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            raise BadArchive(f"unsafe sdist {archive}: special file {name!r}; nothing was unpacked")
        parts = [x for x in p.parts if x not in ("", ".")]
        if parts:
            tops.add(parts[0])
    if len(tops) != 1:
        raise BadArchive(f"sdist {archive} does not have a single top-level directory (found {len(tops)})")
    top = tops.pop()
    out: list[tarfile.TarInfo] = []
    for m in members:
        parts = [x for x in PurePosixPath(m.name).parts if x not in ("", ".")]
        rel = parts[1:]
        if not rel:
            continue
        new_name = "/".join(rel)
        if m.issym():
            target = PurePosixPath(m.linkname)
            resolved = _normalize(PurePosixPath(*rel[:-1]) / target) if not target.is_absolute() else None
            if resolved is None:
                raise BadArchive(f"unsafe sdist {archive}: link {m.name!r} points outside the archive; nothing was unpacked")
            m = _replace(m, name=new_name)
        elif m.islnk():
            lparts = [x for x in PurePosixPath(m.linkname).parts if x not in ("", ".")]
            if not lparts or lparts[0] != top or ".." in lparts or PurePosixPath(m.linkname).is_absolute():
                raise BadArchive(f"unsafe sdist {archive}: hard link {m.name!r} points outside the archive; nothing was unpacked")
            m = _replace(m, name=new_name, linkname="/".join(lparts[1:]))
        else:
            m = _replace(m, name=new_name)
        out.append(m)
    return top, out


def _normalize(p: PurePosixPath) -> PurePosixPath | None:
    """Resolve '..' lexically; None when it climbs above the root."""
    stack: list[str] = []
    for part in p.parts:
        if part in ("", "."):
            continue
        if part == "..":
            if not stack:
                return None
            stack.pop()
        else:
            stack.append(part)
    return PurePosixPath(*stack) if stack else PurePosixPath(".")


def _replace(m: tarfile.TarInfo, **kw: Any) -> tarfile.TarInfo:
    if hasattr(m, "replace"):
        return m.replace(**kw, deep=False)
    import copy

    m = copy.copy(m)
    for k, v in kw.items():
        setattr(m, k, v)
    return m


def _unpack(archive: Path, target: Path, meta: dict[str, Any], project: str = PROJECT) -> None:
    """Unpack ``archive`` (top directory stripped) into ``target`` via a temp dir and one rename."""
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.{owner_tag()}", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise _cache_error(parent, exc) from None
    ok = False
    try:
        try:
            with tarfile.open(archive, "r:*") as tar:
                _top, members = _safe_members(tar, archive.name)
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(tmp, members=members, filter="data")
                else:  # pragma: no cover - Python without extraction filters
                    tar.extractall(tmp, members=members)
        except FetchError:
            raise
        except (tarfile.TarError, EOFError, zlib.error) as exc:
            # tarfile's messages can span lines; the user gets exactly one.
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise BadArchive(f"cannot unpack {archive.name}: {detail}") from None
        except OSError as exc:
            raise _cache_error(parent, exc) from None
        if project == PROJECT and not (tmp / PROJECT / "__init__.py").is_file():
            raise BadArchive(f"sdist {archive.name} has no {PROJECT}/ package")
        if project != PROJECT and not _has_package(tmp):
            raise BadArchive(f"sdist {archive.name} has no Python package")
        try:
            (tmp / METADATA_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
            (tmp / COMPLETE_MARKER).write_text("ok\n")
            os.chmod(tmp, 0o777 & ~_umask())
            try:
                os.rename(tmp, target)
            except OSError as exc:
                # another process finished the same release first: keep theirs
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST) and (target / COMPLETE_MARKER).is_file():
                    shutil.rmtree(tmp, ignore_errors=True)
                    ok = True
                    return
                raise
        except OSError as exc:
            raise _cache_error(parent, exc) from None
        ok = True
    finally:
        if not ok:
            shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- entry point

_STALE_SECONDS = 6 * 3600


def _remove_stale_temps(cache: Path) -> None:
    """Remove temp files/dirs that a killed run left behind: at once when their writer is
    gone (:mod:`auditor.temp_owner`), else when they are hours old."""
    import time

    now = time.time()
    for sub, suffix in (("sdists", ".part"), ("releases", ".tmp")):
        d = cache / sub
        if not d.is_dir():
            continue
        for entry in d.iterdir():
            if not (entry.name.startswith(".") and entry.name.endswith(suffix)):
                continue
            try:
                if not owner_is_gone(entry.name) and now - entry.lstat().st_mtime < _STALE_SECONDS:
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink()
            except OSError:
                pass



def fetch_release(
    version: str,
    cache_dir: Path | None = None,
    progress: bool = True,
    log: Callable[[str], None] | None = None,
    project: str = PROJECT,
) -> Path:
    """Return the directory holding the ``vllm/`` package of vLLM release ``version``
    (for another ``project``, e.g. a platform plugin: its unpacked sdist).

    Downloads and unpacks ``vllm-<version>.tar.gz`` on first use; a complete cached copy
    is returned without any network access. ``0.33`` means the release ``0.33.0`` (PEP 440
    equality): it is stored once, under the release's own name. ``log`` gets a line per
    phase (download, unpack). Raises :class:`FetchError` with one line.
    """
    want = parse_version(version)
    cache = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    cached = _cached_release(cache, want, project)
    if cached is not None:
        return cached
    if cache.exists() and not cache.is_dir():
        raise FetchError(f"cannot write to cache directory {cache}: it is not a directory")
    try:
        cache.mkdir(parents=True, exist_ok=True)
        _remove_stale_temps(cache)
    except OSError as exc:
        raise _cache_error(cache, exc) from None

    index = configured_index_url()
    sdists, versions = list_sdists(index, project)
    sdist = select_sdist(want, sdists, versions, index, project)
    want = str(Version(sdist.version))  # the release's own name: 0.33 -> 0.33.0
    target = cache / "releases" / f"{project_key(project)}-{want}"
    try:
        if _complete(target, project):
            return target  # cached under its full name, or another process just finished it
        if target.exists() or target.is_symlink():
            # half-written (no marker): remove and redo
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink()
    except OSError as exc:
        raise _cache_error(cache, exc) from None
    archive = cache / "sdists" / sdist.filename
    if archive.is_file() and not _verify_file(archive, sdist.sha256):
        try:
            archive.unlink()
        except OSError as exc:
            raise _cache_error(archive.parent, exc) from None
    if not archive.is_file():
        if log is not None:
            log(f"downloading {sdist.filename} from {redact(index)}")
        _download(sdist, archive, index, progress)
    if log is not None:
        log(f"unpacking {sdist.filename} into {target}")
    meta = {
        "project": project_key(project),
        "version": want,
        "filename": sdist.filename,
        "sha256": sdist.sha256,
        "url": redact(sdist.url),
        "index": redact(index),
        "upload_time": sdist.upload_time,
        "size": archive.stat().st_size,
    }
    try:
        _unpack(archive, target, meta, project)
    except BadArchive:
        # an archive that will not unpack is useless in the cache
        archive.unlink(missing_ok=True)
        raise
    return target


def _cached_release(cache: Path, want: str, project: str = PROJECT) -> Path | None:
    """A complete cached copy of release ``want`` (``0.33`` finds ``vllm-0.33.0``), or None."""
    releases = cache / "releases"
    name = project_key(project)
    exact = releases / f"{name}-{want}"
    candidates = [exact]
    try:
        candidates += sorted(p for p in releases.glob(f"{name}-*") if p != exact)
    except OSError:
        pass
    for root in candidates:
        try:
            same = Version(root.name[len(name) + 1 :]) == Version(want)
        except InvalidVersion:
            continue
        if same and _complete(root, project):
            return root
    return None


def _complete(target: Path, project: str) -> bool:
    if not (target / COMPLETE_MARKER).is_file():
        return False
    return (target / PROJECT).is_dir() if project == PROJECT else _has_package(target)


def _has_package(root: Path) -> bool:
    """A plugin's sdist holds at least one Python package (at its top, or under src/)."""
    for base in (root, root / "src"):
        if base.is_dir() and any((d / "__init__.py").is_file() for d in base.iterdir() if d.is_dir()):
            return True
    return False


def release_metadata(root: Path) -> dict[str, Any]:
    """The provenance record ``fetch_release`` wrote beside ``vllm/`` (empty if absent)."""
    try:
        meta: dict[str, Any] = json.loads((Path(root) / METADATA_FILE).read_text())
        return meta
    except (OSError, ValueError):
        return {}
