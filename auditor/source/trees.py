"""Where the scanned code comes from: a directory, or a git tree read from objects.

The engine only ever asks a :class:`SourceTree` for a list of ``.py`` paths
(POSIX, relative to the scan root, which holds the ``vllm`` package) and for the
bytes of one of them. Nothing here imports or executes scanned code.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ..common.errors import UsageError

MAX_FILE_BYTES = 8 * 1024 * 1024  # generated files beyond this are listed, not parsed
KEPT_BYTES = 96 * 1024 * 1024  # a tree keeps the bytes it read up to this much (vLLM 0.33.0: 44 MB of .py)
SETTLED_NS = 2_000_000_000  # ... of files last changed at least this long before they were read


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
    # Top-level packages listed under ``root`` (a platform plugin's root holds its own).
    packages: tuple[str, ...] = ("vllm",)
    # A tree this tool unpacked into its own cache and never changes (a release): its listing
    # and blob ids may be taken from an earlier command without looking at the disk (sha_memo).
    immutable: bool = False
    _problems: list[tuple[str, str, str]] = field(default_factory=list)
    _files: list[str] | None = None
    _blob_shas: dict[str, str] = field(default_factory=dict, repr=False)
    # path -> its identity on disk when its blob id was taken, if it had settled (see sha_memo)
    _blob_idents: dict[str, tuple[int, int, int, int]] = field(default_factory=dict, repr=False, compare=False)
    _kept: dict[str, tuple[tuple[int, int, int, int], bytes]] = field(default_factory=dict, repr=False, compare=False)
    _kept_bytes: int = field(default=0, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.root = self.root.resolve()
        if not self.label:
            self.label = str(self.root)

    def python_files(self) -> list[str]:
        if self._files is not None:
            return self._files
        files: list[str] = []
        for package in self.packages:
            files.extend(self._package_files(self.root / package))
        self._files = sorted(files)
        return self._files

    def _package_files(self, pkg: Path) -> list[str]:
        files: list[str] = []
        seen_dirs: set[tuple[int, int]] = set()

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
        return files

    def _problem(self, path: str, kind: str, message: str) -> None:
        self._problems.append((_printable(path), kind, _printable(message)))

    def _rel(self, full: str) -> str:
        # os.walk joins under the resolved root: a string prefix (pathlib per file costs a
        # tenth of a second on vLLM's 3,000 files); anything else the long way.
        prefix = os.path.join(str(self.root), "")
        if full.startswith(prefix) and os.sep == "/":
            return full[len(prefix):]
        return Path(full).relative_to(self.root).as_posix()

    def read(self, relpath: str) -> bytes:
        full = os.path.join(self.root, relpath)
        st = os.lstat(full)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"not a regular file: {relpath}")
        if st.st_size > MAX_FILE_BYTES:
            raise FileTooLarge(f"{st.st_size} bytes, over the {MAX_FILE_BYTES} byte limit")
        # One command reads a file several times (the cache key's digest, the seeds, the
        # searches for words): the bytes are kept while the file's identity on disk (inode,
        # size, change and modification times) stays the same; a file rewritten since is read
        # again. As in git's index, a file changed less than SETTLED_NS before it was read is
        # not kept: a rewrite within the file system's clock tick would keep its times.
        ident = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        kept = self._kept.pop(relpath, None)
        if kept is not None:
            if kept[0] == ident:
                self._kept[relpath] = kept
                return kept[1]
            self._kept_bytes -= len(kept[1])
        with open(full, "rb") as fh:
            data = fh.read()
        self._blob_shas[relpath] = git_blob_sha(data)
        settled = max(st.st_mtime_ns, st.st_ctime_ns) < time.time_ns() - SETTLED_NS
        if settled and len(data) == st.st_size:
            self._blob_idents[relpath] = ident
        else:
            self._blob_idents.pop(relpath, None)
        if settled and len(data) == st.st_size and self._kept_bytes + len(data) <= KEPT_BYTES:
            self._kept_bytes += len(data)
            self._kept[relpath] = (ident, data)
        return data

    def blob_sha(self, relpath: str) -> str:
        """The git blob id of a file's current bytes (remembered from the last read)."""
        sha = self._blob_shas.get(relpath)
        if sha is None:
            self.read(relpath)
            sha = self._blob_shas[relpath]
        return sha

    def know_blob_sha(self, relpath: str, sha: str, ident: tuple[int, int, int, int]) -> None:
        """The blob id of a file whose identity on disk is ``ident`` (:mod:`.sha_memo` checked it)."""
        self._blob_shas[relpath] = sha
        self._blob_idents[relpath] = ident

    def has_every_blob_sha(self) -> bool:
        """Whether the tree is listed and every file's blob id is known (a digest reads nothing)."""
        return self._files is not None and all(p in self._blob_shas for p in self._files)

    def listed(self) -> tuple[list[str], list[tuple[str, str, str]]] | None:
        """The listing and its problems, if the tree was listed."""
        return (list(self._files), list(self._problems)) if self._files is not None else None

    def adopt_listing(self, files: list[str], problems: list[tuple[str, str, str]]) -> None:
        """The listing of an immutable tree, from an earlier command (:mod:`.sha_memo`)."""
        assert self.immutable and self._files is None
        self._files = sorted(files)
        self._problems = list(problems)

    def known_blob_shas(self) -> dict[str, tuple[tuple[int, int, int, int], str]]:
        """Blob ids taken from settled files, with the identity on disk each had then."""
        return {p: (ident, self._blob_shas[p]) for p, ident in self._blob_idents.items() if p in self._blob_shas}

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


