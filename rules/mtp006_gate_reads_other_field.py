"""MTP006: a dispatch gate reads a config field that a draft model family never sets."""

from __future__ import annotations

from typing import Iterable

from auditor.analyses.dispatch import DispatchProvider, Family, Gate
from auditor.analyses.reachability import COUNT_HINTS
from auditor.analyses.analysis import Analysis
from auditor.index.index import ClassKey
from auditor.model.findings import Meaning, ClassRef, Finding, Hop, Severity

from rules._examples import GATED_FACTORY
from rules.base import Invalid, Rule, Valid

_SPEC = '''
class SpeculativeConfig:
    @staticmethod
    def hf_config_override(hf_config):
        if hf_config.model_type == "deep":
            n_predict = getattr(hf_config, "num_nextn_predict_layers", None)
            hf_config.update({"n_predict": n_predict, "architectures": ["DeepMTPModel"]})
        if hf_config.model_type == "qwen":
            hf_config.model_type = "qwen_mtp"
            n_predict = getattr(hf_config, "mtp_num_hidden_layers", None)
            hf_config.update({"n_predict": n_predict, "architectures": ["QwenMTP"]{qwen_extra}})
        return hf_config

    def use_multi_module_mtp(self):
        if self.method != "mtp" or self.draft_model_config is None:
            return False
        num_mtp_layers = getattr(self.draft_model_config.hf_config, "num_nextn_predict_layers", 1)
        return min(num_mtp_layers, self.num_speculative_tokens) > 1
'''

_FACTORY = GATED_FACTORY

_SPECULATORS = '''
from vllm.loader import get_model


class MultiModuleSpeculator:
    def __init__(self, vllm_config):
        self.num_speculative_steps = vllm_config.speculative_config.num_speculative_tokens

    def load_model(self):
        self.model = get_model(self.vllm_config)

    def propose(self, x):
        for step in range(self.num_speculative_steps):
            x = self.model(x, spec_step_idx=step)
        return x


class EagleStyleSpeculator(MultiModuleSpeculator):
    def propose(self, x):
        for step in range(self.num_speculative_steps):
            x = self.model(x)
        return x
'''


def _model(name: str, field: str) -> str:
    return f'''
import torch.nn as nn


class {name}(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_mtp_layers = config.{field}
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(self.num_mtp_layers)])

    def forward(self, x, spec_step_idx: int = 0):
        return self.layers[spec_step_idx % self.num_mtp_layers](x)
'''


def _tree(qwen_extra: str = "") -> dict[str, str]:
    return {
        "vllm/loader.py": "def get_model(config):\n    raise NotImplementedError\n",
        "vllm/config/speculative.py": _SPEC.replace("{qwen_extra}", qwen_extra),
        "vllm/spec_decode/__init__.py": _FACTORY,
        "vllm/spec_decode/speculators.py": _SPECULATORS,
        "vllm/models/registry.py": (
            "_SPECULATIVE_DECODING_MODELS = {\n"
            '    "DeepMTPModel": ("deep_mtp", "DeepMTP"),\n'
            '    "QwenMTP": ("qwen_mtp", "QwenMTP"),\n'
            "}\n"
        ),
        "vllm/models/deep_mtp.py": _model("DeepMTP", "num_nextn_predict_layers"),
        "vllm/models/qwen_mtp.py": _model("QwenMTP", "mtp_num_hidden_layers"),
    }


