"""The engine's check of the process environment (issue 18: vLLM 0.34.0 rejects
``VLLM_USE_V2_MODEL_RUNNER=0`` in ``Platform.validate_environ``, which ``create_engine_config``
runs before any model or speculative config is built).

When a question gives the environment (``layers --env NAME=VALUE``: the variables set, and no
other that vLLM reads), each of ``env-validations`` the tree holds is run by the partial
evaluator with ``os.environ`` holding exactly those variables (a loop over it runs once per
variable) and its parameters unknown (``hard_fail``: vLLM's ``--fail-on-environ-validation``).
A raise on every path, with no cut on the way but callees that raise on some paths, rejects
the configuration with vLLM's message and file:line; one on some paths only is a note. Without
``--env`` nothing is run: the environment is not known.

Which function the engine calls is the configured name (the method of the platform's class
is not resolved per ``--platform``: no platform of 0.34.0 overrides it)."""

from __future__ import annotations

from ..partial_eval import ClassRef, Unknown, Value
from .model import Setting
from .outcomes import Rejection
from .part import DispatchPart
from .spec_fields import raise_of


class EnvChecks(DispatchPart):
    def rejections(self, setting: Setting) -> tuple[list[Rejection], list[str]]:
        """The rejections of the environment ``setting`` gives, and notes on raises it may make."""
        if not setting.env:
            return [], []
        out: list[Rejection] = []
        notes: list[str] = []
        for key in self.provider.location.env_validations():
            fn = self.provider.bodies.function(key)
            if fn is None or not fn.body:
                continue
            ev = self.evaluator(environ=dict(setting.env))
            owner = self.types.defining_class(key)
            args: dict[str, Value] = {q.name: Unknown(q.name) for q in fn.params}
            if owner is not None and fn.params and fn.params[0].name == "cls":
                args[fn.params[0].name] = ClassRef(owner)
            paths = ev.run(key, fn, args)
            rejection = raise_of(key, paths)
            if rejection is not None:
                out.append(rejection)
            elif any(q.raised for q in paths):
                raised = next(q.raised for q in paths if q.raised)
                notes.append(f"{key[1]} may reject this environment ({raised}), depending on what it leaves unknown")
        return out, notes