# --------------------------------------------------------------------------- platform plugins (issue 13)

PLUGIN_ENTRY_POINT_GROUPS = ("vllm.platform_plugins", "vllm.general_plugins")


@dataclass(frozen=True)
class Root:
    """One directory of a combined tree: vLLM itself, or a platform plugin."""

    name: str  # "vllm", or the plugin's distribution name ("vllm-ascend")
    tree: "DirectoryTree | GitTreeLike"
    plugin: bool

    @property
    def path(self) -> Path | None:
        """The directory (None for a tree read from git objects)."""
        root = getattr(self.tree, "root", None)
        return root if isinstance(root, Path) else None

    @property
    def location(self) -> str:
        return str(self.path) if self.path is not None else self.tree.label


class GitTreeLike(SourceTree, Protocol):
    packages: tuple[str, ...]


class CombinedTree:
    """Several roots seen as one namespace: vLLM's ``vllm/`` and each plugin's packages
    (``vllm_ascend/``) side by side, so imports, base classes and registrations resolve
    across them; every path still knows the root it came from (:meth:`root_of`)."""

    def __init__(self, roots: list[Root]) -> None:
        self.roots = roots
        self._owner: dict[str, Root] = {}
        for r in roots:
            for package in r.tree.packages:
                other = self._owner.get(package)
                if other is not None:
                    raise UsageError(f"package {package}/ is in two scanned roots: {other.location} and {r.location}")
                self._owner[package] = r
        self.label = " + ".join(r.tree.label for r in roots)
        self.root = roots[0].path  # the vLLM root: its pyproject.toml configures the scan

    def root_of(self, relpath: str) -> Root:
        return self._owner.get(relpath.split("/", 1)[0], self.roots[0])

    @property
    def plugin_roots(self) -> list[Root]:
        return [r for r in self.roots if r.plugin]

    def python_files(self) -> list[str]:
        return sorted(p for r in self.roots for p in r.tree.python_files())

    def read(self, relpath: str) -> bytes:
        return self.root_of(relpath).tree.read(relpath)

    def blob_sha(self, relpath: str) -> str:
        return self.root_of(relpath).tree.blob_sha(relpath)

    def problems(self) -> list[tuple[str, str, str]]:
        return [p for r in self.roots for p in r.tree.problems()]


def plugin_entry_points(root: Path) -> list[str]:
    """The ``module:function`` targets of the ``vllm.*_plugins`` entry points a plugin
    declares (what vLLM calls when it loads the plugin)."""
    return list(dict.fromkeys(_entry_points(root)[0]))


def _entry_point_modules(root: Path) -> tuple[list[str], str | None]:
    targets, name = _entry_points(root)
    return list(dict.fromkeys(t.split(":", 1)[0].strip() for t in targets)), name


