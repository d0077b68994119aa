"""The per-step plan for one configuration: drafter, loop, model class, layer count, and
per draft step the forward and head layer with a verdict."""

from __future__ import annotations

import copy
from dataclasses import replace

from ...index.index import ClassKey
from ...model.findings import Hop
from ..loops import LoopSelection, StepKind
from ..step_loss import constant_layer
from ..partial_eval import Obj
from ..reachability import inert_detail
from .model import ClosedGates, Verdict, Setting, DecisionRow, StepPlan, Plan
from .outcomes import StepRaise
from .startup import StartupReach
from .constructors import fixed_layer_count
from .model import CUT
from .part import DispatchPart
from .route_values import RouteLeg


class Planner(DispatchPart):
    def plan(self, setting: Setting) -> Plan:
        if setting.k is None and setting.k_derived is None:
            return self._with_derived_k(setting)
        hf, override_decisions, notes, _ = self.provider.factory_runs.draft_config(setting)
        assert hf is not None
        if setting.method is None:
            # No method given: the speculative config's construction decides it (vLLM detects it
            # from the draft checkpoint: the speculator config the draft model declares); planned
            # with the method it leaves, when the run decides it.
            derived = self.provider.factory_runs.world(setting, hf)["speculative"].fields.get(self.roles["method"])
            if not isinstance(derived, str):
                return self._without_k(setting)
            notes = [*notes, f"{self.roles['method']} not given: the speculative config's construction sets it to "
                             f"{derived!r} (its decisions are listed)"]
        field_name = self.config.override_field[0]
        archs = hf.fields.get(field_name)
        arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else setting.architecture
        options, more, factory_cuts = self.provider.factory_runs.dispatch_cuts(setting)
        notes += [n for n in more + factory_cuts if n not in notes]  # more repeats the draft config's notes
        decisions = [DecisionRow.of(d) for d in override_decisions]
        model = self.provider.registry_lookup.model_class_for(arch, setting.platform) if arch else None
        if arch is None:
            notes.append("the draft architecture is unknown for this config")
        if not options:
            steps: tuple[StepPlan, ...] = ()
            if factory_cuts:
                # The factory run was cut short: it may build a drafter the evaluator lost.
                why = "no drafter the evaluator can tell, the factory run was cut: " + "; ".join(factory_cuts)
                steps = tuple(StepPlan(i, None, None, Verdict.UNKNOWN.value, why) for i in range(setting.draft_steps))
            elif not self.provider.location.factories().get(setting.runner):
                # No factory for this runner in the tree (a release without that runner, or one
                # whose factory is not under the configured names): nothing says what runs.
                why = (f"no dispatch factory for runner {setting.runner} in this tree "
                       f"({', '.join(self.config.dispatch_factories.get(setting.runner, [])) or 'none configured'}): "
                       "which drafter runs is not known")
                steps = tuple(StepPlan(i, None, None, Verdict.UNKNOWN.value, why) for i in range(setting.draft_steps))
            # (a drafter the evaluator cannot tell: whether the configuration serves is not known either)
            return self._outcome(Plan(setting, arch, None, None, None, model, None, None, steps, tuple(decisions), (),
                                      tuple(notes), outcome="unknown" if steps else "plan"), hf)
        proposer, site, chain = options[0]
        decisions += [DecisionRow.of(d) for d in chain]
        alternatives = tuple(dict.fromkeys(c for c, _, _ in options[1:] if c != proposer))
        if self.index.frozen and not self.provider.drafting.explored(proposer) and self.provider.drafting.entry_methods(proposer):
            notes.append("planned after the index was frozen: files the drafter's loops need may be missing "
                         "(ask for plans in a query run_scan takes)")
        # The route's leg for this drafter and class: its loop, layer-count fields and per-step reading.
        leg = self.provider.route_values.leg(proposer, model) if model else None
        n, layer_field = self._layer_count(leg, hf) if leg else (None, None)
        given = n is not None
        if n is not None and model is not None and layer_field:
            _, build_root, draft_hf = self._build(setting, hf)
            n, computed = self.provider.count_holder.sized(model, layer_field.rpartition(".")[2], n, build_root,
                                                           draft_hf if draft_hf is not None else hf)
            if computed is not None:  # the container is sized by something computed from the field
                notes.append(f"the layer count is computed from {layer_field} ({computed}), not its value: unknown")
        fixed = fixed_layer_count(self, model) if model else None
        literal = self._literal_count(leg) if leg else None
        if literal is not None:  # the selected container is built from a literal: its entries
            fixed = literal
        if fixed is not None:  # built whatever the config says: the count the selections see
            n, layer_field = fixed[0], None
            notes.append(f"the draft model builds {fixed[0]} MTP layer(s) whatever the config says ({fixed[1]})")
        if not given and fixed is None and layer_field and model is not None:
            notes.append(f"the configuration gives no {layer_field}: how many MTP layers the draft model builds is "
                         "unknown (a config class outside the tree may default it, or the build may fail); each "
                         "step names the layer its selection reads")
        loop, steps = self._steps(setting, proposer, leg, n)
        if alternatives:
            deps = sorted({d.depends_on for d in chain if d.value is None and d.depends_on})
            why = f"the drafter depends on {', '.join(deps) or 'an unknown branch'}: {proposer[1]} or {', '.join(c[1] for c in alternatives)}"
            steps = tuple(replace(s, verdict=Verdict.UNKNOWN.value, why=why, lost=None) for s in steps)
        cuts = sorted({d.depends_on[len(CUT):] for c, _, ch in options for d in ch if d.depends_on.startswith(CUT)})
        if cuts:
            # Issue 18: a cut on the way to a build decides the route as much as an unknown
            # guard does: the drafter this configuration gets may be another one.
            why = f"the drafter is decided past a cut of the evaluator ({'; '.join(cuts)}): {proposer[1]} may not be the one built"
            steps = tuple(replace(s, verdict=Verdict.UNKNOWN.value, why=why + (f"; {s.why}" if alternatives else ""),
                                  lost=None) for s in steps)
        plan = Plan(setting, arch, proposer, site, loop, model, n, layer_field, steps, tuple(decisions), alternatives,
                    tuple(notes), closed_gates=_closed_gates(steps, model, decisions))
        return self._outcome(plan, hf)

    def _with_derived_k(self, setting: Setting) -> Plan:
        """A speculative config given no K: planned with the K its construction derives, when
        the run derives one (vLLM defaults it to the draft's ``n_predict`` when a draft model is
        named); otherwise :meth:`_without_k`."""
        hf = self.provider.factory_runs.draft_config(setting).hf
        assert hf is not None
        built = self.provider.factory_runs.construction(setting, hf)
        if built.k is None:
            return self._without_k(setting)
        plan = self.plan(replace(setting, k_derived=built.k))
        note = (f"{self.roles['k']} not given: the speculative config's construction sets it to {built.k}"
                + (" (the decisions that read it are listed)" if built.k_decisions else ""))
        rows = [DecisionRow.of(d) for d in built.k_decisions]
        return replace(plan, decisions=(*[d for d in rows if d not in plan.decisions], *plan.decisions),
                       notes=(note, *plan.notes))

    def _without_k(self, setting: Setting) -> Plan:
        """A speculative config given no ``num_speculative_tokens`` or no method: what its
        construction and validation do without (vLLM rejects some such configurations; where it
        does not, the K or the method it then uses is not derived, so no step is planned and the
        outcome is unknown)."""
        hf, override_decisions, notes, rejections = self.provider.factory_runs.draft_config(setting)
        assert hf is not None
        archs = hf.fields.get(self.config.override_field[0])
        arch = archs[0] if isinstance(archs, list) and archs and isinstance(archs[0], str) else setting.architecture
        model = self.provider.registry_lookup.model_class_for(arch, setting.platform) if arch else None
        spec = copy.deepcopy(self.provider.factory_runs.world(setting, hf))["speculative"]
        draft = spec.fields.get(self.roles["draft"])
        roles = {self.roles["speculative"]: spec}
        if isinstance(draft, Obj):
            roles[self.roles.get("model", "model_config")] = draft
        checked, undecided = self.provider.outcomes.rejections(spec, Obj(self.roles["root"], roles=roles), hf, None,
                                                               setting.method)
        # Nothing else to go on: the construction itself, run over the config (every path raising).
        built = self.provider.factory_runs.construction(setting, hf).rejection
        by_env, env_notes = self.provider.env_checks.rejections(setting)
        notes += [n for n in env_notes if n not in notes]
        found = [*by_env, *self.provider.spec_fields.type_rejections(setting), *rejections, *([built] if built else []),
                 *checked]
        decisions = tuple(DecisionRow.of(d) for d in override_decisions)
        plan = Plan(setting, arch, None, None, None, model, None, None, (), decisions, (), tuple(notes))
        if found:
            return replace(plan, outcome="rejected", rejections=tuple(found))
        if undecided:
            notes.append(f"{undecided} validation raise(s) depend on fields this configuration leaves unknown")
        missing = [what for what, given in ((self.roles["k"], setting.k), (self.roles["method"], setting.method))
                   if given is None]
        notes.append(f"{' and '.join(missing)} not given: what vLLM then uses is not derived "
                     "(give them for a per-step plan)")
        return replace(plan, outcome="unknown", notes=tuple(notes))

    def _build(self, setting: Setting, hf: Obj) -> tuple[Obj, Obj, Obj | None]:
        """The configuration the draft model is built with: the speculative config (a copy of the
        factory runs'), the build's root holding it and the draft's model config, and the draft's
        hf config."""
        spec = copy.deepcopy(self.provider.factory_runs.world(setting, hf))["speculative"]
        draft = spec.fields.get(self.roles["draft"])
        # A draft model is named whenever a draft config exists (the target's, for MTP).
        spec.fields.setdefault(self.roles.get("draft_name", "model"), "<draft model>")
        roles = {self.roles["speculative"]: spec}
        if isinstance(draft, Obj):
            roles[self.roles.get("model", "model_config")] = draft  # the draft model is built with the draft's config
        draft_hf = draft.fields.get(self.roles["hf"]) if isinstance(draft, Obj) else None
        return spec, Obj(self.roles["root"], roles=roles), draft_hf if isinstance(draft_hf, Obj) else None

    def _outcome(self, plan: Plan, hf: Obj) -> Plan:
        """The plan, or the configuration's rejection, or the step an assert on the route
        fails at (:mod:`.outcomes`)."""
        setting, model = plan.setting, plan.model_class
        spec, build_root, draft_hf = self._build(setting, hf)
        as_given = ((self.roles["k"], None),) if setting.k is None and setting.k_derived is not None else ()
        rejections, undecided = self.provider.outcomes.rejections(spec, build_root, draft_hf if draft_hf is not None else hf,
                                                                  model, setting.method, as_given)
        # The override that rewrites the config into the draft config raises for it: that comes first.
        rejections = [*self.provider.factory_runs.draft_config(plan.setting).rejections, *rejections]
        # A value the speculative config's field types reject fails its construction, before anything else.
        rejections = [*self.provider.spec_fields.type_rejections(setting), *rejections]
        # The engine checks the environment before it builds any config (:mod:`.env_checks`).
        by_env, env_notes = self.provider.env_checks.rejections(setting)
        rejections = [*by_env, *rejections]
        if not rejections:  # the construction run whole, over the config as given: a raise it reaches
            built = self.provider.factory_runs.construction(setting, hf).rejection
            rejections = [built] if built is not None else []
        if not rejections:  # the runner's own checks (:mod:`.runner_checks`)
            rejections = self.provider.runner_checks.rejections(setting.runner, spec)
        drafter_notes: list[str] = []
        if not rejections and plan.proposer is not None:
            # Checks the drafter makes while it is built and loads the draft model (:mod:`.load_checks`).
            rejections, drafter_notes = self.provider.load_checks.checks(plan.proposer, model, build_root)
        if model is not None and plan.num_mtp_layers is None and plan.layer_field \
                and not any(r.when != "load" for r in rejections):
            # The draft model's constructor reads a layer-count field the draft config lacks: it
            # fails while the drafter loads it, before the load method's own checks.
            built = self.provider.count_holder.build_raise(model, plan.layer_field.rpartition(".")[2], build_root,
                                                           draft_hf if draft_hf is not None else hf)
            rejections = [built, *rejections] if built is not None else rejections
        if not rejections and model is not None:
            # Layers no checkpoint name reaches, when the checkpoint names them as the mapper's sources.
            rejections = self.provider.weight_names.rejections(model, plan.num_mtp_layers)
        notes = list(plan.notes) + [n for n in env_notes if n not in plan.notes]
        if undecided:
            notes.append(f"{undecided} validation raise(s) depend on fields this configuration leaves unknown")
        if not rejections:
            notes += [n for n in drafter_notes if n not in notes]
        if rejections:
            r = rejections[0]
            why = f"rejected at {r.path}:{r.line} {r.function}: {r.message}" + (f" ({r.condition})" if r.condition else "")
            return replace(plan, steps=plan.rejected_steps(why), outcome="rejected", rejections=tuple(rejections), notes=tuple(notes))
        raise_at, heads = self._step_raise(plan, build_root, notes)
        if raise_at is not None:
            start = self.startup_reach(plan, raise_at, "eager")
            if start is not None and start.reached:
                # A start-up pass runs the failing step before serving (:mod:`.startup`).
                return replace(plan, steps=plan.rejected_steps(start.rejected_why(raise_at)), outcome="rejected",
                               rejections=(start.rejection(raise_at),), step_raise=raise_at, notes=tuple(notes))
            if start is not None and start.reached is None:
                notes.append(start.note(raise_at))
            why = f"raises at step {raise_at.step}: {raise_at.path}:{raise_at.line} {raise_at.function}: {raise_at.message}"
            steps = tuple(s if s.step < raise_at.step else StepPlan(s.step, None, None, f"raises at step {raise_at.step}", why)
                          for s in plan.steps)
            return replace(plan, steps=steps, outcome="raises", step_raise=raise_at, notes=tuple(notes))
        # A head method every call of which raises, called where the draft loop's own code does
        # not place it (before the loop's function): a start-up pass that makes the call rejects.
        for head_raise, start in self._heads_at_startup(plan, heads):
            if start.reached:
                return replace(plan, steps=plan.rejected_steps(start.rejected_why(head_raise)), outcome="rejected",
                               rejections=(start.rejection(head_raise),), step_raise=head_raise, notes=tuple(notes))
            if start.reached is None and start.note(head_raise) not in notes:
                notes.append(start.note(head_raise))
        return replace(plan, notes=tuple(notes))

    def _heads_at_startup(self, plan: Plan, heads: dict[str, StepRaise]) -> list[tuple[StepRaise, StartupReach]]:
        """The eager start-up passes that may call a head method of the draft model whose every
        call raises for this configuration (``heads``: :meth:`.draft_calls.DraftCalls.step_raise`'s)."""
        proposer = plan.proposer
        if not heads or proposer is None:
            return []
        s = plan.setting
        spec = self._startup_spec(s)
        attrs = self.provider.draft_calls.model_attrs(proposer)
        out: list[tuple[StepRaise, StartupReach]] = []
        for head, sr in sorted(heads.items()):
            start = self.provider.startup.reaches_head(s.platform, s.runner, proposer, attrs, head, "eager", spec)
            if start is not None:
                out.append((sr, start))
        return sorted(out, key=lambda x: {True: 0, None: 1, False: 2}[x[1].reached])

    def startup_reach(self, plan: Plan, raise_at: StepRaise, mode: str) -> StartupReach | None:
        """Whether a start-up pass of ``mode`` runs the plan's draft loop up to the failing step,
        or (a raise every call of the draft model's forward makes, at step 0) calls the forward:
        the surer answer of the two (reached, then undecided, then not)."""
        if plan.proposer is None or raise_at.step >= plan.setting.draft_steps:
            return None
        s = plan.setting
        spec = self._startup_spec(s)
        found = [self.provider.startup.reaches(s.platform, s.runner, plan.proposer, plan.loop, mode, spec)
                 if plan.loop is not None else None]
        if raise_at.step == 0 and raise_at.any_call and plan.model_class is not None:
            found.append(self.provider.startup.reaches_forward(s.platform, s.runner, plan.proposer, plan.model_class,
                                                               mode, spec))
        for want in (True, None, False):
            hit = next((r for r in found if r is not None and r.reached is want), None)
            if hit is not None:
                return hit
        return None

    def _startup_spec(self, s: Setting) -> Obj | None:
        """The speculative config the route was judged with (the factory runs'): a start-up
        pass's ``self.speculative_config``."""
        hf = self.provider.factory_runs.draft_config(s).hf
        return self.provider.factory_runs.world(s, hf)["speculative"] if hf is not None else None

    def _step_raise(self, plan: Plan, root: Obj, notes: list[str]) -> tuple[StepRaise | None, dict[str, StepRaise]]:
        """The first step that raises, and the head methods whose every call raises (placed or not)."""
        model, proposer = plan.model_class, plan.proposer
        if model is None or proposer is None or not plan.steps:
            return None, {}
        leg = self.provider.route_values.leg(proposer, model)
        if leg.path is None:
            return None, {}
        # The forward's and the heads' selections of the route's leg (the reachability rows ask
        # the same of every selection a loop reaches in the class).
        found = self.provider.outcomes.selections_raise(model, (*leg.forward, *leg.heads), plan.setting.draft_steps)
        # A draft-time call of a method the draft model lacks (:mod:`.draft_calls`).
        missing, more, heads = self.provider.draft_calls.step_raise(proposer, model, leg.path.loop, root,
                                                                    plan.setting.planned_k)
        notes += [n for n in more if n not in notes]
        # A per-step read of an attribute the per-layer module's sub-module lacks (:mod:`.forward_reads`).
        lacking, more = self.provider.forward_reads.step_raise(plan)
        notes += [n for n in more if n not in notes]
        hits = [r for r in (found, missing, lacking) if r is not None]
        return (min(hits, key=lambda r: (r.step, r.path, r.line)) if hits else None), heads

    def _literal_count(self, leg: RouteLeg) -> tuple[int, str] | None:
        """The layer count of the container the leg's forward selects, when every selection
        that decides the forward layer (those of the forward's kind) selects one container
        built from a literal (``nn.ModuleDict({"0": X(...)})``): its number of entries, with
        where it is built. None otherwise (the config-derived count stands)."""
        kind = leg.reading.forward if leg.reading is not None else None
        deciding = [s for s in leg.forward if s.kind is kind]
        found = set()
        for s in deciding:
            chain = s.container.split(".")
            c = self.types.literal_container(s.ctx, chain[1]) if s.ctx is not None and len(chain) == 2 else None
            if c is None:
                return None
            found.add(c)
        if len(found) != 1:
            return None
        c = found.pop()
        assert c.count is not None
        return c.count, f"self.{c.attr} built from a literal of {c.count} entr{'y' if c.count == 1 else 'ies'} " \
                        f"in {c.owner[1]} ({c.owner[0]}:{c.line})"

    def _layer_count(self, leg: RouteLeg, hf: Obj) -> tuple[int | None, str | None]:
        """The layer count this configuration gives the route's layer-count fields: on the
        draft config, else on a config nested in it (a multimodal checkpoint keeps the text
        model's fields one level down)."""
        nested = [v for _, v in sorted(hf.fields.items()) if isinstance(v, Obj)]
        for f in leg.layer_count_fields:
            for holder in [hf, *nested]:
                v = holder.fields.get(f)
                if isinstance(v, int) and not isinstance(v, bool):
                    return v, f if holder is hf else f"{holder.label}.{f}"
        fields = leg.layer_count_fields
        return None, (fields[0] if fields else None)

    def _steps(self, setting: Setting, proposer: ClassKey, leg: RouteLeg | None,
               n: int | None) -> tuple[Hop | None, tuple[StepPlan, ...]]:
        """Per draft step, what the route's leg selects (:class:`RouteLeg`'s reading)."""
        def all_steps(verdict: Verdict, why: str) -> tuple[StepPlan, ...]:
            return tuple(StepPlan(i, None, None, verdict.value, why) for i in range(setting.draft_steps))

        if leg is None:
            return None, all_steps(Verdict.UNKNOWN, "no registered draft model class for this architecture")
        model = leg.model_class
        if leg.path is None:
            free = self.provider.step_free.entry(proposer, model)
            if free is not None:  # the loop reaches it where it calls the draft model (:mod:`.stepless`)
                runs, why = self.provider.step_free.why(free, model)
                verdict = Verdict.CONSTANT if runs else Verdict.UNKNOWN
                return free.loop.hop, tuple(StepPlan(i, 0 if runs else None, None, verdict.value, why)
                                            for i in range(setting.draft_steps))
        if leg.path is None or leg.reading is None:
            return None, all_steps(Verdict.UNKNOWN, f"no draft loop of {proposer[1]} reaches {model[1]}")
        fwd = list(leg.forward)
        param = self.params[0]
        reading = leg.reading
        fkind, hkind = reading.forward, reading.heads
        loop_label = leg.loop_label

        # The one layer selections that take no per-step step run (a read at a constant key of
        # a literal container: that entry; else step 0's); None when they disagree.
        const_f, const_h = constant_layer(fwd), constant_layer(leg.heads)

        def layer(kind: StepKind | None, i: int, const: int | None) -> int | None:
            if kind is None:
                return None
            if kind is StepKind.VARYING:
                # With the layer count unknown only step 0's layer is known (0 modulo any count).
                return i % n if n else (0 if i == 0 else None)
            return const if kind in (StepKind.CONSTANT, StepKind.ABSENT) else 0

        if fkind is None and not leg.path.selections and self.reach.step_inert.is_inert(model, leg.path.entered):
            # The model only hands the step on (:mod:`..step_inert`): the same layer(s) every step;
            # all the layers of a stack it iterates, in order (no single forward layer unless it
            # builds one; which layers, unknown when the count is).
            stack = self.reach.step_inert.stack(model)
            why = f"{loop_label} reaches {model[1]}: {inert_detail(model[1], param, stack)}"
            if stack and n != 1:
                why += f" ({n} layers)" if n else " (all of them, however many the config builds)"
            fl = None if stack and n != 1 else 0
            whole = tuple(range(n)) if stack and n else None
            return leg.loop, tuple(StepPlan(i, fl, None, Verdict.CONSTANT.value, why, stack=whole)
                                   for i in range(setting.draft_steps))
        loss = reading.loss
        lost_at = (loss, loss.site, loss.reason) if loss is not None else None
        steps = []
        for i in range(setting.draft_steps):
            fl, hl = layer(fkind, i, const_f), layer(hkind, i, const_h)
            if fkind is None:
                verdict, why = Verdict.UNKNOWN, f"{loop_label} reaches {model[1]} but no layer selection on the path"
            elif fkind is StepKind.UNKNOWN or hkind is StepKind.UNKNOWN:
                verdict, why = Verdict.UNKNOWN, f"{loop_label} hands {model[1]} a {param} the analysis cannot classify per step"
                fl = hl = None
            elif (fl is None and fkind is not StepKind.VARYING) or (hl is None and hkind not in (None, StepKind.VARYING)):
                # only where a read at a constant key of a literal container names another entry
                verdict, why = Verdict.UNKNOWN, (f"{loop_label} reaches {model[1]}: its selections that take no "
                                                 f"per-step {param} name different layers")
                fl = hl = None
            elif lost_at is not None:
                verdict, why = Verdict.LOST, lost_at[2]
            elif fkind is StepKind.VARYING:
                sel = next(s for s in fwd if s.kind is StepKind.VARYING)
                verdict = Verdict.THREADED
                why = f"{loop_label} passes {param} per step; {_last(sel)} selects {sel.container}[…]" + (
                    f": step {i} -> layer {fl}" + (f" (mod {n})" if n and i >= n else "") if fl is not None else
                    f": step {i} -> a layer that depends on the layer count, which is unknown (layer {i} when the model "
                    f"builds more than {i})")
            elif all(s.position is not None for s in fwd):
                sel = fwd[0]
                verdict = Verdict.CONSTANT
                why = (f"{loop_label} reaches {model[1]}: {_last(sel)} {sel.hops[-1].note} at a constant key, entry "
                       f"{sel.position} of a container built from a literal: layer {fl} at every step, whatever the step")
            else:
                sel = fwd[0]
                verdict = Verdict.CONSTANT
                why = (f"{loop_label} hands no per-step {param} to {model[1]} ({'/'.join(sorted({s.kind.value for s in fwd}))}): "
                       f"{_last(sel)} selects {sel.container} with step 0 every step")
            if verdict is Verdict.LOST and lost_at is not None:
                steps.append(StepPlan(i, fl, hl, f"lost at {lost_at[1]}", why, lost=lost_at[0]))
            else:
                steps.append(StepPlan(i, fl, hl, verdict.value, why))
        return leg.loop, tuple(steps)


def _last(sel: LoopSelection) -> str:
    h = sel.hops[-1]
    return f"{h.function} ({h.path}:{h.line})"


def _closed_gates(steps: tuple[StepPlan, ...], model: ClassKey | None,
                  decisions: list[DecisionRow]) -> ClosedGates | None:
    """Every step constant: the conditions this configuration closed (see :class:`ClosedGates`)."""
    if model is None or not steps or any(s.verdict != Verdict.CONSTANT.value for s in steps):
        return None
    return ClosedGates(tuple(d.condition for d in decisions if d.value is False))