class GateReadsOtherField(Rule):
    """A dispatch gate decides whether the drafter that threads ``spec_step_idx`` is
    built by reading a draft hf-config field *F* with a default
    (``getattr(hf_config, "num_nextn_predict_layers", 1)``), while a draft model class
    the dispatch can load sizes its layer container from another field *G*
    (``range(config.mtp_num_hidden_layers)``), and the config-override code that picks
    that model's architecture never sets *F*.

    For such a model *F* is absent, the gate sees its default, and the per-step
    drafter is never chosen: every draft step uses layer 0 whatever the checkpoint
    ships. On vLLM 0.33.0 the V2 runner's ``init_speculator`` builds
    ``MultiModuleMTPSpeculator`` only when ``use_multi_module_mtp()`` sees
    ``num_nextn_predict_layers`` > 1, but Qwen3.5 sizes its MTP layers from
    ``mtp_num_hidden_layers`` and ``hf_config_override`` does not set
    ``num_nextn_predict_layers`` for Qwen3.5.

    The gates are found in the dispatch factories (``dispatch-factories``), the
    predicates are methods of the class holding the override function
    (``config-overrides``), and the layer-count field comes from the model's
    ``__init__`` (the config fields that size its ``ModuleList``/``ModuleDict``).
    Fix by making the gate read the model's own count (or by setting *F* in the
    override branch for that family).
    """

    code = "MTP006"
    meaning = Meaning.GATE_CLOSED
    name = "gate-reads-other-field"
    severity = Severity.WARNING
    summary = "a dispatch gate reads a config field the draft model family never sets: the per-step drafter is never built"

    VALID = [
        # The override sets the field the gate reads for the family that sizes by another one.
        Valid(_tree(', "num_nextn_predict_layers": n_predict')),
    ]
    INVALID = [
        Invalid(_tree(), path="vllm/config/speculative.py", line=17,
                message="QwenMTP size(s) their MTP layers from mtp_num_hidden_layers"),
        Invalid(_tree(), path="vllm/config/speculative.py", line=17,
                message="reads hf_config.num_nextn_predict_layers (default 1)"),
    ]

    def check(self, analysis: Analysis) -> Iterable[Finding]:
        dispatch = analysis.get(DispatchProvider)
        model_classes = set(analysis.registry.model_classes())
        for gate in dispatch.count_gates():  # gates on a field that sizes some model's MTP layers
            if not dispatch.threads_per_step(gate.proposer):
                continue
            by_field: dict[str, list[tuple[ClassKey, Family]]] = {}
            for fam in dispatch.families():
                if gate.field in fam.sets:
                    continue
                for arch in fam.architectures:
                    for cls in dispatch.registry_lookup.classes_for(arch):
                        if cls not in model_classes or not dispatch.selects_per_step(gate.proposer, cls):
                            continue
                        fields = analysis.reachability.layer_count_fields(cls)
                        if not fields or gate.field in fields:
                            continue
                        for g in fields:
                            if any(h in g.lower() for h in COUNT_HINTS):  # a layer count, not an offset
                                by_field.setdefault(g, []).append((cls, fam))
            for g, items in sorted(by_field.items()):
                yield self._finding(analysis, gate, g, items)

    def _finding(self, analysis: Analysis, gate: Gate, g: str, items: list[tuple[ClassKey, Family]]) -> Finding:
        classes = sorted({c for c, _ in items})
        fams = sorted({f for _, f in items}, key=lambda f: (f.override, f.line))
        fam = fams[0]
        lines = ", ".join(str(f.line) for f in fams)
        site = self._container_site(analysis, classes[0], g)
        names = [c[1] for c in classes]
        shown = ", ".join(dict.fromkeys(names[:4])) + (f" and {len(classes) - 4} more" if len(classes) > 4 else "")
        pred = gate.predicate[1].rpartition(".")[2]
        hf = analysis.config.dispatch_roles.get("hf", "hf_config")
        where = f" ({site.path}:{site.line})" if site else ""
        message = (
            f"{pred}() reads {hf}.{gate.field} (default {gate.default}) to decide whether {gate.factory[1]} builds "
            f"{gate.proposer[1]}, the drafter that threads the step ({gate.factory[0]}:{gate.line}); but {shown} "
            f"size(s) their MTP layers from {g}{where} and {fam.override[1]} does not set {gate.field} for them "
            f"({fam.override[0]}:{lines}): they never take the per-step path (layer 0 at every draft step)"
        )
        trace = [
            Hop(gate.predicate[0], gate.read_line, gate.predicate[1], f"reads {hf}.{gate.field} with default {gate.default}"),
            Hop(gate.factory[0], gate.line, gate.factory[1], f"if {gate.condition}: builds {gate.proposer[1]}"),
        ]
        trace += [Hop(f.override[0], f.line, f.override[1], f"picks {', '.join(f.architectures)} without setting {gate.field}")
                  for f in fams]
        if site is not None:
            trace.append(site)
        return Finding(
            rule=self.code,
            severity=self.severity,
            path=gate.predicate[0],
            line=gate.read_line,
            column=0,
            function=gate.predicate[1],
            callee=gate.proposer[1],
            message=message,
            trace=trace,
            affected_classes=[ClassRef(*c) for c in classes],
            fingerprint_key=f"{gate.field}|{g}|{gate.proposer[1]}",
        )

    @staticmethod
    def _container_site(analysis: Analysis, cls: ClassKey, g: str) -> Hop | None:
        for part in sorted(analysis.registry.model_parts(cls)):
            for c in analysis.types.containers(part):
                if g in c.config_fields:
                    return Hop(c.owner[0], c.line, f"{c.owner[1]}.__init__", f"self.{c.attr} sized by config.{g}")
        return None
