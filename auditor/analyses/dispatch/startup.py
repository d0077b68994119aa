"""Start-up passes (issue 18): the engine's start-up (memory profiling, warm-up, capture) may
run the draft loop over every step before it serves a request. An assert that fails at draft
step *i* then fails there, and vLLM refuses to start: the configuration is ``rejected`` at
start-up, not ``raises at step i`` while serving (vLLM 0.32.0 on CPU, V2 runner, compiled:
the warm-up's profile run calls the multi-module speculator's ``propose``, whose draft loop
runs MiMo's ``assert spec_step_idx == 0`` at step 1).

The pass is read from the code, for the platform and the engine mode:

* the platform's worker class: the dotted name its platform module sets a
  ``worker-class-fields`` field to (``parallel_config.worker_cls = "...CPUWorker"``);
* the calls from the worker's ``startup-methods`` (the engine calls them before serving)
  through ``self.m()``, into the runner (an attribute of the worker holding a class whose MRO
  holds the plan's runner's factory) and from the runner into the drafter (an attribute
  whose types hold the plan's drafter, or that the runner assigns a call of its runner's
  factory function: the drafter that factory builds, whatever class it computes), down to
  the plan's draft loop function;
* every call on the way is reached only when the ``if`` arms around it hold (an ``if c:
  ... return`` before it is an arm of its own, ``not c``), judged by the partial evaluator
  with ``self`` holding the engine mode (``engine-mode-fields``: ``enforce_eager`` and the
  compilation mode, 0 for eager and 1 or more compiled), the drafter attribute holding the
  drafter, the plan's speculative config (the one the factory runs judge the route with:
  ``self.speculative_config.use_eagle()`` is run), ``startup-assumptions`` (one pipeline
  stage, a text-only target: a dotted key is a field of the config object it names; an
  answer that used one says so), a local bound exactly once by a statement of the function
  body above the test as its value (``FunctionFact.top_defs``; any other local unknown), a
  parameter as the call hands it (a literal, a known value, an expression the evaluator
  decides there) unless the body binds it again above the test (unknown, but for the default
  idiom ``if p is None: p = v``: :func:`_params_at`),
  environment variables unset (``env-modules``, :mod:`.env_defaults`), members of an
  ``IntEnum`` as their values, and the literal arguments the calls pass; an arm whose other
  side replays a captured graph (``graph-replay-apis``) is taken on a platform that
  captures none;
* a call inside a loop that may not iterate (:func:`.startup_targets.iterates`), an arm the
  evaluator cannot decide, or a draft loop whose count reads a parameter of its function
  leaves the answer unknown (said, never guessed).

A raise at step 0 that every call of the draft model's forward makes (``StepRaise.any_call``:
a read of an attribute the per-layer module lacks, :mod:`.forward_reads`) needs no pass over
the steps: a start-up pass that calls the forward (V1's drafter ``dummy_run``, V2's
single-module drafter's first forward) raises it too, and the configuration is ``rejected``
at start-up. The pass is searched as above, to the drafter's calls of the forward
(:mod:`.startup_targets`); the planner takes the surer of the two answers.

The draft loop then runs as while serving, steps 0..K-1: the first failing step is reached.
Limits: the loop body's own branches are taken as while serving; an exit before the call
other than ``if c: ... return``/``raise`` without ``else`` (a return in a nested arm, a loop
or a ``try``) is not seen.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from ...facts.extract import BranchFact, CallFact, FunctionFact, PConst, parse_pexpr
from ...facts.statements import PBool, PExpr
from ...index.index import ClassKey, FuncKey, SymbolKind
from ...model.findings import Hop, StepRaise
from ..partial_eval import Evaluator, Instance, Obj, Path, Unknown, Value, truth
from ..partial_eval.values import _Absent, structural_key
from .constructors import config_copies, self_assignments
from .env_defaults import env_object
from .outcomes import Rejection
from .part import DispatchPart
from .startup_targets import StartupTarget, forward_target, head_target, iterates
from .syntax import TreeWorld, expr_names

MAX_DEPTH = 10  # calls from a start-up method to the draft loop
MAX_NODES = 400  # methods visited per search
MAX_CHAINS = 16
LOCAL_DEPTH = 4  # a guard's local defined from another local, and so on
_INT_ENUMS = ("IntEnum", "IntFlag")


@dataclass(frozen=True)
class StartupReach:
    """Whether a start-up pass runs the plan's draft loop (``reached``; None: unknown), by
    which calls (``chain``: the call sites, start-up method first, then the loop), what an
    unknown answer depends on, and the assumptions a judgement used."""

    mode: str
    reached: bool | None
    chain: tuple[Hop, ...]
    depends_on: str = ""
    assumed: tuple[str, ...] = ()
    target: str = "loop"  # "loop": the draft loop; "forward"/"head:<m>": the draft model's forward or head (:mod:`.startup_targets`)

    def route(self) -> str:
        return " -> ".join(f"{h.function} ({h.path}:{h.line})" for h in self.chain)

    def _what(self) -> str:
        """What the pass calls (a target other than the loop)."""
        head = self.target.partition(":")[2]
        return f"the draft model's {head}" if head else "the draft model's forward"

    def _runs(self) -> str:
        return "runs the draft loop over every step" if self.target == "loop" else f"calls {self._what()}"

    def rejected_why(self, sr: StepRaise) -> str:
        assumed = f" (assuming {', '.join(self.assumed)})" if self.assumed else ""
        fails = f"step {sr.step} fails" if self.target == "loop" else f"{self._what()} fails"
        return (f"rejected at start-up: {self.route()} {self._runs()} before serving{assumed}; "
                f"{fails} at {sr.path}:{sr.line} {sr.function}: {sr.message}")

    def rejection(self, sr: StepRaise) -> Rejection:
        """The start-up rejection: the failing step's assert, run by this pass."""
        return Rejection(sr.path, sr.line, sr.function, sr.message, "startup")

    def note(self, sr: StepRaise) -> str:
        where = f" ({self.route()})" if self.chain else ""
        if self.target == "loop":
            return (f"{self.mode}: a start-up pass may run the draft loop before serving{where}, and step {sr.step}'s "
                    f"assert would reject the configuration at start-up: depends on {self.depends_on}")
        return (f"{self.mode}: a start-up pass may call {self._what()} before serving{where}, and its raise "
                f"at {sr.path}:{sr.line} would reject the configuration at start-up: depends on {self.depends_on}")


