"""MTP005: the step is passed to a callee that cannot accept it (or, by position, into another parameter)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

from auditor.analyses import Binding, Target
from auditor.analyses.analysis import Analysis
from auditor.analyses.dispatch.load_routes import condition_of
from auditor.analyses.dispatch.model import ModelRoute
from auditor.analyses.load_calls import LoadCallProvider, keyword_only, misbound_slot, step_arguments
from auditor.facts.extract import CallFact, ExprFact, FunctionFact, ParamKind
from auditor.index.index import ClassKey, FuncKey
from auditor.model.findings import ClassRef, Finding, Meaning, Severity

from rules._examples import draft_tree, wrapper
from rules.base import Invalid, Rule, Valid

_NO_STEP_HEAD = wrapper(
    "return self.model(input_ids, positions, hidden_states, spec_step_idx)",
    "self, input_ids, positions, hidden_states, spec_step_idx=0",
) + '''
    def compute_logits(self, hidden_states):
        return hidden_states
'''


# A forward with an optional parameter before the step (as vLLM's ``intermediate_tensors``).
_SLOT_BEFORE_STEP = wrapper(
    "return self.model(input_ids, positions, hidden_states, spec_step_idx=spec_step_idx)",
    "self, input_ids, positions, hidden_states, intermediate_tensors=None, spec_step_idx=0",
)

# A forward whose **kwargs catches a keyword it does not name: the step under another name lands there.
_CATCHING_FORWARD = wrapper(
    "return self.model(input_ids, positions, hidden_states, spec_step_idx)",
    "self, input_ids, positions, hidden_states, spec_step_idx=0, **kwargs",
)

# A wrapper that renames the step its **kwargs received before handing them on.
_RENAMING_WRAPPER = wrapper('kwargs["step"] = kwargs.pop("spec_step_idx")\n'
                            "        return self.model(input_ids, positions, hidden_states, **kwargs)")

_STEP_RENAMED = "spec_step_idx = token_index + 1\n            {}"

_STEP_BY_POSITION = "spec_step_idx = token_index + 1\n            out.append(self.model({}))"


def _slot_tree(args: str) -> dict[str, str]:
    """The draft loop calls a model whose forward has a slot before the step, with ``args``."""
    return draft_tree(_STEP_BY_POSITION.format(args), model=_SLOT_BEFORE_STEP)

# A helper that takes the step under its own name: the step lands in ``idx`` on purpose.
_RENAMING_HELPER = '''
    def _draft(self, input_ids, positions, hidden_states, idx):
        return self.model(input_ids, positions, hidden_states, spec_step_idx=idx)
'''


# A V2-style tree with dispatch: one factory builds the eagle-style speculator for the
# MTP and EAGLE methods (a tree speculator when the draft config asks for one), and the
# registry holds an MTP model that takes the step and an EAGLE head that does not.
_ROUTE_SPEC = '''
class SpeculativeConfig:
    @staticmethod
    def hf_config_override(hf_config):
        if hf_config.model_type == "deep":
            hf_config.model_type = "deep_mtp"
            hf_config.update({"architectures": ["DeepMTPModel"]})
        return hf_config

    def use_eagle(self):
        return self.method in ("eagle", "mtp")

    def use_tree(self):
        return getattr(self.draft_model_config.hf_config, "tree_choices", None) is not None
'''

_ROUTE_FACTORY = '''
def init_speculator(vllm_config):
    speculative_config = vllm_config.speculative_config
    if speculative_config.use_eagle():
        if speculative_config.use_tree():
            from vllm.spec_decode.speculators import TreeSpeculator

            return TreeSpeculator(vllm_config)
        from vllm.spec_decode.speculators import EagleSpeculator

        return EagleSpeculator(vllm_config)
    raise NotImplementedError(speculative_config.method)
'''

_ROUTE_SPECULATORS = '''
from vllm.loader import get_model


class EagleSpeculator:
    def __init__(self, vllm_config):
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens

    def load_model(self):
        self.model = get_model(self.vllm_config)

    def propose(self, x):
        for step in range(self.num_speculative_steps):
            x = self.model(x{call})
            x = self._sample(x{sample})
        return x

    def _sample({base_sample}):
        return x


class TreeSpeculator(EagleSpeculator):
    def _sample({tree_sample}):
        return x
'''

_DEEP_MTP = '''
import torch.nn as nn


class DeepMTP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_mtp_layers = config.num_nextn_predict_layers
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])

    def forward(self, x, spec_step_idx: int = 0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)
'''


def _routes(call: str = "", sample: str = "", head_params: str = "self, x",
            base_sample: str = "self, x, spec_step_idx=0", tree_sample: str = "self, x") -> dict[str, str]:
    speculators = (_ROUTE_SPECULATORS.replace("{call}", call).replace("{sample}", sample)
                   .replace("{base_sample}", base_sample).replace("{tree_sample}", tree_sample))
    return {
        "vllm/loader.py": "def get_model(config):\n    raise NotImplementedError\n",
        "vllm/config/speculative.py": _ROUTE_SPEC,
        "vllm/spec_decode/__init__.py": _ROUTE_FACTORY,
        "vllm/spec_decode/speculators.py": speculators,
        "vllm/models/registry.py": (
            "_SPECULATIVE_DECODING_MODELS = {\n"
            '    "DeepMTPModel": ("deep_mtp", "DeepMTP"),\n'
            '    "EagleLlamaModel": ("llama_eagle", "EagleHead"),\n'
            "}\n"
        ),
        "vllm/models/deep_mtp.py": _DEEP_MTP,
        "vllm/models/llama_eagle.py": (
            "import torch.nn as nn\n\n\nclass EagleHead(nn.Module):\n"
            f"    def forward({head_params}):\n        return x\n"
        ),
    }


class StepRejected(Rule):
    """A call passes ``spec_step_idx`` — by keyword, inside a ``**dict`` built in the
    caller, or by position — to a callee that cannot take it: no parameter of that name
    and no ``**kwargs``, or one positional argument more than it has (and no ``*args``).

    Python raises ``TypeError`` at run time. This is what reviewers pointed out on the
    public fix attempt (vLLM PR #36910): the proposer's ``self.model`` can be a non-MTP
    draft model — an EAGLE head, ``forward(input_ids, positions, hidden_states)`` — whose
    ``forward`` or ``compute_logits`` does not take the step. So each call site is bound
    against every callee a route can load there, step-aware or not: when ``self.model``
    fans out over the registry tables, the draft model classes of the MTP methods'
    routes and of the ``draft-model-methods`` (``eagle``, ``eagle3``) routes that build
    the calling drafter (their ``forward``, ``compute_logits``, ``get_top_tokens``); and
    ``self.m()`` in a drafter's base class is bound against the override of each drafter
    a route builds that runs it (resolved through its MRO). Only classes on a route whose
    condition is satisfiable are listed, and the message ends with that condition
    (``reached only when …``). A callee with ``**kwargs`` that drops the step is not a
    TypeError (MTP001 reports a drop where the step picks a layer). A parameter given
    both by position and by keyword, where the positional one is the step, is a TypeError
    too (multiple values). The finding's id depends on the call, not on the classes it
    lists. ``mtp-audit lint`` on a patch that adds the step to such a call reports it as new.

    **The step bound to another parameter** (the call binds: silently wrong). A step passed
    by position is bound through each callee's signature; where it lands in a parameter
    other than ``spec_step_idx`` — ``forward(ids, pos, hidden, spec_step_idx)`` against
    ``forward(self, input_ids, positions, hidden_states, intermediate_tensors=None,
    spec_step_idx=0)``, or a class whose ``spec_step_idx`` is keyword-only — the call
    runs, the value goes into that other parameter and the step parameter keeps its
    default. The step is the argument named as the step parameter, or one that another
    callee of the same call binds to it; a callee with no step parameter of its own is
    reported only in that second case (a helper may take the step under its own name).
    This kind is a separate finding at the call, with its own id (it too never depends on
    the classes listed) and the meaning *step lost* rather than *cannot take*; its
    message says where the step lands (``passes spec_step_idx by position into another
    parameter of C.forward (intermediate_tensors; spec_step_idx keeps its default)``).

    **The step under another name.** A keyword other than ``spec_step_idx`` whose value is
    the caller's ``spec_step_idx`` (``step=spec_step_idx``, ``spec_step_index=spec_step_idx``,
    or such a key of a ``**dict`` the caller builds), or whose value is the step the caller's
    ``**kwargs`` received (a wrapper's ``kwargs["step"] = kwargs.pop("spec_step_idx")``
    before ``self.model(..., **kwargs)``) is bound against each callee too: a
    callee with no parameter of that name and no ``**kwargs`` raises ``TypeError`` (a
    finding with the meaning *cannot take*: ``passes spec_step_idx as step to C.forward,
    which take(s) no step and no **kwargs``); a callee that has a ``spec_step_idx`` of its
    own and takes the keyword in another parameter or in its ``**kwargs`` runs with its
    ``spec_step_idx`` at the default — layer 0 at every step, silently (*step lost*: ``passes
    spec_step_idx under another name into C.forward (step=spec_step_idx lands in
    **kwargs)``). A callee with no step parameter that names the keyword takes the step
    under its own name (a helper's ``draft_index``): not reported; nor is a loss where the
    call also hands on a ``**kwargs`` that may still hold the step. Each kind has its own id
    at the call (``…|renamed``, ``…|renamed|binds-elsewhere``).
    """

    code = "MTP005"
    name = "step-rejected"
    severity = Severity.ERROR
    meaning = Meaning.CANNOT_TAKE
    summary = "spec_step_idx passed to a callee that cannot accept it (TypeError at run time)"

    VALID = [
        Valid(draft_tree("out.append(self.model.compute_logits(hidden_states))", model=_NO_STEP_HEAD)),
        # The eagle-style speculator passes no step: the EAGLE head it can load is fine.
        Valid(_routes()),
        # A head with **kwargs takes the step (and drops it: MTP001's business, not a TypeError).
        Valid(_routes(", spec_step_idx=step", head_params="self, x, **kwargs")),
        # By position, into the step parameter of every class the route can load.
        Valid(_routes(", step", head_params="self, x, spec_step_idx=0")),
        Valid(_slot_tree("input_ids, positions, hidden_states, None, spec_step_idx")),
        # By keyword, past a slot the position would have filled.
        Valid(_routes(", spec_step_idx=step", head_params="self, x, h=None, spec_step_idx=0")),
        Valid(_slot_tree("input_ids, positions, hidden_states, spec_step_idx=spec_step_idx")),
        # A helper that takes the step by keyword under its own name (it has no spec_step_idx).
        Valid(draft_tree(_STEP_RENAMED.format(
            "out.append(self._draft(input_ids, positions, hidden_states, idx=spec_step_idx))"), helpers=_RENAMING_HELPER)),
        # The step under its own name and under another one: the step parameter gets it.
        Valid(draft_tree(_STEP_RENAMED.format("out.append(self.model(input_ids, positions, hidden_states, "
                                              "spec_step_idx=spec_step_idx, step=spec_step_idx))"),
                         model=_CATCHING_FORWARD)),
        # A helper that names the step its own way is no mis-binding.
        Valid(draft_tree("spec_step_idx = token_index + 1\n"
                         "            out.append(self._draft(input_ids, positions, hidden_states, spec_step_idx))",
                         helpers=_RENAMING_HELPER)),
    ]
    INVALID = [
        Invalid(draft_tree("out.append(self.model.compute_logits(hidden_states, spec_step_idx=token_index))",
                           model=_NO_STEP_HEAD),
                path="vllm/spec_decode/proposer.py", line=15,
                message="passes spec_step_idx to WrapperMTP.compute_logits, which take(s) no spec_step_idx and no **kwargs"),
        # The seed PR's change: the step added to the shared speculator's model call, which
        # the EAGLE method's route runs with an EAGLE head (DeepMTP takes it).
        Invalid(_routes(", spec_step_idx=step"), path="vllm/spec_decode/speculators.py", line=14, count=1,
                message="passes spec_step_idx to EagleHead.forward, which take(s) no spec_step_idx and no **kwargs: "
                        "TypeError at run time for 1 draft model class(es) (speculative method eagle)"),
        # By position: DeepMTP binds it to spec_step_idx, the EAGLE head has no room for it.
        Invalid(_routes(", step"), path="vllm/spec_decode/speculators.py", line=14,
                message="passes spec_step_idx to EagleHead.forward, which take(s) too many positional arguments"),
        # An overridden helper: the tree speculator's _sample, under its route's condition.
        Invalid(_routes(sample=", spec_step_idx=step"), path="vllm/spec_decode/speculators.py", line=15,
                message="passes spec_step_idx to TreeSpeculator._sample, which take(s) no spec_step_idx and no "
                        "**kwargs: TypeError at run time; reached only when speculative_config.use_tree() is True "
                        "(V2 builds TreeSpeculator)"),
        # The base's helper cannot take it, the override can: only the route that builds the
        # base speculator itself reaches the base's helper.
        Invalid(_routes(sample=", spec_step_idx=step", base_sample="self, x", tree_sample="self, x, spec_step_idx=0"),
                path="vllm/spec_decode/speculators.py", line=15, count=1,
                message="passes spec_step_idx to EagleSpeculator._sample, which take(s) no spec_step_idx and no "
                        "**kwargs: TypeError at run time; reached only when speculative_config.use_tree() is False "
                        "(V2 builds EagleSpeculator)"),
        # By position into the wrong slot (the example): the step lands in
        # intermediate_tensors, spec_step_idx keeps 0 — silently, no TypeError.
        Invalid(_slot_tree("input_ids, positions, hidden_states, spec_step_idx"),
                path="vllm/spec_decode/proposer.py", line=16, count=1,
                message="passes spec_step_idx by position into another parameter of WrapperMTP.forward "
                        "(intermediate_tensors; spec_step_idx keeps its default): the call binds (no TypeError) "
                        "and the step lands there instead of in spec_step_idx for 1 draft model class(es)"),
        # A keyword/positional mix: the step third, the slot after it by keyword — the
        # step fills hidden_states.
        Invalid(_slot_tree("input_ids, positions, spec_step_idx, intermediate_tensors=None"),
                path="vllm/spec_decode/proposer.py", line=16, count=1,
                message="passes spec_step_idx by position into another parameter of WrapperMTP.forward "
                        "(hidden_states; spec_step_idx keeps its default)"),
        # DeepMTP binds the positional step to spec_step_idx; the EAGLE head, whose step
        # parameter is keyword-only, to h.
        Invalid(_routes(", step", head_params="self, x, h=None, *, spec_step_idx=0"),
                path="vllm/spec_decode/speculators.py", line=14, count=1,
                message="passes spec_step_idx by position into another parameter of EagleHead.forward "
                        "(h; spec_step_idx is keyword-only and keeps its default): the call binds (no TypeError)"),
        # The same, into an EAGLE head with no step parameter but a slot for it.
        Invalid(_routes(", step", head_params="self, x, h=None"), path="vllm/spec_decode/speculators.py", line=14,
                count=1, message="passes spec_step_idx by position into another parameter of EagleHead.forward "
                                 "(h; it has no spec_step_idx): the call binds (no TypeError) and the step lands "
                                 "there instead of in spec_step_idx for 1 draft model class(es) (speculative method "
                                 "eagle)"),
        # The step under another keyword, into a forward that cannot take it.
        Invalid(draft_tree(_STEP_RENAMED.format("out.append(self.model(input_ids, positions, hidden_states, "
                                                "step=spec_step_idx))")),
                path="vllm/spec_decode/proposer.py", line=16, count=1,
                message="passes spec_step_idx as step to WrapperMTP.forward, which take(s) no step and no **kwargs: "
                        "TypeError at run time"),
        # ... into a forward whose **kwargs catches it: spec_step_idx keeps 0, silently.
        Invalid(draft_tree(_STEP_RENAMED.format("out.append(self.model(input_ids, positions, hidden_states, "
                                                "spec_step_index=spec_step_idx))"), model=_CATCHING_FORWARD),
                path="vllm/spec_decode/proposer.py", line=16, count=1,
                message="passes spec_step_idx under another name into WrapperMTP.forward (spec_step_index=spec_step_idx "
                        "lands in **kwargs): the call binds (no TypeError) and spec_step_idx keeps its default"),
        # ... renamed in a **dict the caller builds.
        Invalid(draft_tree(_STEP_RENAMED.format("extra = {\"step\": spec_step_idx}\n"
                                                "            out.append(self.model(input_ids, positions, hidden_states, "
                                                "**extra))"), model=_CATCHING_FORWARD),
                path="vllm/spec_decode/proposer.py", line=17, count=1,
                message="passes spec_step_idx under another name into WrapperMTP.forward (**extra['step'] lands in "
                        "**kwargs)"),
        # ... renamed by a wrapper in the **kwargs it hands on: the inner model cannot take it.
        Invalid(draft_tree("out.append(self.model(input_ids, positions, hidden_states, spec_step_idx=token_index + 1))",
                           model=_RENAMING_WRAPPER),
                path="vllm/models/m_mtp.py", line=23, count=1,
                message="passes spec_step_idx as step to Predictor.forward, which take(s) no step and no **kwargs: "
                        "TypeError at run time"),
        # By position and by keyword: the same parameter twice.
        Invalid(_routes(", step, spec_step_idx=step", head_params="self, x, spec_step_idx=0"),
                path="vllm/spec_decode/speculators.py", line=14, count=1,
                message="passes spec_step_idx to DeepMTP.forward, EagleHead.forward, which take(s) spec_step_idx "
                        "twice (by position and by keyword): TypeError at run time"),
    ]

    def check(self, analysis: Analysis) -> Iterable[Finding]:
        calls = analysis.get(LoadCallProvider)
        loads = analysis.dispatch.load_routes
        for fkey, fn in analysis.scope.relevant_functions():
            own = analysis.types.defining_class(fkey)
            # ``self.m()`` in a base-class method reaches the override of the drafter that runs it.
            contexts = [own, *(d for d in loads.drafters_running(fkey) if d != own)]
            for ci, call in enumerate(fn.calls):
                for param in analysis.params:
                    keyword = calls.passes_keyword(call, fn, param)
                    renamed = renamed_steps(call, fn, param)
                    if not keyword and not call.args and not renamed:
                        continue
                    if not keyword and not renamed and not _may_pass_by_position(analysis, calls, fkey, fn, contexts,
                                                                                 ci, param):
                        continue
                    rejected, misbound = _Rejected(), _Rejected()
                    renamed_rejected, renamed_lost = _Rejected(), _Rejected()
                    for ctx in contexts:
                        bound = self._bound(analysis, fkey, fn, own, ctx, ci)
                        self._bind_all(analysis, fkey, fn, bound, ci, param, keyword, rejected, misbound)
                        _bind_renamed(analysis, fkey, bound, param, renamed, renamed_rejected, renamed_lost)
                    if rejected.callees:
                        yield self._finding(analysis, fkey, call, param, rejected)
                    if misbound.callees:
                        yield self._misbound_finding(analysis, fkey, call, param, misbound)
                    if renamed_rejected.callees:
                        yield self._renamed_finding(analysis, fkey, call, param, renamed_rejected, lost=False)
                    if renamed_lost.callees:
                        yield self._renamed_finding(analysis, fkey, call, param, renamed_lost, lost=True)

    @staticmethod
    def _bound(analysis: Analysis, fkey: FuncKey, fn: FunctionFact, own: ClassKey | None, ctx: ClassKey | None,
               ci: int) -> list[tuple[Target, Binding, list[ModelRoute] | None]]:
        """Call ``ci`` bound against every callee it reaches with ``self`` of ``ctx`` on a
        load route, with the load routes that reach it (None: dispatch does not decide)."""
        calls = analysis.get(LoadCallProvider)
        loads = analysis.dispatch.load_routes
        call = fn.calls[ci]
        drafter = None if ctx == own else ctx
        bound: list[tuple[Target, Binding, list[ModelRoute] | None]] = []
        for tgt in calls.targets(fkey, fn, ctx, ci):
            routes = loads.routes_running(fkey, tgt.model_class, drafter)
            if routes is not None and not routes:
                continue  # no route builds this drafter with that model (or runs this code as ctx)
            if routes is None and tgt.model_class is not None and not analysis.dispatch.pairing(fkey).paired:
                continue
            if (routes and call.func is not None and len(call.func) == 2 and call.func[0] == "self"
                    and tgt.func[1].rpartition(".")[2] == call.func[1]):
                # ``self.m()`` of a method: only the drafters whose ``m`` is this callee reach it.
                routes = [rt for rt in routes if _resolves_to(analysis, rt.drafter, call.func[1], tgt.func)]
                if not routes:
                    continue
            bound.append((tgt, calls.bind(call, fn, tgt), routes))
        return bound

    @staticmethod
    def _bind_all(analysis: Analysis, fkey: FuncKey, fn: FunctionFact,
                  bound: list[tuple[Target, Binding, list[ModelRoute] | None]], ci: int, param: str, keyword: bool,
                  rejected: "_Rejected", misbound: "_Rejected") -> None:
        """Record the callees of call ``ci`` (as :meth:`_bound` binds it) that cannot take the
        step (``rejected``) and those where the step passed by position lands in another
        parameter (``misbound``)."""
        call = fn.calls[ci]
        # The step passed positionally: an argument that is the step's name, or one that
        # lands in the step parameter of some callee.
        step_args, to_step = step_arguments(call, (b for _, b, _ in bound), param)
        for tgt, b, routes in bound:
            by_keyword = keyword and param in b.unknown_keywords
            by_position = bool(step_args & set(b.extra_positional))
            twice = sorted(n for n, i in b.duplicates.items() if i in step_args)
            if by_keyword or by_position or twice:
                rejected.add(analysis, fkey, tgt, routes)
                rejected.keyword |= by_keyword
                rejected.positional |= by_position and not by_keyword
                rejected.twice.update(twice)
                continue
            callee = analysis.index.function(tgt.func)
            slots = [s for i in sorted(step_args) if (s := misbound_slot(b, callee, i, to_step, param))]
            if slots:
                misbound.add(analysis, fkey, tgt, routes)
                misbound.slots.setdefault(tgt.func[1], set()).update(slots)
                if keyword_only(callee, param):
                    misbound.keyword_only.add(tgt.func[1])
                if callee is not None and param not in callee.param_names:
                    misbound.lacking.add(tgt.func[1])
                elif param not in b.params and not b.forwards_kwargs and not b.opaque_dicts:
                    misbound.defaulted.add(tgt.func[1])

    def _finding(self, analysis: Analysis, fkey: FuncKey, call: CallFact, param: str, rejected: "_Rejected") -> Finding:
        callees = sorted(rejected.callees)
        rejected_by = rejected.classes()
        when, others = rejected.reached(analysis, fkey)
        if rejected.keyword:
            how = f"no {param} and no **kwargs"
        elif rejected.positional:
            how = "too many positional arguments"
        else:
            how = f"{', '.join(sorted(rejected.twice))} twice (by position and by keyword)"
        return self._at_call(
            analysis, fkey, call, param, callees, rejected_by, when, others,
            f"passes {param} to {', '.join(callees)}, which take(s) {how}: TypeError at run time",
            [f"passes {param} to {c}" for c in callees], f"{param}|{'.'.join(call.func or ())}")

    def _misbound_finding(self, analysis: Analysis, fkey: FuncKey, call: CallFact, param: str,
                          misbound: "_Rejected") -> Finding:
        callees = sorted(misbound.callees)
        classes = misbound.classes()
        when, others = misbound.reached(analysis, fkey)

        def where(callee: str) -> str:
            said = [what for what, says in (("is keyword-only", callee in misbound.keyword_only),
                                            ("keeps its default", callee in misbound.defaulted)) if says]
            note = f"; {param} {' and '.join(said)}" if said else ""
            if callee in misbound.lacking:
                note = f"; it has no {param}"
            return f"{callee} ({', '.join(sorted(misbound.slots[callee]))}{note})"

        return self._at_call(
            analysis, fkey, call, param, callees, classes, when, others,
            f"passes {param} by position into another parameter of {', '.join(where(c) for c in callees)}: "
            f"the call binds (no TypeError) and the step lands there instead of in {param}",
            [f"passes {param} into {where(c)}" for c in callees],
            # Its own id at the call: the kind of defect, never the classes it lists.
            f"{param}|{'.'.join(call.func or ())}|binds-elsewhere",
            # The step never reaches the callee's step parameter: on the path, it is lost.
            Meaning.STEP_LOST)

    def _renamed_finding(self, analysis: Analysis, fkey: FuncKey, call: CallFact, param: str, found: "_Rejected",
                         lost: bool) -> Finding:
        """The step passed under another keyword: a TypeError where a callee cannot take that
        keyword, a silent loss (``lost``) where it binds and the step parameter keeps its default."""
        callees = sorted(found.callees)
        when, others = found.reached(analysis, fkey)

        def where(callee: str) -> str:
            return f"{callee} ({'; '.join(sorted(found.slots[callee]))})"

        if lost:
            what = (f"passes {param} under another name into {', '.join(where(c) for c in callees)}: the call binds "
                    f"(no TypeError) and {param} keeps its default")
            hops = [f"passes {param} into {where(c)}" for c in callees]
        else:
            names = sorted({n for c in callees for n in found.renamed_keywords.get(c, ())})
            what = (f"passes {param} as {', '.join(names)} to {', '.join(callees)}, which take(s) no "
                    f"{', '.join(names)} and no **kwargs: TypeError at run time")
            hops = [f"passes {param} as {', '.join(names)} to {c}" for c in callees]
        return self._at_call(analysis, fkey, call, param, callees, found.classes(), when, others, what, hops,
                             f"{param}|{'.'.join(call.func or ())}|renamed" + ("|binds-elsewhere" if lost else ""),
                             Meaning.STEP_LOST if lost else None)

    def _at_call(self, analysis: Analysis, fkey: FuncKey, call: CallFact, param: str, callees: list[str],
                 classes: list[ClassKey], when: str, others: list[str], what: str, hops: list[str],
                 fingerprint_key: str, meaning: Meaning | None = None) -> Finding:
        """A finding at the call: ``what`` it does, then the classes, methods and condition;
        ``meaning`` where it is not the rule's own (the step lost rather than refused)."""
        return Finding(
            rule=self.code,
            severity=self.severity,
            path=fkey[0],
            line=call.line,
            column=call.col,
            function=fkey[1],
            callee=", ".join(callees),
            callee_key="",  # the call is in fingerprint_key; the targets it reaches may grow
            message=(
                what
                + (f" for {len(classes)} draft model class(es)" if classes else "")
                + (f" (speculative method {', '.join(others)})" if others else "")
                + (f"; reached only when {when}" if when else "")
            ),
            trace=[analysis.hop(fkey, call.line, note) for note in hops],
            affected_classes=[ClassRef(*c) for c in classes],
            fingerprint_key=fingerprint_key,
            parameter=param,
            meaning=meaning,
        )


def _may_pass_by_position(analysis: Analysis, calls: LoadCallProvider, fkey: FuncKey, fn: FunctionFact,
                          contexts: list[ClassKey | None], ci: int, param: str) -> bool:
    """Whether call ``ci``, which passes ``param`` neither by keyword nor renamed, can pass it
    by position: an argument named as the step, or a callee with a parameter of that name
    that a positional argument may bind to (:func:`step_arguments`). When neither holds no
    binding of the call can reject or misbind the step, so the call needs no binding."""
    if any(a.chain == (param,) for a in fn.calls[ci].args):
        return True
    for ctx in contexts:
        for tgt in calls.targets(fkey, fn, ctx, ci):
            callee = analysis.index.function(tgt.func)
            if callee is not None and param in callee.param_names:
                return True
    return False


def _resolves_to(analysis: Analysis, cls: ClassKey, name: str, func: FuncKey) -> bool:
    hit = analysis.index.method(cls, name)
    return hit is not None and analysis.index.method_key(hit[0], name) == func


def renamed_steps(call: CallFact, caller: FunctionFact, param: str) -> dict[str, tuple[str, bool]]:
    """The keywords other than ``param`` under which ``call`` passes the step: a value that
    is the caller's ``param`` (or an arithmetic of it alone), or the step its ``**kwargs``
    received (``kwargs["spec_step_idx"]``, ``kwargs.get(…)``, ``kwargs.pop(…)``); given
    directly (``step=spec_step_idx``) or as a key of a ``**dict`` built in the caller, its
    own ``**kwargs`` included (a wrapper that renames the key). Keyword -> how it is passed,
    and whether the value was popped from the caller's ``**kwargs`` (then they no longer hold
    the step under its own name)."""
    out: dict[str, tuple[str, bool]] = {}
    kw_param = caller.kwargs_param
    received = re.compile(rf"^{re.escape(kw_param)}(\[|\.get\(|\.pop\()\s*['\"]{re.escape(param)}['\"]") \
        if kw_param else None

    def is_step(e: ExprFact) -> bool:
        return (e.chain == (param,) or (e.names == (param,) and e.called is None and e.chain is None)
                or (received is not None and received.match(e.text) is not None))

    def popped(e: ExprFact) -> bool:
        return kw_param is not None and e.called == (kw_param, "pop")

    for kw in call.keywords:
        if kw.name != param and is_step(kw.value):
            out.setdefault(kw.name, (f"{kw.name}={kw.value.text}", popped(kw.value)))
    for d in call.star_kwargs:
        ch = d.chain
        if ch and len(ch) == 1:
            for e in caller.dicts.get(ch[0], ()):
                if e.key is not None and e.key != param and is_step(e.value):
                    out.setdefault(e.key, (f"**{ch[0]}[{e.key!r}]", popped(e.value)))
    return out


def _takes(callee: FunctionFact, name: str) -> bool:
    """``callee`` accepts keyword ``name`` (a parameter of that name, or ``**kwargs``)."""
    return any(p.kind is ParamKind.VAR_KEYWORD or (p.name == name and p.kind in (ParamKind.POSITIONAL,
                                                                                ParamKind.KEYWORD_ONLY))
               for p in callee.params)


def _bind_renamed(analysis: Analysis, fkey: FuncKey, bound: list[tuple[Target, Binding, list[ModelRoute] | None]],
                  param: str, renamed: dict[str, tuple[str, bool]], rejected: "_Rejected",
                  lost: "_Rejected") -> None:
    """Where the step passed under another keyword goes in each callee: nowhere (no such
    parameter, no ``**kwargs``: TypeError, ``rejected``), or into another parameter or the
    ``**kwargs`` of a callee whose own step parameter then keeps its default (``lost``: the
    call gives it no ``spec_step_idx``, nor forwards a ``**kwargs`` that may still hold it).
    A callee with no step parameter takes the step under its own name (a helper): fine."""
    for tgt, b, routes in bound:
        callee = analysis.index.function(tgt.func)
        if callee is None:
            continue
        for name, (how, popped) in sorted(renamed.items()):
            if not _takes(callee, name):
                rejected.add(analysis, fkey, tgt, routes)
                rejected.renamed_keywords.setdefault(tgt.func[1], set()).add(name)
            elif param in callee.param_names and param not in b.params and not b.opaque_dicts \
                    and (not b.forwards_kwargs or popped):
                into = name if name in callee.param_names else f"**{callee.kwargs_param}"
                lost.add(analysis, fkey, tgt, routes)
                lost.slots.setdefault(tgt.func[1], set()).add(f"{how} lands in {into}")


@dataclass
class _Rejected:
    """What one call site's bindings found: callee -> the draft model classes it runs for."""

    callees: dict[str, set[ClassKey]] = field(default_factory=dict)
    routes: list[ModelRoute] = field(default_factory=list)
    drafter_level: bool = False  # some rejection is in code no built drafter runs
    keyword: bool = False  # some callee has no such parameter and no **kwargs
    positional: bool = False  # some callee gets it as one positional argument too many
    twice: set[str] = field(default_factory=set)  # parameters given by position and by keyword
    slots: dict[str, set[str]] = field(default_factory=dict)  # callee -> where the step lands instead
    keyword_only: set[str] = field(default_factory=set)  # callees that take the step only by keyword
    defaulted: set[str] = field(default_factory=set)  # callees whose step parameter keeps its default
    lacking: set[str] = field(default_factory=set)  # callees with no step parameter (another callee's slot)
    renamed_keywords: dict[str, set[str]] = field(default_factory=dict)  # callee -> the step's other names it lacks

    def add(self, analysis: Analysis, fkey: FuncKey, tgt: Target, routes: list[ModelRoute] | None) -> None:
        """Record callee ``tgt`` with the draft model classes it runs for and its routes."""
        classes = self.callees.setdefault(tgt.func[1], set())
        if tgt.model_class:
            classes.add(tgt.model_class)
        classes.update((ref.path, ref.name) for ref in analysis.registry.affected_models(tgt.func)
                       if analysis.dispatch.pairing(fkey, (ref.path, ref.name)).paired)
        if routes is None:
            self.drafter_level = True
        else:
            self.routes += routes

    def classes(self) -> list[ClassKey]:
        return sorted({c for cs in self.callees.values() for c in cs})

    def reached(self, analysis: Analysis, fkey: FuncKey) -> tuple[str, list[str]]:
        """When the recorded callees are reached ("" always), and the speculative methods
        that reach them when no MTP method does (EAGLE heads: the condition cannot say)."""
        # The routes that load a recorded class with this drafter say when it is reached;
        # code no built drafter runs says it as its drafter-level pairing does.
        conditions: list[str] = []
        if self.drafter_level:
            conditions.append(analysis.dispatch.pairing(fkey).condition)
        if self.routes:
            conditions.append(condition_of(self.routes).condition)
        when = "" if "" in conditions else " or ".join(dict.fromkeys(conditions))
        loads = analysis.dispatch.load_routes
        methods = dict.fromkeys(m for rt in self.routes for m in loads.methods(rt))
        others = [] if any(m in analysis.config.mtp_methods for m in methods) else list(methods)
        return when, others
