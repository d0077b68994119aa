"""The trees a command examines: the target (``PATH``, ``--installed`` or ``--release``),
vLLM combined with platform plugins, and a plugin repository linted against a pinned vLLM."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, cast

from ..common.errors import UsageError
from ..common.progress import Progress

if TYPE_CHECKING:
    from ..source.trees import DirectoryTree, SourceTree


def open_target(path: Optional[Path], installed: bool, release: Optional[str], cache_dir: Optional[Path], progress: Progress) -> "DirectoryTree":
    from ..source.trees import DirectoryTree, locate_installed, locate_root

    chosen = sum([path is not None, installed, release is not None])
    if chosen != 1:
        raise UsageError("give exactly one target: PATH, --installed or --release X.Y.Z")
    if release is not None:
        from ..source.fetch import fetch_release

        root = fetch_release(release, cache_dir=cache_dir, progress=progress.interactive, log=progress.phase)
        return DirectoryTree(root, label=root.name, immutable=True)  # unpacked into our cache, never changed
    if installed:
        return DirectoryTree(locate_installed())
    assert path is not None
    return DirectoryTree(locate_root(path))


def with_plugins(
    tree: "DirectoryTree",
    plugins: Optional[list[Path]],
    plugin_releases: Optional[list[str]],
    cache_dir: Optional[Path],
    progress: Progress,
) -> "SourceTree":
    """vLLM's tree combined with platform plugins' trees into one import namespace, every
    path remembering its root."""
    if not plugins and not plugin_releases:
        return tree
    import re

    from ..source.fetch import fetch_release, project_key
    from ..source.trees import CombinedTree, Root, locate_plugin

    roots = [Root("vllm", tree, False)]
    for p in plugins or []:
        plugin = locate_plugin(p)
        roots.append(Root(plugin.label, plugin, True))
    for spec in plugin_releases or []:
        name, sep, version = spec.partition("==")
        if not sep or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name.strip()) or not version.strip():
            raise UsageError(f"--plugin-release wants NAME==VERSION (e.g. vllm-ascend==0.30.0rc2), got {spec!r}")
        name, version = project_key(name.strip()), version.strip()
        root = fetch_release(version, cache_dir=cache_dir, progress=progress.interactive, log=progress.phase, project=name)
        plugin = locate_plugin(root, name=name)
        plugin.label = f"{name}-{version.lstrip('v')}"
        roots.append(Root(name, plugin, True))
    return CombinedTree(roots)


@dataclass(frozen=True)
class PluginLint:
    """``lint`` inside a platform plugin's repository: its packages, and how each side of
    the change is combined with the pinned vLLM tree."""

    packages: tuple[str, ...]
    host: "Callable[[SourceTree], SourceTree]"
    config_root: Optional[Path]


def plugin_lint(path: Path, vllm: Optional[Path], vllm_release: Optional[str], cache_dir: Optional[Path], progress: Progress) -> Optional[PluginLint]:
    if vllm is None and vllm_release is None:
        return None
    if vllm is not None and vllm_release is not None:
        raise UsageError("give one of --vllm PATH and --vllm-release X.Y.Z")
    from ..services.lint import repo_for
    from ..source.trees import CombinedTree, DirectoryTree, Root, locate_plugin, locate_root

    if vllm_release is not None:
        from ..source.fetch import fetch_release

        host_tree = DirectoryTree(fetch_release(vllm_release, cache_dir=cache_dir, progress=progress.interactive, log=progress.phase),
                                  label=f"vllm-{vllm_release.lstrip('v')}")
    else:
        assert vllm is not None
        host_tree = DirectoryTree(locate_root(vllm))
    repo = repo_for(path)
    work = Path(repo.working_tree_dir or path)
    plugin = locate_plugin(work)
    if plugin.root != work.resolve():
        raise UsageError(f"the plugin's packages must be at the repository root {work} (found under {plugin.root})")

    def host(tree: "SourceTree") -> "SourceTree":
        # run_lint hands over the plugin's side of the change: a DirectoryTree or a GitTree
        # listing the plugin's packages.
        return CombinedTree([Root("vllm", host_tree, False), Root(plugin.label, cast("DirectoryTree", tree), True)])

    return PluginLint(plugin.packages, host, host_tree.root)