@dataclass(frozen=True)
class _Edge:
    ctx: ClassKey  # the class whose ``self`` the caller runs with
    role: str  # "worker", "runner" or "drafter"
    key: FuncKey
    fn: FunctionFact
    call: CallFact


# A chain of calls from a start-up method, and the target function it reaches (None: its
# last edge is a target call).
_Chain = tuple[list[_Edge], FuncKey | None]


class _StartupWorld(TreeWorld):
    """The tree as the start-up judgement sees it: environment variables unset, members of
    an ``IntEnum`` as their values."""

    def __init__(self, part: "StartupPasses") -> None:
        super().__init__(part.index, part.config.pure_methods, part.config.sub_config_getters)
        self.part = part

    def resolve_name(self, path: str, name: str) -> Value:
        for sym in self.index.resolve(path, name):
            if sym.kind is SymbolKind.MODULE and sym.name in self.part.config.env_modules and sym.path:
                return env_object(sym.name, self.part.env(sym.path))  # every variable unset
        return super().resolve_name(path, name)

    def class_attr(self, cls: tuple[str, str], name: str, instance: bool = False) -> Value | _Absent | None:
        cf = self.index.class_fact(cls)
        if cf is None or not any(b and b[-1] in _INT_ENUMS for b in cf.bases):
            return super().class_attr(cls, name, instance)
        e = cf.class_attrs.get(name)
        if e is None or not e.has_literal or not isinstance(e.literal, int) or isinstance(e.literal, bool):
            return None
        return e.literal


