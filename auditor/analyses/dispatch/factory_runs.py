"""One concrete configuration through the dispatch code: the draft config (given, or the
target's run through the override functions) and the drafters a runner's factory builds."""

from __future__ import annotations

import copy
import json
from collections import Counter
from typing import TYPE_CHECKING, Any, NamedTuple

import msgspec

from ...facts.extract import FunctionFact, PCall, PName, SAssign, SIf, SRaise, SReturn, Stmt
from ...index.index import ClassKey, FuncKey
from ...model.findings import Hop
from ..partial_eval import Decision, Instance, Obj, Path, Unknown, Value
from .model import CUT, Setting
from .declared import draft_model_config, with_text_config
from .syntax import to_obj
from .outcomes import Rejection
from .part import DispatchPart

if TYPE_CHECKING:
    from .provider import DispatchProvider
    from .spec_fields import Construction


class DraftConfig(NamedTuple):
    """The draft's hf config, the override's decisions and notes, and its raise when it raises
    on every path for the config (vLLM fails building the draft config: rejected)."""

    hf: Obj | None
    decisions: list[Decision]
    notes: list[str]
    rejections: tuple[Rejection, ...] = ()


class FactoryRuns(DispatchPart):
    def __init__(self, provider: "DispatchProvider") -> None:
        super().__init__(provider)
        # setting -> (files the index held, draft config): a plan asks for it twice (its
        # own and the factory run's); the same computation over the same files is done once.
        self._draft_memo: dict[Setting, tuple[int, DraftConfig]] = {}
        # What the draft config is derived from (not the runner, K, method, platform or the
        # speculative options: it never reads them) -> (files held, draft config, the cuts
        # the derivation made): settings that differ elsewhere (v1 and v2 of one
        # architecture) share one derivation, and each counts its cuts as its own run would.
        self._derived_memo: dict[tuple[object, ...], tuple[int, DraftConfig, Counter[str]]] = {}
        # factory -> (files held, its dispatch lines, its pruned body): what a run evaluates does
        # not depend on the configuration (the load routes run each factory per architecture)
        self._pruned: dict[FuncKey, tuple[int, FunctionFact, set[int], FunctionFact]] = {}

    def draft_config(self, setting: Setting) -> DraftConfig:
        """The draft's hf config: given (``--arch``/``--set``) or the target's config run
        through the override code (``--hf-config``). Each caller gets its own copy (callers
        add to the notes and fields)."""
        held = len(self.index.facts)
        try:
            memo = self._draft_memo.get(setting)
        except TypeError:  # a --set value that is a list or an object: not hashable, not kept
            return self._draft_config(setting)
        if memo is not None and memo[0] == held:
            return copy.deepcopy(memo[1])
        source = (setting.architecture, setting.fields, setting.target_config, self._own_checkpoint(setting))
        shared = self._derived_memo.get(source)
        if shared is not None and shared[0] == held:
            self.limits.hits.update(shared[2])
            self._draft_memo[setting] = (held, shared[1])
            return copy.deepcopy(shared[1])
        before = Counter(self.limits.hits)
        made = self._draft_config(setting)
        if len(self.index.facts) == held:
            kept = copy.deepcopy(made)
            self._draft_memo[setting] = (held, kept)
            self._derived_memo[source] = (held, kept, self.limits.hits - before)
        return made

    def _own_checkpoint(self, setting: Setting) -> bool:
        """Whether the speculative config names a draft model of its own (``model``): a given
        draft config (``--arch``/``--set``) is then that checkpoint's ``config.json``, which
        vLLM loads through the override (``ModelConfig(model=..., hf_overrides=
        SpeculativeConfig.hf_config_override)``), as it does the target's when none is named."""
        name = self.roles.get("draft_name", "model")
        return setting.target_config is None and any(k == name and v is not None for k, v in setting.options)

    def _draft_config(self, setting: Setting) -> DraftConfig:
        notes: list[str] = []
        hf_label = self.roles["hf"]
        field_name = self.config.override_field[0]
        if setting.target_config is None:
            fields: dict[str, Value] = {}
            own = self._own_checkpoint(setting)
            if setting.architecture:
                # What the override code writes for this family (literals), then --set.
                fields.update(self.provider.family_facts.family_fields(setting.architecture))
                fields[field_name] = [setting.architecture]
                if not own:  # a checkpoint's config gets them from the override run below
                    computed = self._family_computed(setting.architecture, set_fields(fields, setting.fields), notes)
                    fields.update({k: v for k, v in computed.items() if k not in fields})
            fields = set_fields(fields, setting.fields)
            given = Obj(hf_label, fields, closed=True)
            if own:
                # A draft checkpoint's own config (an object value is a sub-config, as in the
                # target's config.json): run through the override as vLLM loads it.
                given = Obj(hf_label, {k: to_obj(f"{hf_label}.{k}", v) if isinstance(v, dict) else v
                                       for k, v in fields.items()}, closed=True)
                self.provider.config_classes.apply(given)
                return self._overridden(given, notes)
            return DraftConfig(self._derived(given, notes), [], notes)
        data = json.loads(setting.target_config)
        hf = to_obj(hf_label, data)
        self.provider.config_classes.apply(hf)  # as vLLM loads it: its config class's defaults
        hf.fields = set_fields(hf.fields, setting.fields)
        return self._overridden(hf, notes)

    def _overridden(self, hf: Obj, notes: list[str]) -> DraftConfig:
        """A checkpoint's config (the target's, or a draft model's own) run through the
        override functions, every path joined, as vLLM rewrites it into the draft config;
        the raise of an override that raises on every path (``run_joined`` keeps a raising
        path only then) rejects it."""
        hf_label = self.roles["hf"]
        field_name = self.config.override_field[0]
        decisions: list[Decision] = []
        rejections: list[Rejection] = []
        ev = self.evaluator()
        for okey in self.provider.location.overrides():
            fn = self.index.function(okey)
            if fn is None:
                continue
            params = [p.name for p in fn.params if p.name not in ("self", "cls")]
            arg = hf_label if hf_label in params else (params[0] if params else hf_label)
            # Every path, joined: a field the paths write differently is unknown.
            p = ev.run_joined(okey, fn, {arg: hf})
            decisions += [d for d in p.decisions if d.value is not False]
            if isinstance(p.returned, Obj):
                hf = p.returned
            elif isinstance(p.returned, Unknown) and not p.raised:
                # The draft config is what the override returns, and that is unknown (past a
                # cut, or code the evaluator cannot run): so is the architecture it names.
                hf.fields[field_name] = Unknown(f"{field_name} ({okey[1]} returns {p.returned.reason})")
                notes.append(f"{okey[1]} returns a config the evaluator cannot tell ({p.returned.reason}): "
                             f"the draft architecture is unknown")
            if p.raised:
                notes.append(f"{okey[1]} raises for this config: {p.raised}")
                if p.raised_at is not None:
                    rejections.append(Rejection(okey[0], p.raised_at, okey[1], p.raised.removeprefix("raise "),
                                                "validation"))
        notes += ev.notes
        return DraftConfig(hf, decisions, notes, tuple(rejections))

    def _family_computed(self, arch: str, given: dict[str, Value], notes: list[str]) -> dict[str, Value]:
        """The fields the override branch that picks ``arch`` writes from other fields
        (``n = getattr(hf_config, "f", None)`` then ``hf_config.update({"g": n})``): the
        branch's body run over the given fields. A field it writes and the run cannot
        decide is :class:`Unknown`, never absent (an absent field reads as its default)."""
        out: dict[str, Value] = {}
        hf_label = self.roles["hf"]
        # A branch may pick one of several architectures (``[A if c else B]``): the fields it
        # computes are run over the given ones all the same, and a field two branches that
        # can pick ``arch`` compute differently is unknown.
        for fam in self.provider.family_facts.families():
            if arch not in fam.architectures:
                continue
            literal = {k for k, _ in fam.literal_writes} | set(self.config.override_field)
            computed = sorted(fam.sets - literal)
            if not computed:
                continue
            values: dict[str, Value] = {}
            fn = self.index.function(fam.override)
            branch = _branch_at(fn.body, fam.line) if fn is not None else None
            if fn is not None and branch is not None:
                params = [p.name for p in fn.params if p.name not in ("self", "cls")]
                arg = hf_label if hf_label in params else (params[0] if params else hf_label)
                args: dict[str, Value] = {arg: Obj(hf_label, copy.deepcopy(given), closed=True)}
                ev = self.evaluator()
                p = ev.run_joined(fam.override, msgspec.structs.replace(fn, body=branch.body), args)
                ended = args[arg]
                notes += [n for n in ev.notes if n not in notes]  # a field the cut leaves undecided is unknown below
                if not p.raised and isinstance(ended, Obj):
                    values = ended.fields
            for k in computed:
                v = values.get(k, Unknown(f"{hf_label}.{k} (written by {fam.override[1]})"))
                v = Unknown(f"{hf_label}.{k}") if isinstance(v, Obj) else v
                if k in out and out[k] != v:
                    v = Unknown(f"{hf_label}.{k} (override branches for {arch} write it differently)")
                out[k] = v
        return out

    def _derived(self, given: Obj, notes: list[str]) -> Obj:
        """A given draft config with the fields vLLM's override code derives from it added
        (vLLM runs the override over every draft config: ``n_predict`` from the layer count);
        what was given, the architecture included, is kept as given. Fields the override's
        paths would set differently are left out (unknown, not guessed)."""
        ev = self.evaluator()
        out = given
        for okey in self.provider.location.overrides():
            fn = self.index.function(okey)
            if fn is None:
                continue
            params = [p.name for p in fn.params if p.name not in ("self", "cls")]
            arg = self.roles["hf"] if self.roles["hf"] in params else (params[0] if params else self.roles["hf"])
            p = ev.run_joined(okey, fn, {arg: copy.deepcopy(out)})
            # Its cuts stay out of the notes: what they leave unknown is not added (only
            # fields every path derives alike are), so they cannot change the plan.
            if p.raised or not isinstance(p.returned, Obj):
                continue
            added = {k: v for k, v in p.returned.fields.items()
                     if k not in out.fields and not isinstance(v, (Unknown, Obj))}
            if added:
                out = Obj(out.label, {**out.fields, **added}, closed=True)
        return out

    def world(self, setting: Setting, hf: Obj) -> dict[str, Obj]:
        """The configuration the runner's factory sees: the speculative config as its
        construction leaves it (:meth:`given_spec`, then the method, the fields its first
        statements decide and, when the question leaves K out, the K it derives), and the
        root holding it."""
        r = self.roles
        spec = self.given_spec(setting, hf)
        # The construction's run: the method as it leaves it, the fields its first statements decide.
        built = self.provider.spec_fields.construction(spec, setting.method)
        spec.fields[r["method"]] = built.method
        for name, value in built.fields.items():
            spec.fields.setdefault(name, value)
        if setting.k is None and built.k is not None:
            spec.fields[r["k"]] = built.k  # K the construction derives (vLLM: from the draft's n_predict)
        root = Obj(r["root"], roles={r["speculative"]: spec})
        return {"speculative": spec, "root": root}

    def given_spec(self, setting: Setting, hf: Obj) -> Obj:
        """The speculative config as the question gives it, before its construction runs: the
        method and K as given, the options, the draft and target model configs, the class's
        literal defaults for what is not given."""
        r = self.roles
        # The draft checkpoint's path names no method (vLLM detects one from "eagle-", "dspark"
        # ... in it): a neutral name, as the speculative config's is where a draft config exists.
        draft = draft_model_config(self, hf, setting.platform, {r.get("draft_name", "model"): "<draft model>"})
        spec_cls = self.provider.location.spec_config_class()
        spec = Obj(r["speculative"], {r["method"]: setting.method, r["k"]: setting.k, r["draft"]: draft}, cls=spec_cls)
        spec.fields.update(dict(setting.options))
        target = r.get("target")
        if target:
            # The engine always hands the speculative config the target's model config: its hf
            # config is the target's config.json when one is given; everything else unknown.
            hf_target = to_obj(r["hf"], json.loads(setting.target_config)) if setting.target_config else Obj(r["hf"])
            # (its checkpoint is named: a path, as the draft's is where a draft config exists)
            # (an object of the class the field is annotated with: its methods are the tree's)
            target_config = Obj(target, {r["hf"]: hf_target, r.get("draft_name", "model"): "<target model>"},
                                cls=self.provider.spec_fields.field_class(spec_cls, target))
            if isinstance(hf_target, Obj):
                with_text_config(self, target_config, hf_target)
            spec.fields[target] = target_config
        for name, value in self.provider.spec_fields.defaults(spec_cls).items():
            spec.fields.setdefault(name, value)
        return spec

    def construction(self, setting: Setting, hf: Obj) -> Construction:
        """The construction run over the speculative config as given (memoised by
        :meth:`.SpecFields.construction`)."""
        return self.provider.spec_fields.construction(self.given_spec(setting, hf), setting.method)

    def dispatch(self, setting: Setting) -> tuple[list[tuple[ClassKey, Hop, list[Decision]]], list[str]]:
        """Drafters the runner's factory can build for this configuration, each with the
        branches that lead to it (more than one only when a guard is unknown)."""
        out, notes, cuts = self.dispatch_cuts(setting)
        return out, notes + [c for c in cuts if c not in notes]

    def dispatch_cuts(self, setting: Setting) -> tuple[list[tuple[ClassKey, Hop, list[Decision]]], list[str], list[str]]:
        """:meth:`dispatch`, with the cuts of the factory runs apart from the other notes."""
        hf, _, notes, _ = self.draft_config(setting)
        assert hf is not None
        world = self.world(setting, hf)
        factories = self.provider.location.factories().get(setting.runner, [])
        if not factories:
            return [], notes + [f"no dispatch factory for runner {setting.runner} found in this tree"], []
        out: list[tuple[ClassKey, Hop, list[Decision]]] = []
        cuts: list[str] = []
        # The method as the speculative config's construction rewrites it comes first on every chain.
        renamed = list(self.construction(setting, hf).decisions)
        for fkey in factories:
            built, cut_notes = self.run_factory_cuts(fkey, world)
            out += [(c, h, [*renamed, *d]) for c, h, d in built]
            cuts += [n for n in cut_notes if n not in cuts]
        return out, notes, cuts

    def run_factory(self, fkey: FuncKey, world: dict[str, Obj]) -> list[tuple[ClassKey, Hop, list[Decision]]]:
        return self.run_factory_cuts(fkey, world)[0]

    def run_factory_cuts(self, fkey: FuncKey, world: dict[str, Obj]
                         ) -> tuple[list[tuple[ClassKey, Hop, list[Decision]]], list[str]]:
        """The drafters the factory builds, each with its decision chain, and every cut
        the evaluator made on the way (issue 18: every cut goes into the plan's notes).

        A cut on a path that builds a drafter is a decision of unknown value on its chain
        (``depends_on`` "cut: …"): the evaluator stopped following something on the way to
        that build, so it cannot tell that the build is the one this configuration takes.
        A path cut short that builds no drafter the evaluator can tell (joined paths
        returning different drafters, a build past the cut) may stand for any of them:
        its cut goes on every chain."""
        fn = self.provider.bodies.function(fkey)
        if fn is None:
            return [], []
        ev = self.evaluator()
        # A run may write the objects it is handed (a constructor it cannot run makes what
        # it receives unknown): each factory runs on its own copy of the configuration.
        world = copy.deepcopy(world)
        args: dict[str, Value] = {}
        for p in fn.params:
            if p.name == "self":
                owner = self.types.defining_class(fkey)
                args["self"] = Obj("self", cls=owner, roles={self.roles["root"]: world["root"],
                                                              self.roles["speculative"]: world["speculative"]})
            elif p.name == self.roles["root"]:
                args[p.name] = world["root"]
            elif p.name == self.roles["speculative"]:
                args[p.name] = world["speculative"]
            elif p.name == self.roles["method"]:
                # A factory handed the method itself (``get_x(method, vllm_config, ...)``).
                args[p.name] = world["speculative"].fields.get(self.roles["method"], Unknown(p.name))
        relevant, pruned = self._pruned_factory(fkey, fn)
        out: list[tuple[ClassKey, Hop, list[Decision]]] = []
        lost: list[str] = []  # cuts on paths that build no drafter the evaluator can tell
        for path in ev.run(fkey, pruned, args):
            for built in self._drafters_of(path):
                cls, line = built
                # The factory's branches on the way, and the values it split on (one of several
                # classes a call returned: which one the configuration gets is unknown).
                chain = [d for d in path.decisions if d.line in relevant or d.value is None and d.function == fkey[1]]
                if isinstance(path.returned, Unknown) and path.returned.options:
                    chain.append(Decision(fkey[0], line, fkey[1], f"<{fkey[1]} returns one of several drafters>", None,
                                          (), path.returned.reason, None))
                chain += [_cut_decision(fkey, line, c) for c in path.cuts]
                out.append((cls, Hop(fkey[0], line, fkey[1], f"builds {cls[1]}"), chain))
            if not self._drafters_of(path):
                lost += [c for c in path.cuts if c not in lost]
                if path.raised is None and isinstance(path.returned, Unknown):
                    # It returns what the evaluator cannot tell: that may be a drafter.
                    note = f"{fkey[1]} returns {path.returned.reason}, which may be a drafter the evaluator cannot tell"
                    lost += [note] if note not in lost else []
                    if note not in ev.notes:
                        ev.notes.append(note)
        if lost:
            for _cls, site, chain in out:
                # A cut the build's own path made already says it: named once.
                own = {d.depends_on for d in chain}
                chain += [_cut_decision(fkey, site.line, f"{c} (a path cut short may build another drafter)")
                          for c in lost if CUT + c not in own]
        return out, list(ev.notes)

    def _pruned_factory(self, fkey: FuncKey, fn: FunctionFact) -> tuple[set[int], FunctionFact]:
        held = len(self.index.facts)
        memo = self._pruned.get(fkey)
        if memo is not None and memo[0] == held and memo[1] is fn:
            return memo[2], memo[3]
        relevant = self._dispatch_ifs(fkey, fn.body)
        # Only the dispatch chain and local names are run: the factory's other statements
        # (a runner's __init__ builds much else) cannot change which drafter it builds.
        pruned = msgspec.structs.replace(fn, body=self._prune(fkey, fn.body, relevant))
        self._pruned[fkey] = (held, fn, relevant, pruned)
        return relevant, pruned

    def _prune(self, fkey: FuncKey, body: tuple[Stmt, ...], relevant: set[int]) -> tuple[Stmt, ...]:
        out: list[Stmt] = []
        for s in body:
            if isinstance(s, SIf):
                if s.line in relevant:
                    out.append(msgspec.structs.replace(s, body=self._prune(fkey, s.body, relevant),
                                                       orelse=self._prune(fkey, s.orelse, relevant)))
            elif isinstance(s, SAssign) and all(isinstance(t, PName) for t in s.targets):
                out.append(s)
            elif isinstance(s, (SReturn, SRaise)):
                out.append(s)
            elif isinstance(s, SAssign) and isinstance(s.value, PCall):
                cls = self.provider.location.resolve_class(fkey[0], s.value.func)
                if cls is not None and self.provider.location.is_drafter(cls):
                    out.append(s)
        return tuple(out)

    def _dispatch_ifs(self, fkey: FuncKey, body: tuple[Stmt, ...]) -> set[int]:
        """Lines of the ``if`` statements that enclose or precede (elif) a drafter build:
        the decision chain; the factory's other branches are left out."""
        lines: set[int] = set()

        def visit(stmts: tuple[Stmt, ...]) -> bool:
            found = False
            for s in stmts:
                if isinstance(s, SIf):
                    inner = visit(s.body) | visit(s.orelse)
                    if inner:
                        lines.add(s.line)
                        found = True
                elif isinstance(s, (SReturn, SAssign)) and isinstance(s.value, PCall):
                    cls = self.provider.location.resolve_class(fkey[0], s.value.func)
                    if cls is not None and self.provider.location.is_drafter(cls):
                        found = True
            return found

        visit(body)
        return lines

    def _drafters_of(self, path: Path) -> list[tuple[ClassKey, int]]:
        """The drafter the path built (the last one it assigns, or the one it returns), or the
        drafters it returns one of (:attr:`Unknown.options`, each a possible build)."""
        found: tuple[ClassKey, int] | None = None
        for _target, value, line in path.built:
            # (an Obj of a class: a drafter the evaluator built as a data record)
            if isinstance(value, (Instance, Obj)) and value.cls is not None and self.provider.location.is_drafter(value.cls):
                found = (value.cls, line)
        returned = path.returned
        if isinstance(returned, Instance) and self.provider.location.is_drafter(returned.cls):
            found = (returned.cls, returned.line)
        if isinstance(returned, Unknown) and returned.options and all(
                isinstance(o, Instance) and self.provider.location.is_drafter(o.cls) for o in returned.options):
            return [(o.cls, o.line) for o in returned.options]
        return [found] if found is not None else []


def _branch_at(body: tuple[Stmt, ...], line: int) -> SIf | None:
    for s in body:
        if isinstance(s, SIf):
            if s.line == line:
                return s
            found = _branch_at(s.body, line) or _branch_at(s.orelse, line)
            if found is not None:
                return found
    return None


def _cut_decision(fkey: FuncKey, line: int, note: str) -> Decision:
    """A decision of unknown value standing for a cut on the way to a drafter build."""
    return Decision(fkey[0], line, fkey[1], f"<{note}>", None, (), CUT + note, None)


def set_fields(fields: dict[str, Value], given: tuple[tuple[str, Any], ...]) -> dict[str, Value]:
    """``fields`` with the given ones set (a new dict): a dotted name sets a field of the
    config nested under its first parts (``text_config.num_nextn_predict_layers``: the text
    config of a multimodal checkpoint, made when the draft config has none)."""
    out = dict(fields)
    for name, value in given:
        *holders, last = name.split(".")
        at = out
        for h in holders:
            sub = at.get(h)
            sub = copy.deepcopy(sub) if isinstance(sub, Obj) else Obj(h, {}, closed=True)
            at[h] = sub
            at = sub.fields
        at[last] = value
    return out

