"""What a scan's loading phase leaves behind, kept for the next question on the same tree
(``<cache>/prepared/``): ``layers`` asks a new configuration of a tree it analysed before.

The loading phase (:meth:`auditor.analyses.analysis.Analysis.prepare`: the draft loops,
the rules' scope, capture, dispatch routes) reads no configuration a command asks about;
only a command's queries (:class:`auditor.engine.scan.Query`: the plans) do. An entry holds
the part of a scan that does not depend on them:

- the files the index held when the loading phase ended, with their facts-cache keys, and
  the index's seeds, suppression files, premarked capture files and problems;
- the drafters' draft loops the loading phase explored (the dispatch routes' drafters), the
  attribute and return types it inferred, the registry's classes, where the dispatch
  factories are and the capture analysis's answers, as they were found: the most expensive part
  of a plan, and answers that, found again over all the files at once instead of as they
  were loaded, could reach other files;
- per set of files the queries went on to load (the override code a plan evaluates, say),
  the findings of the rules, which run after the queries: every analysis whose answer
  depends on which files are loaded ran in the loading phase, so what the rules find depends
  on the tree and on the files loaded when they run, not on what was asked.

A new question fills the index with the recorded files straight from the facts cache and
the drafters' explored loops with the recorded ones, does not run the loading phase's other
analyses again (what its plans need beyond those is computed on demand over the same files), asks its queries, and takes the findings recorded for the files its queries
loaded. When no findings were recorded for those (another set of files), the scan starts
over on the ordinary path and the entry gains them. Neither path runs for platform plugins
(their patches are installed in the loading phase).

The key covers the tree's content (:func:`~auditor.engine.scan.tree_digest`), the tool's
analysis code (:func:`~auditor.engine.result_cache.tool_digest`), the rules (their code and
source) and the effective configuration; never a question. Entries are sealed
(:mod:`auditor.common.cache_entry`) msgspec JSON decoded into typed records: a truncated,
edited or foreign entry is a miss and is recomputed, never trusted. Never pickle.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Sequence

import msgspec

from ..common.config import Config
from ..facts.cache import FactsCache
from ..index.index import Index, LazyFacts
from ..analyses.analysis import Analysis
from ..analyses.loops import LoopEntry, LoopResult, LoopSelection, StepKind
from ..analyses.capture.model import CaptureAnswers
from ..analyses.types import TypeProvider
from ..model.findings import Finding, Hop, Problem
from .result_cache import KeyedFiles, result_key

# Bump when the entry's meaning changes without its records' shape changing.
PREPARED_FORMAT = 1


class LoadedFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    path: str
    facts_key: str | None  # None: the index holds no facts for it (unreadable, unparsable)


class IndexState(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What the index held when the loading phase ended, in the order it was loaded."""

    files: list[LoadedFile]
    seeds: list[str]
    suppression_files: list[str]
    premarked: dict[str, list[str]]
    problems: list[tuple[str, str, str]]


class LoopRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One explored draft loop of a drafter (:class:`~auditor.analyses.loops.LoopResult`); the
    loop itself is the facts' own (by id, in ``func``)."""

    drafter: tuple[str, str]
    method: tuple[str, str]  # the drafter's method the memo files it under
    func: tuple[str, str]
    loop_id: int
    hop: Hop
    entries: list[LoopEntry]
    selections: list[LoopSelection]
    arrivals: list[tuple[tuple[str, str], str, list[StepKind]]]