class StartupPasses(DispatchPart):
    def __init__(self, provider: Any) -> None:
        super().__init__(provider)
        self._is_runner: dict[tuple[ClassKey, str], bool] = {}
        self._holds: dict[tuple[ClassKey, str, ClassKey, str], bool] = {}
        self._memo: dict[tuple[Any, ...], tuple[int, StartupReach | None]] = {}
        self._attrs: dict[tuple[ClassKey, str], tuple[int, dict[str, list[ClassKey]]]] = {}
        self._chain_memo: dict[tuple[Any, ...], tuple[int, list[_Chain]]] = {}
        self._derived: dict[str, str] = {}  # the judged chain's ``self.<attr>`` copied from a config field

    # -- loading (before the index is frozen) ---------------------------------------
    def load(self) -> None:
        """Parse the platforms' worker modules and what their runner attributes hold."""
        for platform in sorted(self.config.platform_modules):
            for worker in self.workers(platform):
                for runner in self.config.runners():
                    self._runner_attrs(worker, runner)

    def env(self, path: str) -> dict[str, Any]:
        return self.provider.env_tables.values(path, {})  # (every variable unset)

    def workers(self, platform: str) -> list[ClassKey]:
        """The worker classes the platform's module names in a ``worker-class-fields`` field."""
        path = self.config.platform_modules.get(platform)
        facts = self.index.lookup(path) if path is not None and path in self.index.files else None
        if facts is None:
            return []
        fields = set(self.config.worker_class_fields)
        functions = list(facts.functions.values()) + [m for c in facts.classes.values() for m in c.methods.values()]
        out: list[ClassKey] = []
        for fn in functions:
            for a in fn.attr_assigns:
                lit = a.value.literal if a.value.has_literal else None
                if not (a.target and a.target[-1] in fields and isinstance(lit, str) and "." in lit):
                    continue
                module, _, name = lit.rpartition(".")
                target = self.index.path_of_module.get(module)
                if target is not None and self.index.lookup(target) is not None and self.index.class_fact((target, name)):
                    out.append((target, name))
        return sorted(dict.fromkeys(out))

    # -- the question the planner and the compiled view ask ---------------------------
    def reaches(self, platform: str, runner: str, proposer: ClassKey, loop: Hop, mode: str,
                spec: Obj | None = None) -> StartupReach | None:
        """Whether a start-up pass of ``mode`` runs ``loop`` (a method of ``proposer``'s) on
        ``platform``'s worker; None when no worker or no call chain to the loop is in the tree.
        ``spec``: the plan's speculative config (the one the factory runs judge the route
        with), which the chain's ``self`` holds; None: unknown."""
        target = StartupTarget("loop", frozenset({((loop.path, loop.function), loop.line)}))
        return self._reach_memo(platform, runner, proposer, target, mode, spec)

    def reaches_head(self, platform: str, runner: str, proposer: ClassKey, attrs: set[str], head: str,
                     mode: str, spec: Obj | None = None) -> StartupReach | None:
        """Whether a start-up pass of ``mode`` calls the draft model's ``head`` through one of
        ``proposer``'s ``attrs`` (:func:`.startup_targets.head_target`)."""
        target = head_target(self, proposer, attrs, head)
        return self._reach_memo(platform, runner, proposer, target, mode, spec) if target is not None else None

    def reaches_forward(self, platform: str, runner: str, proposer: ClassKey, model: ClassKey,
                        mode: str, spec: Obj | None = None) -> StartupReach | None:
        """Whether a start-up pass of ``mode`` calls ``model``'s forward through ``proposer``
        (:func:`.startup_targets.forward_target`); None when no chain to such a call is in the tree."""
        target = forward_target(self, proposer, model)
        return self._reach_memo(platform, runner, proposer, target, mode, spec) if target is not None else None

    def _reach_memo(self, platform: str, runner: str, proposer: ClassKey, target: StartupTarget,
                    mode: str, spec: Obj | None) -> StartupReach | None:
        shape = structural_key(spec) if spec is not None else ()
        if shape is None:  # a configuration with no key: judged each time
            return self._reach(platform, runner, proposer, target, mode, spec)
        memo_key = (platform, runner, proposer, target, mode, shape)
        held = len(self.index.facts)
        hit = self._memo.get(memo_key)
        if hit is not None and hit[0] == held:
            return hit[1]
        answer = self._reach(platform, runner, proposer, target, mode, spec)
        self._memo[memo_key] = (held, answer)
        return answer

    def _reach(self, platform: str, runner: str, proposer: ClassKey, target: StartupTarget,
               mode: str, spec: Obj | None) -> StartupReach | None:
        chains = [c for w in self.workers(platform) for c in self._chains(w, runner, proposer, target)]
        if not chains:
            return None
        judged = [self._judge(c, end, mode, platform, proposer, target, spec) for c, end in chains]
        for want in (True, None, False):
            for (chain, end), (reached, why, assumed) in zip(chains, judged):
                if reached is want:
                    hops = tuple(Hop(e.key[0], e.call.line, e.key[1], e.call.func[-1] if e.call.func else "") for e in chain)
                    line = target.function_line(end) if end is not None else None
                    tail = (Hop(end[0], line, end[1]),) if end is not None and line is not None else ()
                    return StartupReach(mode, reached, hops + tail, why, assumed, target.kind)
        return None  # pragma: no cover (every chain is judged one of the three)

    # -- the call chains ------------------------------------------------------------
    def _chains(self, worker: ClassKey, runner: str, proposer: ClassKey, target: StartupTarget) -> list[_Chain]:
        memo_key = (worker, runner, proposer, target)
        held = len(self.index.facts)
        hit = self._chain_memo.get(memo_key)
        if hit is not None and hit[0] == held:
            return hit[1]
        out = self._search(worker, runner, proposer, target)
        self._chain_memo[memo_key] = (held, out)
        return out

    def _search(self, worker: ClassKey, runner: str, proposer: ClassKey, target: StartupTarget) -> list[_Chain]:
        out: list[_Chain] = []
        budget = [MAX_NODES]

        def visit(ctx: ClassKey, role: str, name: str, edges: list[_Edge], seen: frozenset[tuple[ClassKey, str]]) -> None:
            found = self.index.method(ctx, name)
            if found is None:
                return
            owner, fn = found
            key = self.index.method_key(owner, name)
            if role == "drafter" and target.function_line(key) is not None:
                out.append((edges, key))
                return
            made = [c for c in fn.calls if role == "drafter" and target.is_call(key, c)]
            if made:  # the call of the draft model is the chain's last edge
                out.extend((edges + [_Edge(ctx, role, key, fn, c)], None) for c in made)
                return
            if len(edges) >= MAX_DEPTH or (ctx, name) in seen or budget[0] <= 0 or len(out) >= MAX_CHAINS:
                return
            budget[0] -= 1
            seen = seen | {(ctx, name)}
            for c in fn.calls:
                f = c.func
                if not f or f[0] != "self" or len(f) not in (2, 3):
                    continue
                nexts: list[tuple[ClassKey, str, str]] = []
                if len(f) == 2:
                    nexts = [(ctx, role, f[1])]
                elif role == "worker":
                    nexts = [(r, "runner", f[2]) for r in self._runner_attrs(worker, runner).get(f[1], [])]
                elif role == "runner" and self._holds_drafter(ctx, f[1], proposer, runner):
                    nexts = [(proposer, "drafter", f[2])]
                for nctx, nrole, nname in nexts:
                    visit(nctx, nrole, nname, edges + [_Edge(ctx, role, key, fn, c)], seen)

        for name in self.config.startup_methods:
            visit(worker, "worker", name, [], frozenset())
        return out

    def _runner_attrs(self, worker: ClassKey, runner: str) -> dict[str, list[ClassKey]]:
        """The worker's attributes that hold a model runner of ``runner``, with its classes."""
        held = len(self.index.facts)
        hit = self._attrs.get((worker, runner))
        if hit is not None and hit[0] == held:
            return hit[1]
        attrs = sorted(self_assignments(self.index, worker))
        out: dict[str, list[ClassKey]] = {}
        for attr in attrs:
            classes = [t for t in self.types.attr_types(worker, attr) if self._runs_factory(t, runner)]
            if classes:
                out[attr] = sorted(classes)
        self._attrs[(worker, runner)] = (held, out)
        return out

    def _runs_factory(self, cls: ClassKey, runner: str) -> bool:
        """A class of ``runner``: its MRO holds the runner's factory method, or a method that
        calls the runner's factory function."""
        memo_key = (cls, runner)
        if memo_key not in self._is_runner:
            factories = self.provider.location.factories().get(runner, [])
            mro = self.index.mro(cls)
            found = False
            for path, qual in factories:
                owner, _, _ = qual.rpartition(".")
                if owner and (path, owner) in mro:
                    found = True
                elif not owner:
                    found = found or any(
                        c.func and len(c.func) == 1 and c.func[0] == qual
                        and any(s.kind is SymbolKind.FUNCTION and (s.path, s.name) == (path, qual)
                                for s in self.index.resolve(k[0], qual))
                        for k in mro for m in self.index.methods(k).values() for c in m.calls)
            self._is_runner[memo_key] = found
        return self._is_runner[memo_key]

    def _holds_drafter(self, runner_cls: ClassKey, attr: str, proposer: ClassKey, runner: str) -> bool:
        """The runner's ``self.<attr>`` may hold the plan's drafter: one of its types, or the
        value of a call of ``runner``'s factory function (:func:`_factory_built`)."""
        memo_key = (runner_cls, attr, proposer, runner)
        if memo_key not in self._holds:
            self._holds[memo_key] = (proposer in self.types.attr_types(runner_cls, attr)
                                     or _factory_built(self, runner_cls, attr, runner))
        return self._holds[memo_key]

    # -- judging one chain ----------------------------------------------------------
    def _judge(self, chain: list[_Edge], end: FuncKey | None, mode: str, platform: str, proposer: ClassKey,
               target: StartupTarget, spec: Obj | None = None) -> tuple[bool | None, str, tuple[str, ...]]:
        """Whether the chain's calls are made (to the target function ``end``, or the last
        edge's target call when None), what an unknown answer depends on, the assumptions."""
        ev = Evaluator(_StartupWorld(self), lambda _name: None)
        self._derived = {}
        assumed: list[str] = []
        unknown = ""
        bound: dict[str, Value] = {}
        fns = [e.fn for e in chain[1:]] + [self.index.function(end) if end is not None else None]
        spec = copy.deepcopy(spec) if spec is not None else None  # every ``self`` on the chain holds this one
        for e, callee in zip(chain, fns):
            env = self._params(e, bound)
            env["self"] = self._self(e.ctx, e.role, mode, proposer, spec)
            where = f"{e.key[1]} ({e.key[0]}:{e.call.line})"
            if not unknown and not all(iterates(self, ev, e.fn, e.key, lid,
                                                _params_at(self, ev, e, _loop_line(e.fn, lid), env))
                                       for lid in e.call.loops):
                unknown = f"{where} is called inside a loop: how often it runs is not known"
            for bid in e.call.branches:
                b = e.fn.branches[bid] if bid < len(e.fn.branches) else None
                held, reason = (None, "") if b is None else self._arm(ev, e, b, env, platform, assumed)
                if held is None and b is not None and _made_either_way(e, b, target):
                    held = True  # the same call (or another target call) on the other side of the test
                if held is False:
                    return False, f"{where}: {b.text if b else '?'} is false", tuple(assumed)
                if held is None and not unknown:
                    unknown = (f"{b.text if b else 'a branch'} ({e.key[1]}, {e.key[0]}:{b.line if b else e.call.line})"
                               + (f", which reads {reason}" if reason and b is not None and reason != b.text else ""))
            bound = _call_args(self, ev, e, env, callee)
        last = fns[-1]
        if target.kind == "loop" and end is not None:  # the loop runs its K steps unless its count is handed in
            line = target.function_line(end)
            count = next((lp for lp in last.loops if lp.line == line), None) if last is not None else None
            params = {p.name for p in last.params} - {"self"} if last is not None else set()
            if count is None or any(n.split(".")[0] in params for n in count.iter.names):
                unknown = unknown or f"the draft loop's count ({count.iter.text if count else '?'}) is what the call hands it"
        return (None if unknown else True), unknown, tuple(dict.fromkeys(assumed))

    def _arm(self, ev: Evaluator, e: _Edge, b: BranchFact, env: dict[str, Value], platform: str,
             assumed: list[str]) -> tuple[bool | None, str]:
        """Whether the arm holds, and what an unknown test depends on."""
        truths: list[bool | None] = []
        reason = ""
        for pe in _conjuncts(b):
            if pe is None:
                truths.append(None)
                continue
            local, reads = self._locals(ev, e, b.line, pe, env)
            p = Path(copy.deepcopy({**_params_at(self, ev, e, b.line, env), **local}))
            truths.append(truth(ev.eval(pe, p, e.key)))
            reads += p.reads
            if truths[-1] is None and not reason:
                reason = ", ".join(dict.fromkeys(r for r in reads if self._assumption(r) is None))
            assumed += [f"{k}={self.config.startup_assumptions[k]}" for k in map(self._assumption, reads) if k]
        conj = False if False in truths else (True if all(x is True for x in truths) else None)
        if conj is None and self.provider.engine_modes.captures_graphs(platform) is False:
            # An arm that replays a captured graph is never taken where no graph is captured.
            then = next((x for x in e.fn.branches if x.line == b.line and not x.negated and x.tests == b.tests), None)
            if then is not None and self._replays(e, then.id):
                conj = False
        if conj is None:
            return None, reason
        return ((not conj) if b.negated else conj), ""

    def _locals(self, ev: Evaluator, e: _Edge, line: int, pe: PExpr, env: dict[str, Value]
                ) -> tuple[dict[str, Value], list[str]]:
        """The function's locals a test at ``line`` reads, and the fields their values read.
        A local bound exactly once, by a statement of the function body above the test
        (``FunctionFact.top_defs``), is its value there, evaluated over ``env`` (the
        parameters as the call binds them, each at that statement: :func:`_params_at`; the locals
        it reads likewise, each defined above it); any other local is unknown (never the
        module-level name it shadows)."""
        fn = e.fn
        out: dict[str, Value] = {}
        reads: list[str] = []

        def resolve(name: str, below: int, depth: int) -> None:
            if name in env or name in out or name not in fn.assigns:
                return
            at = fn.top_defs.get(name)
            expr = fn.local_defs.get(name)
            if at is None or expr is None or at >= below or depth >= LOCAL_DEPTH:
                out[name] = Unknown(name)
                return
            for n in dict.fromkeys(expr_names(expr)):
                resolve(n, at, depth + 1)
            q = Path(copy.deepcopy({**_params_at(self, ev, e, at, env), **out}))
            out[name] = ev.eval(expr, q, e.key)
            reads.extend(q.reads)

        for n in dict.fromkeys(expr_names(pe)):
            resolve(n, line, 0)
        return out, reads

    def _assumption(self, read: str) -> str | None:
        """The ``startup-assumptions`` key a field read is: ``self.<key>``, a dotted key read
        on the object it names (``model_config.multimodal_config``), or ``self.<attr>`` a
        constructor copied from one (:func:`.constructors.config_copies`)."""
        copied = self._derived.get(read[5:]) if read.startswith("self.") else None
        for key in self.config.startup_assumptions:
            if read == f"self.{key}" or ("." in key and (read == key or copied == key)):
                return key
        return None

    def _replays(self, e: _Edge, arm: int) -> bool:
        """A call in the arm replays a captured graph (directly, or by a method of what a
        ``self`` attribute holds, one call deeper)."""
        apis = set(self.config.graph_replay_apis)
        for c in e.fn.calls:
            if arm not in c.branches:
                continue
            if (c.func and c.func[-1] in apis) or c.attr in apis:
                return True
            if c.func and len(c.func) == 3 and c.func[0] == "self":
                for cls in self.types.attr_types(e.ctx, c.func[1]):
                    found = self.index.method(cls, c.func[2])
                    if found is not None and any((x.func and x.func[-1] in apis) or x.attr in apis
                                                 for x in found[1].calls):
                        return True
        return False

    def _self(self, ctx: ClassKey, role: str, mode: str, proposer: ClassKey, spec: Obj | None = None) -> Obj:
        """``self`` of a class on the chain: the engine mode's fields, the assumptions (a
        dotted one on the config object it names, under ``vllm_config`` and as ``self``'s
        own attribute), the plan's speculative config (``self.speculative_config`` and
        ``vllm_config.speculative_config``), and (a runner) the attributes that hold the drafter."""
        fields: dict[str, Value] = {}
        dotted: dict[str, Value] = {}
        for name, text in sorted(self.config.startup_assumptions.items()):
            try:
                value = json.loads(text)
            except ValueError:
                continue
            if value is None or isinstance(value, (bool, int, float, str)):
                (dotted if "." in name else fields)[name] = value
        if role == "runner":
            for (cls, attr, prop, _runner), holds in self._holds.items():
                if holds and cls == ctx and prop == proposer:
                    fields[attr] = Instance(proposer, 0)
        vllm = Obj(self.roles["root"])
        if spec is not None:
            vllm.roles[self.roles["speculative"]] = spec
        values: dict[str, Value] = {
            "enforce_eager": mode == "eager",
            "compilation_mode": 0 if mode == "eager" else Unknown("the compiled engine's compilation mode (not NONE)",
                                                                  known_truth=True, lower=1),
        }
        placed = {path: values[role_name] for role_name, path in sorted(self.config.engine_mode_fields.items())
                  if role_name in values and path}
        for path, value in [*placed.items(), *sorted(dotted.items())]:
            *holders, last = path.split(".")
            holder = vllm
            for part in holders:
                sub = holder.roles.get(part)
                if sub is None:
                    sub = holder.roles[part] = Obj(part)
                holder = sub
            holder.fields[last] = value
        for attr, (chain, value) in config_copies(self.index, self.roles["root"], ctx, vllm).items():
            if attr not in fields:
                fields[attr] = value
                self._derived[attr] = chain
        return Obj("self", fields, cls=ctx, roles={**vllm.roles, self.roles["root"]: vllm})

    @staticmethod
    def _params(e: _Edge, bound: dict[str, Value]) -> dict[str, Value]:
        env: dict[str, Value] = {}
        for p in e.fn.params:
            if p.name == "self":
                continue
            env[p.name] = bound[p.name] if p.name in bound else Unknown(p.name)
        return env


