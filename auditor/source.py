"""Where the scanned code comes from: a directory, or a git tree read from objects.

The engine only ever asks a :class:`SourceTree` for a list of ``.py`` paths
(POSIX, relative to the scan root, which holds the ``vllm`` package) and for the
bytes of one of them. Nothing here imports or executes scanned code.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .errors import UsageError

MAX_FILE_BYTES = 8 * 1024 * 1024  # generated files beyond this are listed, not parsed


class SourceTree(Protocol):
    label: str

    def python_files(self) -> list[str]: ...

    def read(self, relpath: str) -> bytes: ...

    def blob_sha(self, relpath: str) -> str:
        """Git blob id of the file's bytes (identity for caches and change detection)."""
        ...

    def problems(self) -> list[tuple[str, str, str]]:
        """(path, kind, message) for entries that were skipped while listing."""
        ...


@dataclass
class DirectoryTree:
    """A vLLM source tree on disk. ``root`` contains the ``vllm`` package directory."""

    root: Path
    label: str = ""
    _problems: list[tuple[str, str, str]] = field(default_factory=list)
    _files: list[str] | None = None
    _blob_shas: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        if not self.label:
            self.label = str(self.root)

    def python_files(self) -> list[str]:
        if self._files is not None:
            return self._files
        files: list[str] = []
        seen_dirs: set[tuple[int, int]] = set()
        pkg = self.root / "vllm"

        def unreadable_dir(exc: OSError) -> None:  # os.walk would skip it silently
            where = exc.filename if isinstance(exc.filename, str) else str(pkg)
            self._problem(self._rel(where), "unreadable", exc.strerror or str(exc))

        for dirpath, dirnames, filenames in os.walk(pkg, onerror=unreadable_dir, followlinks=False):
            try:
                st = os.stat(dirpath)
                key = (st.st_dev, st.st_ino)
                if key in seen_dirs:
                    dirnames[:] = []
                    continue
                seen_dirs.add(key)
            except OSError as exc:
                self._problem(self._rel(dirpath), "unreadable", str(exc))
                continue
            kept = []
            for d in sorted(dirnames):
                full = os.path.join(dirpath, d)
                if os.path.islink(full):
                    self._problem(self._rel(full), "symlink", "symbolic link not followed: " + os.readlink(full))
                    continue
                if d.startswith(".") or d == "__pycache__":
                    continue
                if not _is_utf8(d):
                    self._problem(self._rel(full), "unreadable", "directory name is not UTF-8")
                    continue
                kept.append(d)
            dirnames[:] = kept
            for name in sorted(filenames):
                full = os.path.join(dirpath, name)
                if not name.endswith(".py"):
                    # A link that does not resolve (a loop, a dangling target) lands here
                    # even when it was meant as a package directory: list it too.
                    if os.path.islink(full) and not os.path.exists(full):
                        target = os.readlink(full)
                        self._problem(self._rel(full), "symlink", f"symbolic link not followed: {target} (does not resolve)")
                    continue
                rel = self._rel(full)
                if os.path.islink(full):
                    self._problem(rel, "symlink", "symbolic link not followed: " + os.readlink(full))
                    continue
                if not _is_utf8(name):
                    # Reports, fingerprints and cache keys are UTF-8 text: such a name cannot be one.
                    self._problem(rel, "unreadable", "file name is not UTF-8")
                    continue
                files.append(rel)
        self._files = sorted(files)
        return self._files

    def _problem(self, path: str, kind: str, message: str) -> None:
        self._problems.append((_printable(path), kind, _printable(message)))

    def _rel(self, full: str) -> str:
        return Path(full).relative_to(self.root).as_posix()

    def read(self, relpath: str) -> bytes:
        full = self.root / relpath
        st = os.lstat(full)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"not a regular file: {relpath}")
        if st.st_size > MAX_FILE_BYTES:
            raise FileTooLarge(f"{st.st_size} bytes, over the {MAX_FILE_BYTES} byte limit")
        with open(full, "rb") as fh:
            data = fh.read()
        self._blob_shas[relpath] = git_blob_sha(data)
        return data

    def blob_sha(self, relpath: str) -> str:
        """The git blob id of a file's current bytes (remembered from the last read)."""
        sha = self._blob_shas.get(relpath)
        if sha is None:
            self.read(relpath)
            sha = self._blob_shas[relpath]
        return sha

    def problems(self) -> list[tuple[str, str, str]]:
        return list(self._problems)


def _is_utf8(name: str) -> bool:
    """os.walk gives undecodable bytes of a name as lone surrogates (PEP 383)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _printable(text: str) -> str:
    return text if _is_utf8(text) else text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def git_blob_sha(data: bytes) -> str:
    """The id git gives these bytes as a blob, so a work tree compares with git objects."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FileTooLarge(OSError):
    pass


def locate_root(path: Path) -> Path:
    """Return the directory that contains the ``vllm`` package for a user-given PATH.

    PATH may be a repository root holding ``vllm/`` or the ``vllm`` package itself.
    """
    if not path.exists():
        raise UsageError(f"path does not exist: {path}")
    if not path.is_dir():
        raise UsageError(f"expected a directory (a vLLM checkout or the vllm package), got a file: {path}")
    path = path.resolve()
    if (path / "vllm").is_dir():
        return path
    if path.name == "vllm" and (path / "__init__.py").exists():
        return path.parent
    raise UsageError(f"no vllm/ package under {path}: pass a vLLM repository root or its vllm/ directory")


def locate_installed() -> Path:
    """Find the installed vLLM's source directory without importing it."""
    import importlib.machinery
    import sys

    spec = importlib.machinery.PathFinder.find_spec("vllm", sys.path)
    if spec is None or not spec.submodule_search_locations:
        raise UsageError("vLLM is not installed in this Python environment (no 'vllm' package on sys.path)")
    pkg = Path(list(spec.submodule_search_locations)[0])
    return pkg.parent
