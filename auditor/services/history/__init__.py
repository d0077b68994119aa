"""Findings across revisions of a git repository: ``history``, ``diff`` and ``bisect``.

* :mod:`auditor.model.history` — what a run produces (:class:`Release`, :class:`Delta`,
  :class:`History`, :class:`BisectResult`);
* :mod:`.compare` — introduced, fixed and persisting findings between two revisions, and
  behaviour changes (a by-design report gone: not a fix, as ``lint`` says);
* :mod:`.scan` — scanning revisions (:class:`Scanner`), :func:`run_history`, :func:`run_diff`;
* :mod:`.bisect` — :func:`run_bisect`.
* :mod:`.layers` — ``history --layers``: since which release step *i* reaches MTP layer *i*.

Reports are rendered by :mod:`auditor.output.history` and :mod:`auditor.output.layer_history`;
the typer commands live in :mod:`auditor.cli.history`. Every revision is read straight from git objects, never
checked out. Two caches make repeated runs cheap: the per-file facts cache
(``<cache>/facts/``), and a per-revision result cache keyed by the git id of the
``vllm/`` tree, a digest of the analyzer's own source and the configuration.

Findings are compared by fingerprint (rule, file, enclosing function, callee, rule key;
never a line), so code that only moved inside its file *persists*. Leftovers are then
paired: the same rule, function and callee in another file (a file rename or split), or
the same rule, file and function with another callee. Paired findings persist
(``moved``: new fingerprint -> old), never count as fixed plus introduced. The JSON
document is described in ``auditor/output/HISTORY_FORMAT.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ...engine.result_cache import ResultCache
from .bisect import run_bisect
from .compare import compare, identity
from ...model.history import BisectResult, Delta, History, Release, by_rule
from .scan import DEFAULT_PRE_PATTERN, DEFAULT_TAG_PATTERN, Scanner, resolve_ref, run_diff, run_history, scan_refs, select_tags

if TYPE_CHECKING:
    from ...common.config import Config
    from ...common.progress import Progress
    from ...model.layer_history import LayerHistory

__all__ = [
    "DEFAULT_PRE_PATTERN",
    "DEFAULT_TAG_PATTERN",
    "BisectResult",
    "Delta",
    "History",
    "Release",
    "ResultCache",
    "Scanner",
    "by_rule",
    "compare",
    "history_settings",
    "identity",
    "resolve_ref",
    "run_bisect",
    "run_diff",
    "run_history",
    "run_layer_history_asked",
    "scan_refs",
    "select_tags",
]


def history_settings(config: Optional[Path], no_cache: bool, cache_dir: Optional[Path]) -> "tuple[Config, Optional[Path]]":
    """The configuration (``--config`` only: a repository's own is not read) and the cache root."""
    from ..settings import cache_root, load_settings

    return load_settings(None, config, [], []), cache_root(no_cache, cache_dir)


def run_layer_history_asked(repo: Path, start: Optional[str], end: Optional[str], tags: Optional[str], pre: bool,
                            cfg: "Config", cache: Optional[Path], workers: Optional[int], progress: "Progress",
                            layers: bool, k: Optional[int], layer_count: Optional[int], runner: Optional[str]) -> "LayerHistory":
    """``history --layers`` with its options checked; the runners come from the configuration."""
    from ...common.errors import UsageError
    from ..settings import registered_rules
    from .layers import run_layer_history

    if not layers:
        raise UsageError("--k, --layer-count and --runner go with --layers")
    runners = cfg.runners()
    if runner is not None and runner not in runners:
        raise UsageError(f"--runner takes {' or '.join(runners)}, got {runner!r}")
    return run_layer_history(repo, start, end, tags, pre, cfg, cache, workers, progress, rules=registered_rules(),
                             k=3 if k is None else k, layers=3 if layer_count is None else layer_count,
                             runners=(runner,) if runner else runners)