def _factory_built(part: StartupPasses, runner_cls: ClassKey, attr: str, runner: str) -> bool:
    """The most derived class of ``runner_cls``'s MRO that assigns ``self.<attr>`` assigns
    it the value of a call of one of ``runner``'s factory functions (``dispatch-factories``,
    a module-level function): the drafter the factory builds for the configuration, which
    is the plan's, whatever class the factory computes (``resolve_obj_by_qualname``)."""
    functions = {(path, qual) for path, qual in part.provider.location.factories().get(runner, [])
                 if "." not in qual}
    if not functions:
        return False
    for c in part.index.mro(runner_cls):
        assigns = [(m, s) for mname, m in sorted(part.index.methods(c).items())
                   for s in m.attr_assigns if s.target == ("self", attr)]
        if not assigns:
            continue
        return any(s.value.called is not None and len(s.value.called) == 1
                   and any(sym.kind is SymbolKind.FUNCTION and (sym.path, sym.name) in functions
                           for sym in part.index.resolve(c[0], s.value.called[0]))
                   for _m, s in assigns)
    return False


def _params_at(part: StartupPasses, ev: Evaluator, e: _Edge, line: int,
               env: dict[str, Value]) -> dict[str, Value]:
    """``env`` (the parameters as the call binds them) at ``line`` of the function: a
    parameter its body binds again is, below the top-level statement that does, unknown,
    unless that statement is ``if p is None: p = v`` (:class:`~auditor.index.bodies.Rebinding`):
    then ``v`` (evaluated there) where ``p`` is None, ``p`` where it is surely not None; at a
    line inside such a statement, unknown."""
    names = [p.name for p in e.fn.params if p.name != "self" and p.name in env]
    if not names:
        return env
    found = part.provider.bodies.rebindings(e.key)
    out = dict(env)
    for name in names:
        if found is None:
            out[name] = Unknown(name)
            continue
        value = env[name]
        for r in found.get(name, ()):
            if r.start >= line:
                break
            if r.end >= line or r.default is None or isinstance(value, Unknown):
                value = Unknown(name)
                break
            if value is None:
                local, _reads = part._locals(ev, e, r.start, r.default, env)
                there = Path(copy.deepcopy({**_params_at(part, ev, e, r.start, env), **local}))
                value = ev.eval(r.default, there, e.key)
        out[name] = value
    return out


