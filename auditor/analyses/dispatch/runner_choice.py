"""Which runner vLLM uses for a configuration and environment (issue 18: "is that what my server
really does?").

vLLM decides in a property of its engine config (``runner-selectors``: ``VllmConfig.
use_v2_model_runner`` in 0.22.1-0.33.0), true when the V2 runner is used. It is run by the
partial evaluator as the engine would: ``self`` the engine config holding the speculative config
as its construction leaves it and the target's model config (its hf config the config.json the
question gives; everything else unknown), the process environment as ``--env`` gives it (every
other variable unset: ``envs.X`` is then computed from the envs module's table,
:mod:`.env_defaults`) or unknown when it is not given. Every path that does not raise joined:

* a known truth decides (the selector's runner when true, the other one when false, where the
  configuration names exactly two runners);
* otherwise the runner is not derived, and the reads that left it undecided are named
  (``depends_on``: the environment variable, engine arguments such as
  ``attention_config.hisparse_config``, ``HAS_TRITON``, what V2's unsupported-feature list
  collects, the model config's properties);
* a tree without a selector says so (before 0.22.1 the worker reads the variable itself; 0.34.0
  has no V1 runner to choose).

Beyond the question, the run takes ``runner-choice-assumptions`` as given: vLLM's defaults for a
server on one CUDA GPU whose other engine arguments are left at their defaults (``HAS_TRITON``,
``attention_config.hisparse_config``, ...). An answer that read one lists it; anything else the
question does not give stays unknown, so an answer that needs it is "depends on". A choice that
raises on every path (an environment value vLLM cannot parse) rejects the configuration."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Hashable

from ...model.findings import Hop
from ..partial_eval import Obj
from .model import RunnerChoice, Setting
from .outcomes import Rejection
from .part import DispatchPart
from .syntax import TreeWorld

if TYPE_CHECKING:
    from .provider import DispatchProvider

_SHOWN, _MAX_SHOWN = 90, 6  # the text's list of what the choice depends on (the JSON has all)


@dataclass(frozen=True)
class _Run:
    """One run of a selector over a configuration."""

    site: Hop  # the selector
    value: bool | None  # its truth; None: not decided
    depends_on: tuple[str, ...]  # what left it undecided
    raised: str  # the raise, when every path raises ("" otherwise)
    raised_in: tuple[str, str, int] | None  # where (file, function, line)
    assumed: tuple[str, ...]  # the assumptions the run read


class RunnerChoices(DispatchPart):
    def __init__(self, provider: "DispatchProvider") -> None:
        super().__init__(provider)
        self._memo: dict[Hashable, _Run | None] = {}

    def choice(self, setting: Setting) -> RunnerChoice:
        selectors = {r: keys for r, keys in self.provider.location.runner_selectors().items() if keys}
        runners = sorted(self.config.dispatch_factories)
        if not selectors:
            # No selector: where the tree holds a drafter factory for one runner only, that one
            # is the runner vLLM can use (0.34.0: V1 is gone, its configured factory name now
            # names V2's runner class, which builds no drafter itself).
            built = sorted(r for r, keys in self.provider.location.factories().items() if keys)
            if len(built) == 1 and setting.runner in runners:
                used = built[0] == setting.runner
                names = ", ".join(n for r in runners if r not in built for n in self.config.dispatch_factories[r])
                return RunnerChoice(used, why=f"vLLM {'uses' if used else 'cannot use'} runner {setting.runner} here: "
                                              f"the tree holds a drafter factory for runner {built[0]} only "
                                              f"({names} builds none)")
        if setting.runner in selectors:
            runner, negate = setting.runner, False
        else:
            others = [r for r in selectors if r != setting.runner]
            if len(others) != 1 or len(runners) != 2 or setting.runner not in runners:
                return RunnerChoice(None, why="which runner vLLM uses is not derived: no runner selector "
                                              f"({', '.join(n for ns in self.config.runner_selectors.values() for n in ns)})"
                                              " in this tree")
            runner, negate = others[0], True
        got = self._selected(setting, runner, selectors[runner][0])
        if got is None:
            return RunnerChoice(None, why="which runner vLLM uses is not derived: its selector could not be read")
        site, value, depends, raised, assumed = got.site, got.value, got.depends_on, got.raised, got.assumed
        where = f"{site.function} ({site.path}:{site.line})"
        env = ", ".join(f"{k}={v}" for k, v in setting.env) if setting.env else \
            "no vLLM variable set" if setting.env_given else "the environment not given"
        if assumed:
            known = self.config.runner_choice_assumptions
            env += "; assuming " + ", ".join(f"{a}={known[a]}" for a in assumed)
        if raised:
            # vLLM chooses a runner before it serves: a choice that raises on every path fails
            # the engine config's build.
            at = got.raised_in or (site.path, site.function, site.line)
            rejection = Rejection(at[0], at[2], at[1], raised, "validation")
            return RunnerChoice(None, site, depends, f"{where} raises for this configuration and environment "
                                                      f"({raised}; {env}): no runner is chosen", assumed, rejection)
        if value is None:
            shown = [d if len(d) <= _SHOWN else d[:_SHOWN] + "…" for d in depends[:_MAX_SHOWN]]
            more = f" and {len(depends) - _MAX_SHOWN} more" if len(depends) > _MAX_SHOWN else ""
            return RunnerChoice(None, site, depends,
                                f"which runner vLLM uses depends on {'; '.join(shown) or 'what the evaluator cuts'}{more}"
                                f" ({where}; {env})", assumed)
        used = value != negate
        said = f"{where} is {value} ({env})"
        return RunnerChoice(used, site, (), f"vLLM uses runner {setting.runner} here: {said}" if used
                            else f"vLLM does not use runner {setting.runner} here: {said}", assumed)

    def _selected(self, setting: Setting, runner: str, key: tuple[str, str]) -> _Run | None:
        """The selector's run, one per configuration (the runner asked does not change it)."""
        memo_key: Hashable | None
        try:
            memo_key = (runner, key, replace(setting, runner=""))
            hash(memo_key)
        except TypeError:  # a --set value that is a list or an object: not kept
            memo_key = None
        if memo_key is not None and memo_key in self._memo:
            return self._memo[memo_key]
        got = self._run(setting, key)
        if memo_key is not None:
            self._memo[memo_key] = got
        return got

    def _run(self, setting: Setting, key: tuple[str, str]) -> _Run | None:
        fn = self.provider.bodies.function(key)
        if fn is None or not fn.body or not fn.params:
            return None
        hf = self.provider.factory_runs.draft_config(setting).hf
        if hf is None:
            return None
        spec = copy.deepcopy(self.provider.factory_runs.world(setting, hf))["speculative"]
        roles = {self.roles["speculative"]: spec}
        target = spec.fields.get(self.roles.get("target", ""))
        if isinstance(target, Obj):
            roles[self.roles.get("model", "model_config")] = target  # the engine's model config is the target's
        root = Obj(self.roles["root"], roles=roles, cls=self.types.defining_class(key))
        assumptions = self._assumptions()
        assumed_fields = self._assume(root, assumptions)
        ev = self.evaluator(environ=setting.environ)
        world = ev.world
        assert isinstance(world, TreeWorld)
        world.assumed_names = {k: v for k, v in assumptions.items() if "." not in k}  # module-level names
        path = ev.run_joined(key, fn, {fn.params[0].name: root})
        site = Hop(key[0], fn.line, key[1])
        if path.raised:  # every path raises: the choice itself fails (where the raise is)
            return _Run(site, None, (), str(path.raised), path.raised_in, tuple(sorted(world.assumed_read)))
        value = path.returned if isinstance(path.returned, bool) else None
        depends = tuple(dict.fromkeys(d.depends_on for d in path.decisions if d.value is None and d.depends_on))
        read = {r for d in path.decisions for r in (*d.fields, d.depends_on)} | set(path.reads)
        used = sorted(world.assumed_read) + [k for k in assumed_fields if any(r.startswith(k) for r in read)]
        return _Run(site, value, depends if value is None else (), "", None, tuple(used))

    def _assumptions(self) -> dict[str, Any]:
        """``runner-choice-assumptions`` as values (JSON literals; text that is not one: a string)."""
        out: dict[str, Any] = {}
        for name, text in sorted(self.config.runner_choice_assumptions.items()):
            try:
                out[name] = json.loads(text)
            except ValueError:
                out[name] = text
        return out

    def _assume(self, root: Obj, assumptions: dict[str, Any]) -> list[str]:
        """Set the assumptions under the engine config's role (``vllm_config.<field>...``) on
        ``root`` (each sub-config an open object holding what is assumed of it); the names set."""
        done: list[str] = []
        for name, value in assumptions.items():
            head, _, rest = name.partition(".")
            if head != root.label or not rest:
                continue
            *owners, last = rest.split(".")
            obj = root
            for o in owners:
                nxt = obj.roles.get(o) or obj.fields.get(o)
                if not isinstance(nxt, Obj):
                    nxt = Obj(f"{obj.label}.{o}")
                    obj.fields[o] = nxt
                obj = nxt
            obj.fields.setdefault(last, value)
            done.append(name)
        return done