class TypeMemos(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """:class:`~auditor.analyses.types.TypeProvider`'s answers: (class, attribute) and
    (function, receiver class) -> classes."""

    attrs: list[tuple[tuple[str, str], str, list[tuple[str, str]]]]
    returns: list[tuple[tuple[str, str], tuple[str, str] | None, list[tuple[str, str]]]]


class DispatchAnswers(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The registry's classes and the dispatch factories' and overrides' locations."""

    registry: list[tuple[tuple[str, str], list[str]]] | None
    model_classes: list[tuple[str, str]] | None
    located: dict[str, list[tuple[str, str]]] | None


class FindingRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A finding with what its JSON leaves out (identity key, meaning): a plan cites it."""

    json: dict[str, object]
    fingerprint_key: str
    callee_key: str | None
    meaning: str | None


class Variant(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The rules' findings when the queries had loaded ``extra`` (paths, in load order)."""

    extra: list[str]
    findings: list[FindingRecord]


class LoadingPhase(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a scan's loading phase left behind (none of it reads a command's question)."""

    index: IndexState
    loops: list[LoopRecord]
    types: TypeMemos
    capture: CaptureAnswers
    dispatch: DispatchAnswers


class PreparedEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    format: int
    key: str
    phase: LoadingPhase
    variants: list[Variant]

    def findings_for(self, extra: Sequence[str]) -> list[Finding] | None:
        wanted = set(extra)
        for v in self.variants:
            if set(v.extra) == wanted:
                return restore_findings(v.findings)
        return None


# Findings are kept for this many sets of files the queries loaded (most questions load the same).
MAX_VARIANTS = 8


_decoder = msgspec.json.Decoder(PreparedEntry)
_encoder = msgspec.json.Encoder()


def index_state(index: Index) -> IndexState:
    return IndexState(
        files=[LoadedFile(p, index.facts_keys.get(p) if f is not None else None) for p, f in index.facts.items()],
        seeds=list(index.seeds),
        suppression_files=list(index.suppression_files),
        premarked={w.decode("latin-1"): list(ps) for w, ps in index.premarked.items()} if index.premark_done else {},
        problems=[(p.path, p.kind, p.message) for p in index.problems.values()],
    )


def loop_records(explored: dict[tuple[tuple[str, str], tuple[str, str], int], LoopResult]) -> list[LoopRecord]:
    return [LoopRecord(drafter, fkey, r.func, loop_id, r.hop, list(r.entries), list(r.selections),
                       sorted((f, p, sorted(kinds, key=lambda k: k.value)) for (f, p), kinds in r.arrivals.items()))
            for (drafter, fkey, loop_id), r in explored.items()]


def restore_loops(index: Index, records: Sequence[LoopRecord],
                  explored: dict[tuple[tuple[str, str], tuple[str, str], int], LoopResult]) -> bool:
    """Give a drafter-loop memo the recorded results (False: a loop is not in the restored
    index's facts: a miss)."""
    for rec in records:
        fn = index.function(rec.func)
        loop = next((lp for lp in fn.loops if lp.id == rec.loop_id), None) if fn is not None else None
        if loop is None:
            return False
        explored[(rec.drafter, rec.method, rec.loop_id)] = LoopResult(
            rec.func, loop, rec.hop, list(rec.entries), list(rec.selections),
            {(f, p): set(kinds) for f, p, kinds in rec.arrivals})
    return True


def type_memos(types: TypeProvider) -> TypeMemos:
    attrs, returns = types.memos()
    return TypeMemos([(c, a, list(v)) for (c, a), v in attrs.items()], [(f, c, list(v)) for (f, c), v in returns.items()])


def restore_types(types: TypeProvider, memos: TypeMemos) -> None:
    attrs, returns = types.memos()
    attrs.update(((c, a), tuple(v)) for c, a, v in memos.attrs)
    returns.update(((f, c), tuple(v)) for f, c, v in memos.returns)


def restore_index(index: Index, state: IndexState) -> bool:
    """Fill a fresh index with ``state``'s files (facts from the facts cache; a file whose
    facts are gone is read and extracted again). False when the index cannot be the
    recorded one (a file the entry names is no longer readable or parsable): a miss."""
    assert not index.facts, "a fresh index"
    index.facts = LazyFacts()  # a new question reads less than half of the files' facts
    index.seeds = list(state.seeds)
    index.suppression_files = list(state.suppression_files)
    premarked = {w.encode("latin-1"): list(ps) for w, ps in state.premarked.items()}
    if set(premarked) == set(index.premarked):  # the same capture words (the key covers the settings)
        index.premarked, index.premark_done = premarked, True
    for lf in state.files:
        if lf.facts_key is None:
            index.facts[lf.path] = None
            continue
        if not index.load_keyed(lf.path, lf.facts_key):
            return False
    index.problems = {p: Problem(p, kind, msg) for p, kind, msg in state.problems}
    return True


def record_phase(analysis: Analysis) -> LoadingPhase:
    """The loading phase's state, taken when it ends (before any query is asked)."""
    registry, model_classes = analysis.registry.registered()
    return LoadingPhase(index_state(analysis.index), loop_records(analysis.dispatch.drafting.explored_loops()),
                        type_memos(analysis.types), analysis.capture.answers(),
                        DispatchAnswers(registry, model_classes, analysis.dispatch.location.located()))


def restore_phase(analysis: Analysis, phase: LoadingPhase) -> bool:
    """A fresh scan's index and analyses given the recorded loading phase (False: the index
    cannot be the recorded one: a miss)."""
    if not restore_index(analysis.index, phase.index):
        return False
    if not restore_loops(analysis.index, phase.loops, analysis.dispatch.drafting.explored_loops()):
        return False
    restore_types(analysis.types, phase.types)
    analysis.capture.restore(phase.capture)
    analysis.registry.restore(phase.dispatch.registry, phase.dispatch.model_classes)
    if phase.dispatch.located is not None:
        analysis.dispatch.location.restore_located(phase.dispatch.located)
    return True


def record_findings(findings: Sequence[Finding]) -> list[FindingRecord]:
    return [FindingRecord(f.to_json(), f.fingerprint_key, f.callee_key, f.meaning.value if f.meaning else None)
            for f in findings]


def restore_findings(records: Sequence[FindingRecord]) -> list[Finding]:
    from ..model.findings import Meaning

    return [replace(Finding.from_json(r.json), fingerprint_key=r.fingerprint_key, callee_key=r.callee_key,
                    meaning=Meaning(r.meaning) if r.meaning is not None else None) for r in records]


class PreparedCache:
    """Entries under ``<cache>/prepared/``; no root (``--no-cache``): reads and writes nothing."""

    def __init__(self, root: Path | None) -> None:
        self.files = KeyedFiles(root, "prepared")

    @property
    def enabled(self) -> bool:
        return self.files.root is not None

    @staticmethod
    def key(tree_id: str, config: Config, rule_files: Sequence[Path], rule_codes: Sequence[str]) -> str:
        return result_key(f"prepared:{PREPARED_FORMAT}:{tree_id}", config, rule_files, rule_codes)

    def get(self, key: str) -> PreparedEntry | None:
        text = self.files.read(key)
        if text is None:
            return None
        try:
            entry = _decoder.decode(text)
            if entry.format != PREPARED_FORMAT or entry.key != key:
                raise ValueError("foreign entry")
            for v in entry.variants:
                restore_findings(v.findings)  # every record is a finding
        except (ValueError, KeyError, TypeError, msgspec.DecodeError, RecursionError):
            self.files.discard(key)
            return None
        return entry

    def put(self, key: str, phase: LoadingPhase, extra: Sequence[str], findings: Sequence[Finding]) -> None:
        """Record the findings for the files ``extra`` the queries loaded beyond ``phase``'s,
        beside those an entry for the same loading phase holds already."""
        variant = Variant(list(extra), record_findings(findings))
        old = self.get(key)
        kept = [v for v in old.variants if set(v.extra) != set(extra)] if old is not None and old.phase == phase else []
        entry = PreparedEntry(PREPARED_FORMAT, key, phase, (kept + [variant])[-MAX_VARIANTS:])
        self.files.write(key, _encoder.encode(entry).decode("utf-8"))


def usable(tree: object, facts: FactsCache | None) -> bool:
    """Whether a tree's scan may use the cache: no platform plugins (:mod:`auditor.source.trees`'
    combined tree), and a facts cache to fill the index from."""
    from ..source.trees import CombinedTree

    return not isinstance(tree, CombinedTree) and facts is not None and facts.root is not None

