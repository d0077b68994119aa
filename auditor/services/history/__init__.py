"""Findings across revisions of a git repository: ``history``, ``diff`` and ``bisect``.

* :mod:`.model` — what a run produces (:class:`Release`, :class:`Delta`, :class:`History`,
  :class:`BisectResult`);
* :mod:`.compare` — introduced, fixed and persisting findings between two revisions;
* :mod:`.scan` — scanning revisions (:class:`Scanner`), :func:`run_history`, :func:`run_diff`;
* :mod:`.bisect` — :func:`run_bisect`.
* :mod:`.layers` — ``history --layers``: since which release step *i* reaches MTP layer *i*.

Reports are rendered by :mod:`auditor.history_report`; the typer commands live in
:mod:`auditor.cli_history`. Every revision is read straight from git objects, never
checked out. Two caches make repeated runs cheap: the per-file facts cache
(``<cache>/facts/``), and a per-revision result cache keyed by the git id of the
``vllm/`` tree, a digest of the analyzer's own source and the configuration.

Findings are compared by fingerprint (rule, file, enclosing function, callee, rule key;
never a line), so code that only moved inside its file *persists*. Leftovers are then
paired: the same rule, function and callee in another file (a file rename or split), or
the same rule, file and function with another callee. Paired findings persist
(``moved``: new fingerprint -> old), never count as fixed plus introduced. The JSON
document is described in ``auditor/HISTORY_FORMAT.md``.
"""

from ...engine.result_cache import ResultCache
from .bisect import run_bisect
from .compare import by_rule, compare, identity
from ...model.history import BisectResult, Delta, History, Release
from .scan import DEFAULT_PRE_PATTERN, DEFAULT_TAG_PATTERN, Scanner, resolve_ref, run_diff, run_history, scan_refs, select_tags

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
    "identity",
    "resolve_ref",
    "run_bisect",
    "run_diff",
    "run_history",
    "scan_refs",
    "select_tags",
]
