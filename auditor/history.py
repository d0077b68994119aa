"""Findings across releases: ``history``, ``diff`` and ``bisect`` over a git repository.

Every revision is read straight from git objects (:class:`~auditor.gittree.GitTree`),
never checked out. Two caches make repeated runs cheap:

* the per-file facts cache (:class:`~auditor.cache.FactsCache`, ``<cache>/facts/``):
  a file unchanged between releases is parsed once;
* a per-revision *result* cache (``<cache>/history/<tree>-<key>.json``): the whole
  :class:`~auditor.model.ScanResult` of a ``vllm/`` tree, keyed by the git id of that
  ``vllm/`` tree, a digest of the analyzer's own source (tool version + every analysis
  module and rule) and the configuration. Writes are atomic; an unreadable, corrupt or
  foreign entry is recomputed; a read-only cache directory means no caching.

Findings are compared by fingerprint (rule, file, enclosing function, callee, rule key;
never a line), so code that only moved inside its file *persists*. Leftovers are then
paired: the same rule, function and callee in another file (a file rename or split), or
the same rule, file and function with another callee. Paired findings persist
(``moved``: new fingerprint -> old), never count as fixed plus introduced.

Typer commands (mounted by ``auditor.cli``): :func:`history_command`,
:func:`diff_command`, :func:`bisect_command`. The JSON document is described in
``auditor/HISTORY_FORMAT.md``.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, Sequence

import git
import typer
from packaging.version import Version

from .cache import FactsCache
from .config import Config
from .errors import GitError, UsageError
from .gittree import PACKAGE, GitTree, _tag_version, list_release_tags, NoVllmInTree, commits_between, is_shallow, open_repo, resolve_commit
from .atomic import emit
from .result_cache import ResultCache
from .model import Finding, ScanResult

if TYPE_CHECKING:
    from .engine import RuleClass

#: default --tags pattern: final releases, including 4-part and .postN versions (v0.10.1.1)
DEFAULT_TAG_PATTERN = r"^v\d+\.\d+\.\d+(\.\d+|\.post\d+)?$"
#: the default pattern with --pre: release candidates, alphas and betas too
DEFAULT_PRE_PATTERN = r"^v\d+\.\d+\.\d+(\.\d+|\.post\d+)?((a|b|rc)\d+)?$"


# --------------------------------------------------------------------------- data


@dataclass
class Release:
    """One revision of the history: a scanned tree, or a clearly marked skipped one."""

    ref: str
    commit: str = ""
    tree: str = ""  # git id of the vllm/ tree ("" when skipped)
    date: str = ""  # committer date, ISO 8601
    subject: str = ""
    skipped: str = ""  # why the revision was not scanned ("" when it was)
    result: Optional[ScanResult] = None
    seconds: float = 0.0  # not part of any report: differs between cold and warm runs
    from_cache: bool = False

    @property
    def scanned(self) -> bool:
        return self.result is not None


@dataclass
class Delta:
    """What changed from ``base`` (the previous scanned revision) to one revision."""

    base: Optional[str]
    introduced: list[Finding] = field(default_factory=list)  # findings of this revision
    fixed: list[Finding] = field(default_factory=list)  # findings of the base revision
    persisted: list[Finding] = field(default_factory=list)  # findings of this revision
    # persisting findings whose fingerprint changed: this revision's fingerprint -> base's
    moved: dict[str, str] = field(default_factory=dict)


@dataclass
class History:
    repository: str
    kind: str  # "history" or "diff"
    releases: list[Release]
    deltas: list[Optional[Delta]]  # parallel to releases; None for skipped ones
    timing: dict[str, Any] = field(default_factory=dict)  # not part of any report

    def scanned(self) -> list[Release]:
        return [r for r in self.releases if r.scanned]


# --------------------------------------------------------------------------- comparison


def identity(f: Finding) -> tuple[str, str, str]:
    """What survives a file move: rule, enclosing function and callee."""
    return (f.rule, f.function, f.callee)


def compare(base: list[Finding], head: list[Finding], base_ref: Optional[str] = None) -> Delta:
    """Introduced, fixed and persisting findings between two revisions.

    Fingerprints first (line moves are invisible to them); then leftover findings with
    the same rule, function and callee on both sides are paired as moved (persisting).
    """
    base_fp = {f.fingerprint: f for f in base}
    head_fp = {f.fingerprint: f for f in head}
    delta = Delta(base_ref)
    introduced = [f for f in head if f.fingerprint not in base_fp]
    fixed = [f for f in base if f.fingerprint not in head_fp]
    persisted = [f for f in head if f.fingerprint in base_fp]
    # Leftovers are paired in two passes: same rule, function and callee in another file
    # (a move), then same rule, file and function with another callee (the same defect
    # now reaching more or fewer callees). Either way the defect persists.
    still_introduced = sorted(introduced, key=Finding.sort_key)
    for key in (identity, lambda f: (f.rule, f.path, f.function)):
        gone: dict[tuple, list[Finding]] = defaultdict(list)
        taken = set(delta.moved.values())
        for f in fixed:
            if f.fingerprint not in taken:
                gone[key(f)].append(f)
        left = []
        for f in still_introduced:
            candidates = gone.get(key(f))
            if candidates:
                # prefer the candidate in a file of the same name (a directory move)
                candidates.sort(key=lambda o: (Path(o.path).name != Path(f.path).name, o.path, o.line))
                delta.moved[f.fingerprint] = candidates.pop(0).fingerprint
                persisted.append(f)
            else:
                left.append(f)
        still_introduced = left
    moved_old = set(delta.moved.values())
    delta.introduced = sorted(still_introduced, key=Finding.sort_key)
    delta.fixed = sorted((f for f in fixed if f.fingerprint not in moved_old), key=Finding.sort_key)
    delta.persisted = sorted(persisted, key=Finding.sort_key)
    return delta


def by_rule(findings: list[Finding]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for f in findings:
        counts[f.rule] += 1
    return dict(sorted(counts.items()))


# --------------------------------------------------------------------------- result cache



# --------------------------------------------------------------------------- scanning


class Scanner:
    """Scans revisions of one repository, sharing the facts cache and the result cache."""

    def __init__(
        self,
        repo: str | Path | git.Repo,
        config: Optional[Config] = None,
        cache_dir: Optional[Path] = None,
        workers: Optional[int] = None,
        *,
        rules: Sequence[RuleClass],
    ) -> None:
        self.repo = open_repo(repo)
        self.rules = list(rules)
        self.config = config or Config()
        self.facts = FactsCache(cache_dir)
        self.results = ResultCache(cache_dir)
        self.workers = workers
        self.scans = 0  # revisions analysed (not served from the result cache)

    @property
    def name(self) -> str:
        return str(Path(self.repo.working_tree_dir or self.repo.git_dir))

    def release(self, ref: str) -> Release:
        """Scan ``ref``; a tree without ``vllm/`` gives a skipped Release, not an error."""
        from .engine import run_scan

        commit = resolve_commit(self.repo, ref)
        rel = Release(
            ref=ref,
            commit=commit.hexsha,
            date=commit.committed_datetime.isoformat(),
            subject=commit.summary if isinstance(commit.summary, str) else commit.summary.decode("utf-8", "replace"),
        )
        started = time.perf_counter()
        try:
            tree = GitTree(self.repo, commit.hexsha, label=f"{ref}@{commit.hexsha[:12]}")
        except NoVllmInTree:
            rel.skipped = f"no {PACKAGE}/ directory in this tree"
            return rel
        rel.tree = tree.commit.tree[PACKAGE].hexsha
        scan = run_scan(tree, self.config, self.rules, self.facts, self.workers, self.results, tree_id=rel.tree)
        rel.result, rel.from_cache = scan.result, scan.analysis is None
        if scan.analysis is not None:
            self.scans += 1
        rel.seconds = time.perf_counter() - started
        return rel

    def close(self) -> None:
        self.repo.close()


def _progress(enabled: bool):
    """A rich progress bar on stderr, or a no-op when disabled."""
    if not enabled:
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[current]}"),
        console=Console(stderr=True),
        transient=False,
    )


def progress_wanted(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


def scan_refs(
    scanner: Scanner, refs: list[str], kind: str, progress: bool = False, label: str = "scanning"
) -> History:
    started = time.perf_counter()
    releases: list[Release] = []
    bar = _progress(progress)
    if bar is not None:
        bar.start()
        task = bar.add_task(label, total=len(refs), current="")
    try:
        for ref in refs:
            if bar is not None:
                bar.update(task, current=ref)
            releases.append(scanner.release(ref))
            if bar is not None:
                bar.advance(task)
        if bar is not None:
            bar.update(task, current="done")
    finally:
        if bar is not None:
            bar.stop()
    deltas: list[Optional[Delta]] = []
    prev: Optional[Release] = None
    for rel in releases:
        if not rel.scanned:
            deltas.append(None)
            continue
        assert rel.result is not None
        if prev is None:
            deltas.append(Delta(None, introduced=list(rel.result.findings)))
        else:
            assert prev.result is not None
            deltas.append(compare(prev.result.findings, rel.result.findings, prev.ref))
        prev = rel
    timing = {
        "seconds": time.perf_counter() - started,
        "scanned": scanner.scans,
        "from_cache": sum(1 for r in releases if r.from_cache),
    }
    return History(scanner.name, kind, releases, deltas, timing)


# --------------------------------------------------------------------------- history


def _version(tag: str) -> Optional[Version]:
    return _tag_version(tag)


def _bound(repo: git.Repo, tags: list[str], ref: str, what: str) -> Version:
    """The version a --from/--to bound stands for (a tag name or a version number)."""
    if ref in tags or ref.lstrip("vV") in {t.lstrip("vV") for t in tags}:
        v = _version(ref)
        assert v is not None
        return v
    v = _version(ref)
    if v is not None:
        return v
    # an arbitrary ref: accepted when it is a tag whose version we can read
    resolve_commit(repo, ref)  # a clear error for a bad ref
    raise UsageError(f"{what} {ref!r} is not a release tag or version (history walks tags in version order)")


def select_tags(
    repo: git.Repo, start: Optional[str], end: Optional[str], pattern: Optional[str], include_pre: bool
) -> list[str]:
    pattern = pattern or (DEFAULT_PRE_PATTERN if include_pre else DEFAULT_TAG_PATTERN)
    name = str(Path(repo.working_tree_dir or repo.git_dir))
    if not _has_commits(repo):
        raise GitError(f"repository {name} is empty (no commits)")
    tags = list_release_tags(repo, pattern, include_pre)
    shallow = is_shallow(repo)
    if not tags:
        hint = " (it is a shallow clone: git fetch --unshallow --tags)" if shallow else ""
        raise GitError(f"no release tags matching {pattern!r} in {name}{hint}")
    lo = _bound(repo, tags, start, "--from") if start else None
    hi = _bound(repo, tags, end, "--to") if end else None
    if lo is not None and hi is not None and lo > hi:
        raise UsageError(f"--from {start} is newer than --to {end}")
    chosen = [t for t in tags if (lo is None or _version(t) >= lo) and (hi is None or _version(t) <= hi)]  # type: ignore[operator]
    if not chosen:
        raise GitError(f"no release tags between {start or tags[0]} and {end or tags[-1]} in {name}")
    if shallow:  # every chosen tag's commit and tree must be present
        for t in chosen:
            try:
                resolve_commit(repo, t)
            except GitError as exc:
                raise GitError(f"{exc} (shallow clone: git fetch --unshallow --tags)") from None
    return chosen


def _has_commits(repo: git.Repo) -> bool:
    try:
        return bool(repo.git.rev_list("--all", "--max-count=1").strip())
    except git.GitCommandError:
        return False


def run_history(
    repo: str | Path,
    start: Optional[str] = None,
    end: Optional[str] = None,
    pattern: Optional[str] = None,
    include_pre: bool = False,
    config: Optional[Config] = None,
    cache_dir: Optional[Path] = None,
    workers: Optional[int] = None,
    progress: bool = False,
    *,
    rules: Sequence["RuleClass"],
) -> History:
    scanner = Scanner(repo, config, cache_dir, workers, rules=rules)
    try:
        tags = select_tags(scanner.repo, start, end, pattern, include_pre)
        return scan_refs(scanner, tags, "history", progress, "releases")
    finally:
        scanner.close()


def run_diff(
    repo: str | Path,
    base: str,
    head: str,
    config: Optional[Config] = None,
    cache_dir: Optional[Path] = None,
    workers: Optional[int] = None,
    progress: bool = False,
    *,
    rules: Sequence["RuleClass"],
) -> History:
    scanner = Scanner(repo, config, cache_dir, workers, rules=rules)
    try:
        for ref in (base, head):
            _resolve(scanner.repo, ref)
        hist = scan_refs(scanner, [base, head], "diff", progress, "diff")
    finally:
        scanner.close()
    for rel in hist.releases:
        if not rel.scanned:
            raise GitError(f"{rel.ref} ({rel.commit[:12]}) has no {PACKAGE}/ directory at the repository root")
    return hist


def _resolve(repo: git.Repo, ref: str) -> git.Commit:
    try:
        return resolve_commit(repo, ref)
    except GitError as exc:
        msg = str(exc)
        if is_shallow(repo) and "shallow" not in msg:
            msg += " (the repository is a shallow clone: git fetch --unshallow --tags)"
        raise GitError(msg) from None


# --------------------------------------------------------------------------- bisect


@dataclass
class BisectResult:
    fingerprint: str
    direction: str  # "introduced" or "fixed"
    good: str
    bad: str
    commit: str
    subject: str
    date: str
    finding: Finding  # at the first bad commit (introduced) or the last commit having it (fixed)
    candidates: int  # commits between good (excluded) and bad (included)
    scans: int  # revisions examined, endpoints included
    steps: list[tuple[str, bool]] = field(default_factory=list)  # (commit, finding present)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": 1,
            "kind": "bisect",
            "fingerprint": self.fingerprint,
            "direction": self.direction,
            "good": self.good,
            "bad": self.bad,
            "commit": self.commit,
            "subject": self.subject,
            "date": self.date,
            "finding": self.finding.to_json(),
            "candidates": self.candidates,
            "scans": self.scans,
            "steps": [{"commit": c, "present": p} for c, p in self.steps],
        }


def _find(findings: list[Finding], fingerprint: str, ident: Optional[tuple] = None) -> Optional[Finding]:
    for f in findings:
        if f.fingerprint == fingerprint:
            return f
    if ident is not None:  # the same defect after its file moved
        for f in findings:
            if identity(f) == ident:
                return f
    return None


def run_bisect(
    repo: str | Path,
    fingerprint: str,
    good: str,
    bad: str,
    config: Optional[Config] = None,
    cache_dir: Optional[Path] = None,
    workers: Optional[int] = None,
    progress: bool = False,
    *,
    rules: Sequence["RuleClass"],
) -> BisectResult:
    """The first commit in ``good..bad`` whose presence of the finding matches ``bad``'s.

    Presence is by fingerprint, or by rule + function + callee when the file moved.
    A commit without ``vllm/`` counts as not having the finding.
    """
    fp = fingerprint.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{1,64}", fp):
        raise UsageError(f"bad fingerprint {fingerprint!r}: fingerprints are hex ids as `scan` prints them")
    scanner = Scanner(repo, config, cache_dir, workers, rules=rules)
    try:
        for ref in (good, bad):
            _resolve(scanner.repo, ref)
        commits = commits_between(scanner.repo, good, bad)
        if not commits:
            raise UsageError(f"--good {good} and --bad {bad} are the same commit: nothing to bisect")
        ends = {}
        for ref, what in ((good, "--good"), (bad, "--bad")):
            rel = scanner.release(ref)
            if not rel.scanned:
                raise GitError(f"{what} {ref} ({rel.commit[:12]}) has no {PACKAGE}/ directory at the repository root")
            ends[what] = rel
        g_findings = ends["--good"].result.findings  # type: ignore[union-attr]
        b_findings = ends["--bad"].result.findings  # type: ignore[union-attr]
        matches = sorted({f.fingerprint for f in g_findings + b_findings if f.fingerprint.startswith(fp)})
        if not matches:
            raise UsageError(f"no finding with fingerprint {fingerprint!r} at {good} or {bad}")
        if len(matches) > 1:
            raise UsageError(f"fingerprint {fingerprint!r} is ambiguous: {', '.join(matches)}")
        fp = matches[0]
        sample = _find(g_findings + b_findings, fp)
        assert sample is not None
        ident = identity(sample)
        at_good = _find(g_findings, fp, ident)
        at_bad = _find(b_findings, fp, ident)
        if (at_good is None) == (at_bad is None):
            where = "present at both" if at_good is not None else "absent at both"
            raise UsageError(f"finding {fp} is {where} --good {good} and --bad {bad}: nothing to bisect")
        want = at_bad is not None  # the state the first "bad" commit has
        direction = "introduced" if want else "fixed"

        steps: list[tuple[str, bool]] = []
        state: dict[int, Optional[Finding]] = {len(commits) - 1: at_bad}
        bar = _progress(progress)
        total = max(1, (len(commits) - 1).bit_length())
        if bar is not None:
            bar.start()
            task = bar.add_task("bisect", total=total, current="")
        try:
            lo, hi = 0, len(commits) - 1
            while lo < hi:
                mid = (lo + hi) // 2
                if bar is not None:
                    bar.update(task, current=commits[mid][:12])
                rel = scanner.release(commits[mid])
                found = _find(rel.result.findings, fp, ident) if rel.result is not None else None
                state[mid] = found
                steps.append((commits[mid], found is not None))
                if (found is not None) == want:
                    hi = mid
                else:
                    lo = mid + 1
                if bar is not None:
                    bar.advance(task)
        finally:
            if bar is not None:
                bar.stop()
        first = lo
        if want:
            finding = state.get(first) or at_bad
        else:
            # the last revision that still had it: the one before the fix, or --good
            finding = state.get(first - 1) if first > 0 and state.get(first - 1) is not None else None
            if finding is None:
                if first > 0:
                    prev = scanner.release(commits[first - 1])
                    finding = _find(prev.result.findings, fp, ident) if prev.result is not None else None
                finding = finding or at_good
        commit = scanner.repo.commit(commits[first])
        subject = commit.summary if isinstance(commit.summary, str) else commit.summary.decode("utf-8", "replace")
        assert finding is not None
        return BisectResult(
            fingerprint=fp,
            direction=direction,
            good=good,
            bad=bad,
            commit=commit.hexsha,
            subject=subject,
            date=commit.committed_datetime.isoformat(),
            finding=finding,
            candidates=len(commits),
            scans=2 + len(steps),
            steps=steps,
        )
    finally:
        scanner.close()


# --------------------------------------------------------------------------- commands


class ReportFormat(str, Enum):
    text = "text"
    markdown = "markdown"
    html = "html"
    json = "json"


class BisectFormat(str, Enum):
    text = "text"
    json = "json"


RepoArg = Annotated[Path, typer.Argument(metavar="REPO", help="A git repository of vLLM (a clone, or one made by `releases import`).")]
OutputOpt = Annotated[Optional[Path], typer.Option("--output", "-o", help="Write the report to a file instead of stdout.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar on stderr.")]
CacheDirOpt = Annotated[
    Optional[Path], typer.Option("--cache-dir", help="Cache directory (default: $MTP_AUDIT_CACHE_DIR or ~/.cache/mtp-audit).")
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the facts and result caches.")]
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", help="pyproject.toml with a [tool.mtp-audit] table.")]
WorkersOpt = Annotated[Optional[int], typer.Option("--workers", min=1, max=64, help="Parser processes for a cold scan.")]


def selected_rules() -> list["RuleClass"]:
    """The command line hands the engine its rules (the engine never imports them)."""
    from rules import all_rules

    return list(all_rules())


def _settings(config: Optional[Path], no_cache: bool, cache_dir: Optional[Path]) -> tuple[Config, Optional[Path]]:
    from .config import load_config
    from .paths import default_cache_dir

    if config is not None and not config.is_file():
        raise UsageError(f"configuration file not found: {config}")
    cfg = load_config(config)
    return cfg, None if no_cache else (cache_dir or default_cache_dir())


def history_command(
    repo: RepoArg,
    start: Annotated[Optional[str], typer.Option("--from", metavar="TAG", help="First release (tag or version), inclusive.")] = None,
    end: Annotated[Optional[str], typer.Option("--to", metavar="TAG", help="Last release (tag or version), inclusive.")] = None,
    tags: Annotated[
        Optional[str],
        typer.Option("--tags", metavar="PATTERN", help=f"Regular expression release tags must match (default {DEFAULT_TAG_PATTERN}).")
    ] = None,
    pre: Annotated[bool, typer.Option("--pre", help="Include pre-releases (rc, alpha, beta).")] = False,
    format: Annotated[ReportFormat, typer.Option("--format", "-f", help="Report format.")] = ReportFormat.text,
    output: OutputOpt = None,
    quiet: QuietOpt = False,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    config: ConfigOpt = None,
    workers: WorkersOpt = None,
) -> None:
    """Scan every release tag of a vLLM repository; what each release introduced, fixed and kept."""
    from .history_report import render

    cfg, cache = _settings(config, no_cache, cache_dir)
    hist = run_history(repo, start, end, tags, pre, cfg, cache, workers, progress_wanted(quiet), rules=selected_rules())
    emit(render(hist, format.value), output)
    if not quiet and sys.stderr.isatty():
        t = hist.timing
        typer.echo(
            f"{len(hist.releases)} releases in {t['seconds']:.1f}s ({t['scanned']} scanned, {t['from_cache']} from cache)",
            err=True,
        )


def diff_command(
    repo: RepoArg,
    base: Annotated[str, typer.Argument(metavar="A", help="The base revision (tag, branch or commit).")],
    head: Annotated[str, typer.Argument(metavar="B", help="The revision compared with A.")],
    format: Annotated[ReportFormat, typer.Option("--format", "-f", help="Report format.")] = ReportFormat.text,
    output: OutputOpt = None,
    exit_zero: Annotated[bool, typer.Option("--exit-zero", help="Exit 0 even when B introduces findings.")] = False,
    quiet: QuietOpt = False,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    config: ConfigOpt = None,
    workers: WorkersOpt = None,
) -> None:
    """Compare the findings of two revisions: introduced, fixed and persisting (exit 1 if B introduces any)."""
    from .history_report import render

    cfg, cache = _settings(config, no_cache, cache_dir)
    hist = run_diff(repo, base, head, cfg, cache, workers, progress_wanted(quiet), rules=selected_rules())
    emit(render(hist, format.value), output)
    delta = hist.deltas[-1]
    raise typer.Exit(1 if delta is not None and delta.introduced and not exit_zero else 0)


def bisect_command(
    repo: RepoArg,
    fingerprint: Annotated[str, typer.Argument(metavar="FINGERPRINT", help="The finding's fingerprint (or a unique prefix).")],
    good: Annotated[str, typer.Option("--good", metavar="A", help="An older revision.")],
    bad: Annotated[str, typer.Option("--bad", metavar="B", help="A newer revision (A must be its ancestor).")],
    format: Annotated[BisectFormat, typer.Option("--format", "-f", help="Output format.")] = BisectFormat.text,
    output: OutputOpt = None,
    quiet: QuietOpt = False,
    cache_dir: CacheDirOpt = None,
    no_cache: NoCacheOpt = False,
    config: ConfigOpt = None,
    workers: WorkersOpt = None,
) -> None:
    """Find the commit that introduced (or fixed) a finding, by binary search between --good and --bad."""
    cfg, cache = _settings(config, no_cache, cache_dir)
    res = run_bisect(repo, fingerprint, good, bad, cfg, cache, workers, progress_wanted(quiet), rules=selected_rules())
    if format == BisectFormat.json:
        text = json.dumps(res.to_json(), indent=2, sort_keys=False) + "\n"
    else:
        text = format_bisect(res)
    emit(text, output)


def format_bisect(res: BisectResult) -> str:
    f = res.finding
    lines = [
        f"{res.commit} is the first commit where finding {res.fingerprint} is {res.direction}",
        f"subject: {res.subject}",
        f"date:    {res.date}",
        f"searched {res.candidates} commits between {res.good} and {res.bad} with {res.scans} scans",
        "",
        f"{f.rule} {f.severity.value} {f.path}:{f.line}:{f.column + 1} {f.function}",
        f"  {f.message}",
    ]
    for i, hop in enumerate(f.trace, 1):
        lines.append(f"  {i}. {hop.path}:{hop.line} {hop.function} — {hop.note}")
    return "\n".join(_clean(line) for line in lines) + "\n"


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _clean(s: str) -> str:
    return _CONTROL.sub("?", s)
