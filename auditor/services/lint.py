"""Pre-merge lint: the findings a change introduces, nothing else.

Both sides are analysed as whole trees, because a drop often shows in another file
than the one that caused it (a callee gains a step parameter, a registry entry
changes what ``self.model`` can be). The base side is read from git objects — the
user's work tree and index are never touched — and its result is cached by the
git tree id, so repeated lints against the same base cost one scan.

A changed file that no longer parses (or decodes) is a failure of its own: the analysis
cannot see into it, so a regression in it would pass unnoticed. It is reported like a
finding (rule :data:`PARSE_FAILURE_RULE`, severity error) in every format.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

import git

from ..facts.cache import FactsCache
from ..common.config import Config
from ..engine.scan import RuleClass, Scan, run_scan
from ..common.errors import GitError, UsageError
from ..source.gittree import GitTree, NoVllmInTree
from ..model.findings import Finding, ScanResult, Severity
from ..common.progress import Progress
from ..engine.result_cache import ResultCache
from ..source.trees import SourceTree
from ..source.git_changes import GitWorkTree, changed_files, open_unexpanded, tracked_or_unignored
from .history.compare import gone
from .lint_changes import classify, meanings_of, threads_now


@dataclass
class LintOutcome:
    result: ScanResult  # only the new findings (with their cause in the message), and ``result.lint``
    changed_files: list[str] = field(default_factory=list)
    fixed: list[Finding] = field(default_factory=list)  # the base's defects the change removes (not by-design reports)
    base_label: str = ""
    head_label: str = ""
    # every finding of the linted side (not only the new ones): what a baseline entry is checked against
    head_findings: list[Finding] = field(default_factory=list)


#: rule code of "a changed file cannot be parsed" (not a rule of the registry: lint reports it)
PARSE_FAILURE_RULE = "MTP901"
_UNPARSABLE = ("parse-error", "decode-error")


def repo_for(path: Path) -> git.Repo:
    if not path.exists():
        raise UsageError(f"path does not exist: {path}")
    try:
        # expand_vars=False: a directory named "$HOME/x" is that directory, not another repository
        return open_unexpanded(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise GitError(f"not a git repository: {path}") from None


def _scan_git(
    tree: GitTree, config: Config, rules: Sequence[RuleClass], cache: FactsCache, cache_root: Path | None, workers: int | None
) -> Scan:
    tree_id = tree.commit.tree["vllm"].hexsha
    return run_scan(tree, config, rules, cache, workers, ResultCache(cache_root), tree_id=tree_id)


HostWrap = Callable[[SourceTree], SourceTree]  # a plugin's tree combined with a pinned vLLM


def run_lint(
    path: Path,
    base: str,
    head: str | None,
    config: Config,
    cache: FactsCache,
    cache_root: Path | None,
    workers: int | None = None,
    progress: Optional[Progress] = None,
    *,
    rules: Sequence[RuleClass],
    packages: tuple[str, ...] = ("vllm",),
    host: HostWrap | None = None,
) -> LintOutcome:
    """``packages``/``host`` (issue 13): lint a platform plugin's repository (its
    ``packages``), each side combined by ``host`` with a pinned vLLM tree."""
    progress = progress or Progress(quiet=True)
    repo = repo_for(path)
    if repo.bare and head is None:
        raise GitError(f"{path} is a bare repository: give --head REF to lint a commit")
    work = Path(repo.working_tree_dir or path)
    try:
        base_tree = GitTree(repo, base, packages=packages)
    except NoVllmInTree as exc:
        raise GitError(str(exc)) from None
    if head is None:
        for package in packages:
            if not (work / package).is_dir():
                raise UsageError(f"no {package}/ package at the repository root {work}")
        head_tree: SourceTree = GitWorkTree(work, label="work tree", packages=packages,
                                            keep=tracked_or_unignored(repo, packages))
        progress.phase("lint: scanning the work tree")
        head_scan = run_scan(host(head_tree) if host else head_tree, config, rules, cache, workers)
    else:
        head_tree = GitTree(repo, head, packages=packages)
        progress.phase(f"lint: scanning {head}")
        if host is None:
            head_scan = _scan_git(head_tree, config, rules, cache, cache_root, workers)
        else:
            head_scan = run_scan(host(head_tree), config, rules, cache, workers, ResultCache(cache_root))
    head_result = head_scan.result
    progress.phase(f"lint: scanning {base} (cached after the first run)")
    if host is None:
        base_result = _scan_git(base_tree, config, rules, cache, cache_root, workers).result
    else:
        base_result = run_scan(host(base_tree), config, rules, cache, workers, ResultCache(cache_root)).result

    changed = changed_files(repo, base_tree.commit_sha, head_tree.commit_sha if isinstance(head_tree, GitTree) else None,
                            packages)
    changed_set = set(changed)

    base_fps = {f.fingerprint for f in base_result.findings}
    new: list[Finding] = []
    for f in head_result.findings:
        if f.fingerprint in base_fps or f.suppressed:
            continue
        on_chain = list(dict.fromkeys([f.path, *(h.path for h in f.trace)]))
        causes = [p for p in on_chain if p in changed_set]
        if causes and causes != [f.path]:
            f.message += f" [introduced by the change to {', '.join(causes)}]"
        elif not causes and changed:
            f.message += f" [introduced by the change to {', '.join(changed[:3])}{' …' if len(changed) > 3 else ''}]"
        new.append(f)
    new += unparsable_changes(head_tree, head_result, changed)
    # Issue 18 item 10: a removed by-design report (its rule's meaning) is a behaviour change, not a fix.
    meanings = meanings_of(rules)
    # What is gone, as history pairs it: a finding whose file moved persists; it is not fixed.
    removed = gone(base_result.findings, head_result.findings)
    changes = classify(base_result, head_result, new, base, meanings, removed=removed)
    if threads_now(changes):
        # What the newly threaded step does to each model (an assert on step 0 raises) is the
        # head's dispatch analysis's answer; a cached head result has none, so that side is
        # analysed again (facts are cached).
        analysis = head_scan.analysis
        if analysis is None:
            progress.phase("lint: analysing the linted side's loops")
            analysis = run_scan(host(head_tree) if host else head_tree, config, rules, cache, workers).analysis
        if analysis is not None:
            changes = classify(base_result, head_result, new, base, meanings, raises=analysis.dispatch.loop_step_raise,
                               removed=removed)
    fixed = changes.fixed
    result = ScanResult(root=head_result.root, findings=new, problems=head_result.problems, roots=head_result.roots,
                        lint=changes)
    result.stats = {
        "files": head_result.stats.get("files", 0),
        "findings": len(new),
        "base": base,
        "changed_files": len(changed),
        "fixed": len(fixed),
        "behaviour_changes": len(changes.behaviour_changes),
        "masked": len(changes.masked),
    }
    result.sort()
    return LintOutcome(result, changed, fixed, base_tree.label, head_tree.label, list(head_result.findings))


def unparsable_changes(tree: SourceTree, result: ScanResult, changed: list[str]) -> list[Finding]:
    """A finding per changed file of ``tree`` that cannot be decoded or parsed.

    The scan parses only the files the analysis reaches, so a changed file it skipped is
    parsed here (``ast.parse``: the code is read, never run)."""
    from ..index.index import decode_source

    present = set(tree.python_files())
    problems = {p.path: p for p in result.problems}
    out = []
    for path in changed:
        if path not in present:
            continue  # deleted
        line, reason = 0, ""
        problem = problems.get(path)
        if problem is not None:
            if problem.kind not in _UNPARSABLE:
                continue
            reason = problem.message
        else:
            try:
                ast.parse(decode_source(tree.read(path)), filename=path)
                continue
            except SyntaxError as exc:
                line, reason = exc.lineno or 0, f"line {exc.lineno}: {exc.msg}" if exc.lineno else exc.msg
            except (UnicodeDecodeError, LookupError, ValueError) as exc:
                reason = f"cannot decode: {exc}"
            except (RecursionError, MemoryError):
                reason = "expression nesting too deep to analyse"
            except OSError:
                continue  # unreadable files are listed as problems by the scan
        if not line and reason.startswith("line "):
            digits = reason[5:].split(":", 1)[0]
            line = int(digits) if digits.isdigit() else 0
        out.append(
            Finding(
                rule=PARSE_FAILURE_RULE,
                severity=Severity.ERROR,
                path=path,
                line=line,
                column=0,
                function="",
                callee="",
                message=f"changed file cannot be parsed ({reason}); the audit cannot see into it, so fix it first",
                fingerprint_key="parse",
            ).finalize()
        )
    return out


def fails(findings: list[Finding], fail_on: Severity) -> bool:
    return any(f.severity.rank >= fail_on.rank for f in findings if not f.suppressed)
