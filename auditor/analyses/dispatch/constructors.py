"""What an assert of a draft model's constructor reads (issue 18: a constructor that
derives its layer count from the config and asserts it, ``self.n = getattr(config, "f", 1)``
then ``assert self.n == 1``, rejects the configuration while the drafter loads the model).

The assert is evaluated on a path where the constructor's locals hold their single
definitions (resolved through each other, up to :data:`LOCAL_DEPTH` deep) and ``self`` is an
open object holding the attributes the constructor sets once, unconditionally, before the
assert (``FunctionFact.attr_defs``). Everything else ``self`` has stays unknown.
"""

from __future__ import annotations

import copy
from collections import Counter

from ...facts.extract import FunctionFact, PConst, PExpr
from ...index.index import ClassKey, FuncKey, Index
from ..partial_eval import Evaluator, Obj, Path, Unknown, Value
from ..partial_eval.values import _Absent
from ..reachability import COUNT_HINTS
from .part import DispatchPart
from .syntax import expr_names as names, name_chain, self_reads

#: how deep a local's definition may go through other locals' (``config`` from
#: ``draft_model_config`` from ``speculative_config`` from the constructor's parameter)
LOCAL_DEPTH = 6


def constructor_env(fn: FunctionFact, roles: dict[str, str], root: Obj, hf: Obj | None) -> dict[str, Value]:
    """A draft model constructor's parameters as the build passes them: its ``roles["root"]``
    parameter (``vllm_config``) the build root, its ``config``/``roles["hf"]`` parameter the
    draft config (when known); ``self`` unknown."""
    env: dict[str, Value] = {"self": Unknown("self")}
    for prm in fn.params:
        if prm.name == roles["root"]:
            env[prm.name] = root
        elif prm.name in ("config", roles["hf"]) and hf is not None:
            env[prm.name] = hf
    return env


def constructor_path(ev: Evaluator, key: FuncKey, fn: FunctionFact, env: dict[str, Value], test: PExpr,
                     line: int) -> Path:
    """The path on which constructor ``fn``'s assert ``test`` (at ``line``) is evaluated."""
    p = Path(dict(env))
    attrs = [a for a in dict.fromkeys(self_reads(test)) if a in fn.attr_defs and _set_before(fn, a, line)]

    def resolve(name: str, depth: int) -> None:
        if name in p.env or name not in fn.local_defs or depth >= LOCAL_DEPTH:
            return
        expr = fn.local_defs[name]
        for n in names(expr):
            resolve(n, depth + 1)
        # Each over its own copy: an unknown callee in one definition makes what it is
        # handed unknown, which must not reach the others.
        p.env[name] = ev.eval(expr, Path(copy.deepcopy(p.env)), key)

    for e in [test, *(fn.attr_defs[a] for a in attrs)]:
        for n in names(e):
            resolve(n, 0)
    if attrs:
        p.env["self"] = Obj("self", {a: ev.eval(fn.attr_defs[a], Path(copy.deepcopy(p.env)), key) for a in attrs})
    return p


def self_assignments(index: Index, cls: ClassKey) -> Counter[str]:
    """How many ``self.<attr> = ...`` statements the methods of ``cls``'s MRO hold, per attribute."""
    return Counter(a.target[1] for c in index.mro(cls) for m in index.methods(c).values() for a in m.attr_assigns
                   if len(a.target) == 2 and a.target[0] == "self")


def config_copies(index: Index, root: str, cls: ClassKey, config: Obj) -> dict[str, tuple[str, Value]]:
    """The attributes of ``cls`` its constructor copies from the configuration and nothing else
    writes, with the field chain each copies and its value in ``config`` (the ``root``
    parameter's object, ``vllm_config``) where that is known: the one assignment to
    ``self.<attr>`` in the whole MRO is a statement of an ``__init__`` body that runs (each
    ``__init__`` before it in the MRO calls an ``__init__``), its value an attribute chain on
    the ``root`` parameter (``self.dp_size = vllm_config.parallel_config.data_parallel_size``),
    or on ``self.<sub>`` where ``config`` holds that sub-config as a role (``self.x =
    self.speculative_config.x``: the caller's ``self`` shares it)."""
    count = self_assignments(index, cls)
    out: dict[str, tuple[str, Value]] = {}
    for c in index.mro(cls):
        init = index.methods(c).get("__init__")
        if init is None:
            continue
        if any(prm.name == root for prm in init.params):
            for attr, e in init.attr_defs.items():
                chain = name_chain(e)
                # On the root parameter, or on a ``self`` attribute holding one of its
                # sub-configs (``self.speculative_config.use_local_argmax_reduction``).
                via_self = chain is not None and len(chain) > 2 and chain[0] == "self" and chain[1] in config.roles
                if count.get(attr) != 1 or chain is None or not (chain[0] == root or via_self):
                    continue
                held: Value | _Absent = config
                for part in chain[1:]:
                    held = held.get(part) if isinstance(held, Obj) else Unknown(part)
                if not isinstance(held, (Unknown, Obj, _Absent)):
                    out.setdefault(attr, (".".join(chain[1:]), held))
        if not any(x.func and x.func[-1] == "__init__" for x in init.calls):
            break  # the bases' constructors do not run from this one
    return out


def fixed_layer_count(part: DispatchPart, model: ClassKey) -> tuple[int, str] | None:
    """The layer count a constructor fixes whatever the config says: a container of the
    model sized by an attribute named as a count (``COUNT_HINTS``) that the constructor sets
    once to an int literal (``self.num_mtp_layers = 1`` then ``range(start, start +
    self.num_mtp_layers)``), with where it is set."""
    for p in sorted(part.registry.model_parts(model)):
        for c in part.types.containers(p):
            found = part.index.method(c.owner, "__init__")
            if found is None:
                continue
            for a in c.size_attrs:
                v = found[1].attr_defs.get(a)
                if any(h in a.lower() for h in COUNT_HINTS) and isinstance(v, PConst) and type(v.value) is int:
                    return v.value, f"self.{a} = {v.value} in {found[0][1]}.__init__"
    return None


def _set_before(fn: FunctionFact, attr: str, line: int) -> bool:
    lines = [a.line for a in fn.attr_assigns if a.target == ("self", attr)]
    return bool(lines) and max(lines) < line
