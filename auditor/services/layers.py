"""``layers``: plan which MTP layer runs at each draft step for the settings a command asks
about (one model and configuration, or every registered architecture x runner), with the
scan that makes the plans, and the cache of finished documents.

The analysis is :class:`auditor.analyses.dispatch.DispatchProvider`; the documents are
rendered by :mod:`auditor.output.layers`.
"""

from __future__ import annotations

import difflib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from ..analyses.analysis import Analysis
from ..analyses.dispatch import DispatchProvider, Plan, Setting
from ..analyses.dispatch.inputs import CONFIG_NAME, parse_speculative_config
from ..common.errors import UsageError
from ..common.gc_pause import cyclic_gc_paused
from ..output.layers import ENGINE_MODES, LAYERS_FORMAT_VERSION
from .citations import CITED_MEANINGS, cite
from .forced_plan import ForcedPlan, forced_plan

if TYPE_CHECKING:
    from ..common.progress import Progress
    from ..common.config import Config
    from ..engine.prepared import PreparedCache
    from ..engine.scan import RuleClass
    from ..facts.cache import FactsCache
    from ..source.trees import SourceTree

RUNNERS = ("v1", "v2")


def parse_set(values: list[str]) -> tuple[tuple[str, Any], ...]:
    """``FIELD=VALUE``: the value is read as JSON (3, true, null, [..]) or else as a string; a
    dotted FIELD sets a field of a nested config (``text_config.num_nextn_predict_layers=3``)."""
    out: list[tuple[str, Any]] = []
    for item in values:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not all(part.isidentifier() for part in name.split(".")):
            raise UsageError(f"--set takes FIELD=VALUE (a Python identifier, dotted for a nested config, '='), "
                             f"got {item!r}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        except RecursionError:
            raise UsageError(f"--set {name}: the JSON value is nested too deeply") from None
        out.append((name, value))
    return tuple(out)


def parse_env(values: list[str]) -> tuple[tuple[str, str], ...]:
    """``--env NAME=VALUE`` values: the environment as given, sorted by name (a name given twice
    with two values is refused)."""
    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep or not name or any(c.isspace() for c in name):
            raise UsageError(f"--env expects NAME=VALUE, got {item!r}")
        if name in out and out[name] != value:
            raise UsageError(f"--env {name} given twice ({out[name]!r} and {value!r}): give it once")
        out[name] = value
    return tuple(sorted(out.items()))


def read_hf_config(path: Path) -> str:
    """A target ``config.json``, given as the file or a model directory holding one."""
    if path.is_dir():
        if not (path / CONFIG_NAME).is_file():
            raise UsageError(f"--hf-config {path} is a directory without {CONFIG_NAME}")
        path = path / CONFIG_NAME
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
    except OSError as exc:
        raise UsageError(f"cannot read --hf-config {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise UsageError(f"--hf-config {path} is not a JSON file: {exc}") from None
    except RecursionError:
        raise UsageError(f"--hf-config {path}: JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise UsageError(f"--hf-config {path} must hold a JSON object (a model's config.json)")
    return text


def check_architecture(dispatch: DispatchProvider, arch: str) -> None:
    known = dispatch.architectures()
    if arch in known:
        return
    close = difflib.get_close_matches(arch, known, n=5, cutoff=0.4)
    hint = f"closest registered: {', '.join(close)}" if close else f"{len(known)} are registered (see `layers --all`)"
    raise UsageError(f"unknown draft architecture {arch!r}; {hint}")


@dataclass
class PlanQuery:
    """The plans a command asks for, declared before the scan: the settings ``choose`` picks
    are planned while the index loads (exploring a drafter may parse more files)."""

    choose: Callable[[DispatchProvider], list[Setting]]
    settings: list[Setting] = field(default_factory=list)

    def ask(self, analysis: Analysis) -> None:
        dispatch = analysis.get(DispatchProvider)
        # Replaced, not extended: a scan that starts over (auditor.engine.prepared) asks again.
        self.settings[:] = self.choose(dispatch)
        for s in self.settings:
            dispatch.plan(s)


def make_plans(dispatch: DispatchProvider, settings: list[Setting], findings: Any) -> list[Plan]:
    """The plans, each verdict naming the finding that explains it (:mod:`.citations`)."""
    return [cite(dispatch.plan(s), findings) for s in settings]


def matrix_settings(dispatch: DispatchProvider, runners: Sequence[str], k: int, layers: int, method: str | None = "mtp",
                    platform: str = "cuda", fields: tuple[tuple[str, Any], ...] = (),
                    env: tuple[tuple[str, str], ...] = (), env_given: bool = False) -> list[Setting]:
    """``--all``: every registered MTP architecture x runner, each given ``layers`` on its
    own layer-count field."""
    settings: list[Setting] = []
    for name, _cls in dispatch.step_free.planned_architectures():
        count = dispatch.layer_count_field(name, platform)
        extra = ((count, layers),) if count else ()
        settings.extend(Setting(r, k, method, platform, name, extra + fields, env=env, env_given=env_given)
                        for r in runners)
    return settings


def plan_tree(tree: "SourceTree", cfg: "Config", rules: Sequence["RuleClass"], facts: "FactsCache",
              choose: Callable[[DispatchProvider], list[Setting]], workers: int | None = None) -> list[Plan]:
    """Scan ``tree`` and plan the settings ``choose`` picks. Exploring a drafter may parse
    more files: the plans are made once while the index still loads, then again with the
    scan's findings (everything is memoised by then)."""
    return plan_tree_forced(tree, cfg, rules, facts, choose, workers, forced=False)[0]


def plan_tree_forced(tree: "SourceTree", cfg: "Config", rules: Sequence["RuleClass"], facts: "FactsCache",
                     choose: Callable[[DispatchProvider], list[Setting]], workers: int | None = None,
                     forced: bool = True, say: Optional[Callable[[str], None]] = None,
                     problems: Optional[list[Any]] = None,
                     prepared: "Optional[PreparedCache]" = None) -> tuple[list[Plan], list[ForcedPlan | None]]:
    """:func:`plan_tree`, and per plan its forced view (the layer selected when the loop hands
    the model step i; see :mod:`auditor.services.forced_plan`). Only the rules whose findings
    a plan can name run (:data:`~auditor.services.citations.CITED_MEANINGS`): the others'
    findings would be discarded, and on a new question they were most of the time.
    ``prepared``: the loading phase's results kept per tree (:mod:`auditor.engine.prepared`),
    so that a new question on a tree analysed before runs only its own plans."""
    from ..engine.scan import run_scan

    query = PlanQuery(choose)
    scan = run_scan(tree, cfg, cited_rules(rules), facts, workers, progress=say, queries=[query], prepared=prepared)
    assert scan.analysis is not None
    if problems is not None:  # what the plans could not see (the caller says so)
        problems.extend(scan.result.problems)
    dispatch = scan.analysis.get(DispatchProvider)
    plans = make_plans(dispatch, query.settings, scan.result.findings)
    views: list[ForcedPlan | None] = [forced_plan(dispatch, p, scan.result.findings) if forced else None for p in plans]
    return plans, views


def cited_rules(rules: Sequence["RuleClass"]) -> list["RuleClass"]:
    """The rules whose findings a plan may name (the rest cannot change a plan)."""
    return [r for r in rules if getattr(r, "meaning", None) in CITED_MEANINGS]


class RenderedCache:
    """``layers`` documents of unchanged trees (``<cache>/layers/``); a miss is recomputed."""

    def __init__(self, root: Optional[Path]) -> None:
        from ..engine.result_cache import KeyedFiles

        self.files = KeyedFiles(root, "layers", ".txt")
        self.root = root

    def key(self, tree: "SourceTree", cfg: "Config", rules: Sequence["RuleClass"], question: str) -> str:
        from ..engine.scan import rule_files, tree_digest
        from ..engine.result_cache import result_key

        # The document is planned here and rendered by output/layers.py with the shared output
        # helpers: this module and every output module are part of the key (the analyses are
        # in result_key's tool digest).
        from ..output import layers as renderer

        renderers = sorted(Path(renderer.__file__).parent.glob("*.py"))
        return result_key(f"layers:{LAYERS_FORMAT_VERSION}:{tree_digest(tree, self.root)}:{question}", cfg,
                          [*rule_files(rules), Path(__file__), *renderers], [r.code for r in rules])

    def get(self, key: str) -> Optional[str]:
        return self.files.read(key)

    def put(self, key: str, text: str) -> None:
        self.files.write(key, text)


def check_choice(option: str, value: str, choices: Sequence[str], command: str) -> str:
    """``value`` when it is one of ``choices`` (from the configuration), else the usage error
    the command line gives for any other bad choice."""
    if value not in choices:
        known = ", ".join(repr(c) for c in choices)
        raise UsageError(f"invalid value for '{option}': {value!r} is not one of {known} (see `mtp-audit {command} --help`)")
    return value


@cyclic_gc_paused  # the scan's heap lives on while the plans are made and rendered
def layers_document(
    path: Optional[Path], installed: bool, release: Optional[str], arch: Optional[str], hf_config: Optional[Path],
    k: Optional[int], all_: bool, layers: int, runner: Optional[str], method: Optional[str], set_: Optional[list[str]],
    platform: str, fmt: str, cache_dir: Optional[Path], no_cache: bool, config: Optional[Path],
    plugin: Optional[list[Path]], plugin_release: Optional[list[str]],
    speculative_config: Optional[str] = None, engine_mode: str = "both", progress: "Optional[Progress]" = None,
    env: Optional[list[str]] = None, clean_env: bool = False,
) -> str:
    """The ``layers`` document for one question: planned (or read from the cache of
    documents of unchanged trees) and rendered in ``fmt``."""
    from ..common.progress import Progress
    from ..facts.cache import FactsCache

    progress = progress or Progress(quiet=True)
    from ..output.layers import render, render_matrix
    from .settings import cache_root, load_settings, registered_rules
    from .targets import open_target, with_plugins

    if all_:
        if arch is not None or hf_config is not None:
            raise UsageError("--all plans every registered architecture: leave out --arch and --hf-config")
        k = 3 if k is None else k
    elif (arch is None) == (hf_config is None):
        raise UsageError("give exactly one of --arch DRAFT_ARCH or --hf-config config.json (or --all)")
    check_choice("--engine-mode", engine_mode, ENGINE_MODES, "layers")
    options: tuple[tuple[str, Any], ...] = ()
    if speculative_config is not None:
        # Exactly what `vllm serve --speculative-config` takes: method and K, and options set as given.
        spec = parse_speculative_config(speculative_config)
        if spec.k is not None and k is not None and spec.k != k:
            raise UsageError(f"--k {k} and --speculative-config num_speculative_tokens {spec.k} disagree: give one")
        k = spec.k if spec.k is not None else k
        if spec.method is not None and method is not None and spec.method != method:
            raise UsageError(f"--method {method} and --speculative-config method {spec.method} disagree: give one")
        # A speculative config without a method is asked with none, as vLLM is given it (its own
        # default decides: "draft_model", unless the model names another).
        method = spec.method if spec.method is not None else method
        options = spec.options
    elif method is None:
        method = "mtp"
    if k is None and speculative_config is None:
        raise UsageError("give --k K (num_speculative_tokens), or --speculative-config as vllm serve takes it")
    # A --speculative-config without num_speculative_tokens is asked as vLLM is given it: no K.
    steps: int | None = k
    fields = parse_set(set_ or [])
    environ = parse_env(env or [])
    env_given = bool(environ) or clean_env
    target = read_hf_config(hf_config) if hf_config is not None else None
    vllm_tree = open_target(path, installed, release, cache_dir, progress)
    cfg = load_settings(getattr(vllm_tree, "root", None), config, None, None)
    if runner is not None:
        check_choice("--runner", runner, cfg.runners(), "layers")
    check_choice("--platform", platform, cfg.platforms(), "layers")
    tree = with_plugins(vllm_tree, plugin, plugin_release, cache_dir, progress)
    runners = [runner] if runner is not None else list(cfg.runners())

    def choose(dispatch: DispatchProvider) -> list[Setting]:
        if all_:
            return matrix_settings(dispatch, runners, 3 if steps is None else steps, layers, method, platform, fields,
                                   environ, env_given)
        if arch is not None:
            check_architecture(dispatch, arch)
        return [Setting(r, steps, method, platform, arch, fields, target, options, environ, env_given=env_given)
                for r in runners]

    rules = registered_rules()
    root = cache_root(no_cache, cache_dir)
    # An unchanged tree asked the same question gives the same document: keep it, keyed like a
    # scan's cached result (tree, tool, rules, configuration) plus everything asked here.
    question = json.dumps(
        {"all": all_, "arch": arch, "target": target, "k": steps, "layers": layers, "runners": runners, "method": method,
         "platform": platform, "set": [list(f) for f in fields], "format": fmt, "label": tree.label,
         "options": [list(o) for o in options], "engine_mode": engine_mode, "env": [list(v) for v in environ],
         "env_given": env_given},
        sort_keys=True, default=str,
    )
    cached = RenderedCache(root)
    key = cached.key(tree, cfg, rules, question)
    text = cached.get(key)
    if text is None:
        progress.phase(f"planning {tree.label}")
        problems: list[Any] = []
        from ..engine.prepared import PreparedCache

        plans, forced = plan_tree_forced(tree, cfg, rules, FactsCache(root), choose, say=progress.phase, problems=problems,
                                         prepared=PreparedCache(root))
        text = (render_matrix(plans, fmt, tree.label, 3 if steps is None else steps, layers, forced) if all_
                else render(plans, fmt, tree.label, forced, engine_mode))
        unreadable = sorted({p.path for p in problems if p.kind not in ("symlink", "submodule")})
        if unreadable:
            # not -q-able: the answer may be incomplete. Not cached, so every run says it.
            shown = ", ".join(unreadable[:3]) + (" …" if len(unreadable) > 3 else "")
            sys.stderr.write(f"mtp-audit: warning: {len(unreadable)} file(s) could not be read or parsed ({shown}); "
                             "the plan may be missing what they hold\n")
        else:
            cached.put(key, text)
    return text