def _entry_points(root: Path) -> tuple[list[str], str | None]:
    """Targets of the ``vllm.*_plugins`` entry points a plugin declares, and its
    distribution name, from pyproject.toml, setup.cfg, an sdist's ``*.egg-info`` or
    setup.py (read as text/syntax; nothing is run)."""
    import ast
    import configparser

    modules: list[str] = []
    name: str | None = None

    def add(value: str) -> None:
        target = value.split("=", 1)[-1].strip()
        if target.split(":", 1)[0].strip():
            modules.append(target)

    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        import tomllib

        try:
            data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            data = {}
        project = data.get("project", {}) if isinstance(data.get("project"), dict) else {}
        if isinstance(project.get("name"), str):
            name = project["name"]
        eps = project.get("entry-points", {})
        for group in PLUGIN_ENTRY_POINT_GROUPS:
            table = eps.get(group, {}) if isinstance(eps, dict) else {}
            for value in table.values() if isinstance(table, dict) else ():
                if isinstance(value, str):
                    add(value)
    ini_files = [root / "setup.cfg", *sorted(root.glob("*.egg-info/entry_points.txt")),
                 *sorted(root.glob("src/*.egg-info/entry_points.txt"))]
    for ini in ini_files:
        if not ini.is_file():
            continue
        parser = configparser.RawConfigParser()
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        try:
            parser.read(ini, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue
        if ini.name == "setup.cfg":
            if name is None and parser.has_option("metadata", "name"):
                name = parser.get("metadata", "name").strip()
            if parser.has_section("options.entry_points"):
                for group in PLUGIN_ENTRY_POINT_GROUPS:
                    if parser.has_option("options.entry_points", group):
                        for line in parser.get("options.entry_points", group).splitlines():
                            if line.strip():
                                add(line)
        else:
            for group in PLUGIN_ENTRY_POINT_GROUPS:
                if parser.has_section(group):
                    for _key, value in parser.items(group):
                        add(value)
    setup_py = root / "setup.py"
    if not modules and setup_py.is_file():
        try:
            tree = ast.parse(setup_py.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            tree = None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Dict):
                for k, v in zip(node.keys, node.values):
                    if isinstance(k, ast.Constant) and k.value in PLUGIN_ENTRY_POINT_GROUPS and isinstance(v, (ast.List, ast.Tuple)):
                        for e in v.elts:
                            if isinstance(e, ast.Constant) and isinstance(e.value, str):
                                add(e.value)
    pkg_info = root / "PKG-INFO"
    if name is None and pkg_info.is_file():
        for line in pkg_info.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("Name:"):
                name = line[5:].strip()
                break
    return list(dict.fromkeys(modules)), name


def locate_plugin(path: Path, name: str | None = None) -> DirectoryTree:
    """The directory tree of a platform plugin given by the user (its repository or sdist
    root, or its package directory). Its packages are those its ``vllm.platform_plugins``
    / ``vllm.general_plugins`` entry points name; without entry points, the packages at
    its top (or under ``src/``) that are not tests."""
    if not path.exists():
        raise UsageError(f"plugin path does not exist: {path}")
    if not path.is_dir():
        raise UsageError(f"expected a plugin directory, got a file: {path}")
    path = path.resolve()
    if (path / "__init__.py").is_file() and not (path / "pyproject.toml").exists() and not (path / "setup.py").exists():
        label = name or re.sub(r"[-_.]+", "-", path.name).lower()  # PEP 503 form of the package name
        return DirectoryTree(path.parent, label=label, packages=(path.name,))
    modules, dist_name = _entry_point_modules(path)
    packages: list[str] = []
    base = path
    for module in modules:
        top = module.split(".", 1)[0]
        for cand in (path, path / "src"):
            if (cand / top / "__init__.py").is_file():
                base = cand
                packages.append(top)
                break
    if not packages:
        for cand in (path, path / "src"):
            if not cand.is_dir():
                continue
            found = sorted(
                d.name for d in cand.iterdir()
                if d.is_dir() and (d / "__init__.py").is_file() and not d.name.startswith(("test", ".", "_"))
                and d.name not in ("vllm", "docs", "examples", "benchmarks", "tools", "build")
            )
            if found:
                base, packages = cand, found
                break
    if not packages and (path / "vllm" / "__init__.py").is_file():
        raise UsageError(f"plugin path {path} holds a vllm/ package: pass vLLM as PATH and the plugin with --plugin")
    if not packages:
        raise UsageError(f"no Python package found under plugin path {path} (expected e.g. vllm_ascend/ or a pyproject.toml with vllm.platform_plugins entry points)")
    if "vllm" in packages:
        raise UsageError(f"plugin path {path} holds a vllm/ package: pass vLLM as PATH and the plugin with --plugin")
    label = name or re.sub(r"[-_.]+", "-", dist_name or packages[0]).lower()  # PEP 503 form
    return DirectoryTree(base, label=label, packages=tuple(dict.fromkeys(packages)))