def _call_args(part: StartupPasses, ev: Evaluator, e: _Edge, env: dict[str, Value],
               callee: FunctionFact | None) -> dict[str, Value]:
    """The callee's parameters as the call binds them: a literal or a known value the
    caller holds under that name (a parameter at the call's line, :func:`_params_at`); a
    drafter's ``self.<a>`` that its constructors leave None for this configuration
    (:meth:`.head_reads.HeadReads.is_none`; one its other methods may assign:
    :meth:`.draft_calls.DraftCalls.after_load`), or surely not None (an object); any
    other expression the partial evaluator decides to a constant (``n == 0``) over the
    parameters and locals as a test there reads them (:meth:`StartupPasses._locals`); a parameter the
    call leaves out has its literal default. Anything else is unknown."""
    if callee is None:
        return {}
    c = e.call
    params = [p for p in callee.params if p.name != "self"]
    out: dict[str, Value] = {}
    this = env.get("self")
    at = _params_at(part, ev, e, c.line, env)

    def value(x: Any) -> Value:
        if x.has_literal:
            return x.literal  # type: ignore[no-any-return]
        if x.chain and len(x.chain) == 1 and x.chain[0] in at and not isinstance(at[x.chain[0]], (Unknown, Obj)):
            return at[x.chain[0]]
        if x.chain and len(x.chain) == 2 and x.chain[0] == "self" and isinstance(this, Obj):
            return _self_attr(part, e, this, x.chain[1], x.text)
        pe = parse_pexpr(x.text) if not x.chain else None
        if pe is not None:
            local, _reads = part._locals(ev, e, c.line, pe, env)
            v = ev.eval(pe, Path(copy.deepcopy({**at, **local})), e.key)
            if v is None or isinstance(v, (bool, int, float, str)):
                return v
        return Unknown(x.text)

    for p, a in zip(params, c.args):
        out[p.name] = value(a)
    for kw in c.keywords:
        out[kw.name] = value(kw.value)
    if c.star_args or c.star_kwargs:
        return {k: v for k, v in out.items() if not isinstance(v, Unknown)} | {
            p.name: Unknown(p.name) for p in params if p.name not in out}
    for p in params:
        if p.name not in out and p.default is not None:
            pe = parse_pexpr(p.default)
            out[p.name] = pe.value if isinstance(pe, PConst) else Unknown(p.name)
    return out


