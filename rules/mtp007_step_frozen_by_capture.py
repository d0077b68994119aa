"""MTP007: the step reaches a layer selection only through a captured or compiled region
that does not see it."""

from __future__ import annotations

from typing import ClassVar, Iterable


from auditor.analyses import CaptureProvider, FreezeKind, FrozenStep
from auditor.analyses.analysis import Analysis
from auditor.model.findings import ClassRef, Finding, Hop, Meaning, Severity

from rules._capture_examples import KEYED, UNKEYED, compile_tree, loop_capture_tree, wrapper_tree
from rules.base import Invalid, Rule, Valid


class StepFrozenByCapture(Rule):
    """A draft loop hands a per-step ``spec_step_idx`` to a layer selection, but only
    through a region that does not see the value:

    * **an unkeyed graph wrapper** — the draft model is wrapped in a class that captures
      a CUDA graph on the first call per key and replays it afterwards, and the key does
      not include the step (vLLM's V1 runner wraps ``drafter.model`` in a breakable-graph
      wrapper keyed by the batch only). A replay runs the kernels recorded at capture: the
      keyword argument changes nothing, so every draft step runs the layer of the step
      that was captured. ``compute_logits``, called on the wrapper but outside the graph,
      still picks step *i*'s head — layer and head disagree. Reported where the wrapper
      is installed; the message names the wrapper, the attribute it is stored in, and
      the branch conditions that enable that path (each with what it reads:
      ``is_breakable_cudagraph_enabled() [= bool(envs.VLLM_USE_BREAKABLE_CUDAGRAPH)]``).
      A wrapper keyed by a function of the call's arguments that reads the step
      (``key_fn=lambda **kw: kw["spec_step_idx"] % num_layers``, as vLLM's multi-module
      speculator passes) captures one graph per layer and is not reported.
    * **a compiled forward** — the class whose ``forward`` selects the layer is under a
      compile decorator (``@support_torch_compile``) that does not list the step among
      its dynamic arguments. A Python ``int`` that indexes a ``ModuleList``/``ModuleDict``
      is specialised when Dynamo traces, and vLLM's decorator compiles ``forward`` once
      and drops the guards that would recompile for another value: every step may run
      the first traced step's layer. Whether this happens in a given engine mode is for
      ``mtp-audit runtime`` to confirm. Reported at the decorator.

    Severity: **error** for a wrapper installed unconditionally; **warning** when the
    path is gated ("reached only when …": graphs on, breakable graphs on, a compile
    condition) and for compiled forwards (reached when torch.compile is on).

    Not reported: a draft loop captured *whole* as one graph (a speculator handing its
    loop method to a graph manager): the loop runs while the graph is recorded, so step
    *i* records layer *i*'s kernels and the replay repeats them in order.

    Fix: key the wrapper's graphs by the step (a key function over the call's
    arguments), capture the draft loop whole, or run the drafter uncompiled/eager.
    """

    code = "MTP007"
    name = "step-frozen-by-capture"
    # What its findings are: a warning (compiled forwards; graphs reached only behind a gate),
    # an error only for a graph that every run replays (ALSO: the listing says so).
    severity = Severity.WARNING
    ALSO: ClassVar[tuple[Severity, ...]] = (Severity.ERROR,)
    meaning = Meaning.STEP_FROZEN
    summary = "spec_step_idx reaches the layer selection only through a captured graph or compiled forward that does not key on it"

    VALID = [
        # The wrapper's key includes the step: one graph per layer.
        Valid(wrapper_tree(KEYED)),
        # The whole draft loop is captured as one graph: step i records layer i.
        Valid(loop_capture_tree()),
        # The compile decorator marks the step dynamic.
        Valid(compile_tree('@support_torch_compile(dynamic_arg_dims={"hidden_states": 0, "spec_step_idx": 0})')),
    ]
    INVALID = [
        Invalid(wrapper_tree(UNKEYED), path="vllm/runner.py", line=19,
                message="self.drafter.model is wrapped in GraphWrapper (Runner.load_model) and stored in drafter.model; "
                        "its graphs are keyed by the batch only (no key_fn is passed)"),
        Invalid(wrapper_tree(UNKEYED), path="vllm/runner.py", line=19,
                message="reached only when graphs_enabled() [= os.environ.get(\"USE_GRAPHS\") == \"1\"]"),
        # Installed unconditionally: an error, with no condition in the message.
        Invalid(wrapper_tree(UNKEYED, guard=None), path="vllm/runner.py", line=18,
                message="Proposer.propose passes a per-step spec_step_idx through self.model"),
        Invalid(compile_tree(), path="vllm/models/m_mtp.py", line=18,
                message="WrapperMTP is compiled by @support_torch_compile"),
    ]

    def check(self, analysis: Analysis) -> Iterable[Finding]:
        capture = analysis.get(CaptureProvider)
        groups: dict[tuple[str, ...], list[FrozenStep]] = {}
        for fs in capture.frozen_steps():
            if not analysis.dispatch.pairing(fs.loop, fs.model_class).paired:
                continue  # no route runs this loop against this model class
            if fs.kind is FreezeKind.GRAPH and fs.installation is not None:
                i = fs.installation
                key: tuple[str, ...] = ("graph", fs.param, i.site[0], i.site[1], str(i.line), i.slot_text, i.via[0].path,
                                        str(i.via[0].line))
            elif fs.compiled is not None:
                key = ("compile", fs.param, *fs.compiled.cls)
            else:
                continue
            groups.setdefault(key, []).append(fs)
        for key in sorted(groups):
            found = sorted(groups[key], key=lambda f: (f.loop, f.model_class))
            yield self._graph(found) if found[0].kind is FreezeKind.GRAPH else self._compile(found)

    @staticmethod
    def _loops(found: list[FrozenStep]) -> str:
        """The first loop (the one the trace follows), and how many others."""
        loops = list(dict.fromkeys(f.loop for f in found))
        return loops[0][1] + (f" (and {len(loops) - 1} more loop(s))" if len(loops) > 1 else "")

    def _graph(self, found: list[FrozenStep]) -> Finding:
        first = found[0]
        inst = first.installation
        assert inst is not None
        w = inst.wrapper
        classes = sorted({f.model_class for f in found})
        outside = sorted({m for f in found for m in f.outside})
        gated = bool(inst.guards)
        key = inst.describe_key(first.param)
        parts = [
            f"{inst.wrapped} is wrapped in {w.name} ({inst.via[-1].function}) and stored in {inst.slot_text}; its graphs are "
            f"{key}: {self._loops(found)} passes a per-step {first.param} through self.{inst.slot[-1] if inst.slot else '?'} "
            f"to {len(classes)} MTP model class(es) ({classes[0][1]} selects {first.container}), but a replay runs the kernels "
            f"captured at the first step, so every draft step reuses the captured step's layer"
        ]
        if outside:
            parts.append(f"; {', '.join(outside)} runs outside the graph and still selects by step i, so layer and head disagree")
        if gated:
            parts.append(f"; reached only when {inst.guard_text()}")
        return Finding(
            rule=self.code,
            severity=Severity.WARNING if gated else Severity.ERROR,
            path=inst.site[0],
            line=inst.line,
            column=inst.col,
            function=inst.site[1],
            callee=w.name,
            message="".join(parts),
            trace=[*inst.via, w.capture, *first.hops],
            affected_classes=[ClassRef(*c) for c in classes],
            fingerprint_key=f"{first.param}|graph|{w.name}|{inst.slot_text}|{inst.wrapped}",
            parameter=first.param,
        )

    def _compile(self, found: list[FrozenStep]) -> Finding:
        first = found[0]
        comp = first.compiled
        assert comp is not None
        classes = sorted({f.model_class for f in found})
        outside = sorted({m for f in found for m in f.outside})
        dynamic = ", ".join(comp.dynamic_args) if comp.dynamic_args is not None else "inferred from tensor-typed parameters"
        parts = [
            f"{comp.cls[1]} is compiled by {comp.decorator} and its forward selects {first.container} by {first.param}, "
            f"which is not a dynamic argument ({dynamic}): a Python int indexing modules is specialised at the first "
            f"trace and the compiled forward runs without guards, so {self._loops(found)} may get the first traced "
            f"step's layer at every step"
        ]
        if outside:
            parts.append(f"; {', '.join(outside)} is not compiled and still selects by step i")
        parts.append(f"; reached when torch.compile is on{'' if comp.condition is None else f' and {comp.condition} allows it'}")
        return Finding(
            rule=self.code,
            severity=Severity.WARNING,
            path=comp.cls[0],
            line=comp.line,
            column=0,
            function=comp.cls[1],
            callee=comp.decorator,
            # The decorator's name without its call marker: giving it arguments (a newer
            # release adds enable_if=...) does not make it another defect.
            callee_key=comp.decorator.removesuffix("(…)"),
            message="".join(parts),
            trace=[Hop(comp.cls[0], comp.line, comp.cls[1], f"compiled by {comp.decorator}"), *first.hops],
            affected_classes=[ClassRef(*c) for c in classes],
            fingerprint_key=f"{first.param}|compile|{comp.cls[1]}",
            parameter=first.param,
        )