def _self_attr(part: StartupPasses, e: _Edge, this: Obj, attr: str, text: str) -> Value:
    """``self.<attr>`` handed on by a call on the chain: what ``self`` holds, else, on the
    drafter, None where its constructors leave it None for this configuration, an object
    where they surely do not (:meth:`.head_reads.HeadReads.is_none`); for an attribute
    another of its methods assigns too, the constructors' value where no call of those
    may have run by then (:meth:`.draft_calls.DraftCalls.after_load`); else unknown."""
    held = this.fields.get(attr)
    if held is not None and not isinstance(held, (Unknown, Obj)):
        return held
    root = this.roles.get(part.roles["root"])
    if e.role == "drafter" and held is None and isinstance(root, Obj):
        calls = part.provider.draft_calls
        if attr in calls.assigned_outside_constructors(e.ctx):
            v = calls.after_load(e.ctx, attr, root)
            if v is None or isinstance(v, (bool, int, float, str)):
                return v
            return Obj(text) if isinstance(v, (Obj, Instance)) else Unknown(text)
        none = part.provider.head_reads.is_none(e.ctx, attr, root, None)
        if none is not None:
            return None if none else Obj(text)  # (an object: surely not None)
    return Unknown(text)


def _loop_line(fn: FunctionFact, loop_id: int) -> int:
    """The line of ``fn``'s loop ``loop_id`` (the function's own line when it has none such)."""
    return next((lp.line for lp in fn.loops if lp.id == loop_id), fn.line)


def _conjuncts(b: BranchFact) -> list[PExpr | None]:
    """The ``and``-conjuncts of the arm's test as trees: from the whole test the facts keep
    (``guard``; the conjuncts' texts are shortened), else parsed from the texts."""
    if b.guard is not None:
        return list(b.guard.values) if isinstance(b.guard, PBool) and b.guard.op == "and" else [b.guard]
    return [parse_pexpr(t.text) for t in b.tests]


def _made_either_way(e: _Edge, b: BranchFact, target: StartupTarget) -> bool:
    """The function makes the same call (callee and arguments as written) in the arm on the
    other side of ``b``'s test, under the same other arms (or, the chain's last call being a
    target call, another target call there)."""
    other = [x.id for x in e.fn.branches if x.line == b.line and x.tests == b.tests and x.negated != b.negated]
    want = {tuple(other[0] if i == b.id else i for i in e.call.branches)} if other else set()

    def same(c: CallFact) -> bool:
        return (c.func == e.call.func and c.loops == e.call.loops and c.star_args == e.call.star_args
                and c.star_kwargs == e.call.star_kwargs and [a.text for a in c.args] == [a.text for a in e.call.args]
                and [(k.name, k.value.text) for k in c.keywords] == [(k.name, k.value.text) for k in e.call.keywords])

    final = target.is_call(e.key, e.call)
    return any(c is not e.call and c.branches in want and (same(c) or (final and target.is_call(e.key, c)))
               for c in e.fn.calls)
