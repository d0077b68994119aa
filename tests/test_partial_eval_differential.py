"""Differential property test of the partial evaluator (issue 18): hypothesis writes small
pure dispatch-like modules (ifs on config fields, comparisons, and/or/not, assignments,
attribute and dict writes, list appends, returns of class names and constants, calls of
helpers of the same module) and configurations; CPython runs them (``exec`` of the code
this test generated, never of scanned code) and so does the evaluator, which may not
``exec``/``eval`` anything. Every value the evaluator calls known — the result, the
config's fields, the dict and the list afterwards — must equal what CPython computed.

Some config fields are hidden from the evaluator (its object is then open): whatever
depends on them must come out unknown, not guessed.
"""

from __future__ import annotations

import builtins
import textwrap
import types
from functools import lru_cache
from typing import Any
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_partial_eval import _with_bodies

from auditor.analyses.partial_eval import ClassRef, Evaluator, FuncRef, Instance, Obj, Unknown, World

INT_FIELDS = ("n0", "n1")
STR_FIELDS = ("s0",)
BOOL_FIELDS = ("f0", "f1")
OPT_FIELDS = ("o0",)  # None or an int
FIELDS = INT_FIELDS + STR_FIELDS + BOOL_FIELDS + OPT_FIELDS
NAMES = ("v0", "v1", "v2")
KEYS = ("k0", "k1")
CLASSES = ("A", "B")

_ints = st.integers(-2, 3)
_strs = st.sampled_from(["a", "b", ""])


@lru_cache(maxsize=None)  # strategies are built once: building them is the slow part
def _const() -> st.SearchStrategy[str]:
    return st.one_of(_ints.map(repr), _strs.map(repr), st.sampled_from(["None", "True", "False"]))


@lru_cache(maxsize=None)
def _atom() -> st.SearchStrategy[str]:
    return st.one_of(
        _const(),
        st.sampled_from(FIELDS).map(lambda f: f"cfg.{f}"),
        st.sampled_from(NAMES),
        st.sampled_from(KEYS).map(lambda k: f"d.get({k!r})"),
        st.just("len(xs)"),
        st.sampled_from(KEYS).map(lambda k: f"({k!r} in d)"),
        st.sampled_from(CLASSES),
    )


@lru_cache(maxsize=None)
def _cond(depth: int = 2) -> st.SearchStrategy[str]:
    base = st.one_of(
        st.sampled_from(BOOL_FIELDS).map(lambda f: f"cfg.{f}"),
        st.tuples(st.sampled_from(INT_FIELDS), st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), _ints).map(
            lambda t: f"cfg.{t[0]} {t[1]} {t[2]}"),
        # Bounds: min(cfg.n, 1) > 1 is False whatever n is (and a hidden n keeps it so).
        st.tuples(st.sampled_from(["min", "max"]), st.sampled_from(INT_FIELDS), _ints,
                  st.sampled_from(["<", "<=", ">", ">=", "==", "!="]), _ints, st.booleans()).map(
            lambda t: (f"{t[0]}(cfg.{t[1]}, {t[2]}) {t[3]} {t[4]}" if t[5] else f"{t[4]} {t[3]} {t[0]}({t[2]}, cfg.{t[1]})")),
        st.tuples(st.sampled_from(STR_FIELDS), st.sampled_from(["==", "!="]), _strs).map(
            lambda t: f"cfg.{t[0]} {t[1]} {t[2]!r}"),
        st.tuples(st.sampled_from(OPT_FIELDS), st.sampled_from(["is None", "is not None"])).map(
            lambda t: f"cfg.{t[0]} {t[1]}"),
        st.tuples(_atom(), st.sampled_from(["==", "!="]), _atom()).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
        st.tuples(_atom(), st.lists(_const(), min_size=1, max_size=3)).map(lambda t: f"{t[0]} in ({', '.join(t[1])},)"),
        _atom(),
    )
    if depth == 0:
        return base
    sub = _cond(depth - 1)
    return st.one_of(
        base,
        st.tuples(sub, st.sampled_from(["and", "or"]), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(sub, st.sampled_from(["and", "or"]), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        sub.map(lambda c: f"(not {c})"),
    )


@lru_cache(maxsize=None)
def _expr() -> st.SearchStrategy[str]:
    return st.one_of(_atom(), _cond(1), st.tuples(_cond(0), _atom(), _atom()).map(lambda t: f"({t[1]} if {t[0]} else {t[2]})"))


@lru_cache(maxsize=None)
def _int_expr() -> st.SearchStrategy[str]:
    """An expression whose value is an int whatever the configuration (fields n0, n1 stay ints)."""
    ints = st.one_of(_ints.map(repr), st.just("len(xs)"), st.sampled_from(INT_FIELDS).map(lambda f: f"cfg.{f}"))
    return st.one_of(ints, st.tuples(_cond(0), ints, ints).map(lambda t: f"({t[1]} if {t[0]} else {t[2]})"),
                     st.tuples(st.sampled_from(["min", "max"]), ints, ints).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"))


@lru_cache(maxsize=None)
def _simple_stmt(helpers: int) -> st.SearchStrategy[list[str]]:
    options = [
        st.tuples(st.sampled_from(NAMES), _expr()).map(lambda t: [f"{t[0]} = {t[1]}"]),
        # An int field gets an int (the programs order-compare them: a str there would make
        # CPython raise, and the example would test nothing); the other fields get anything.
        st.tuples(st.sampled_from(INT_FIELDS), _int_expr()).map(lambda t: [f"cfg.{t[0]} = {t[1]}"]),
        st.tuples(st.sampled_from(tuple(f for f in FIELDS if f not in INT_FIELDS)), _expr()).map(
            lambda t: [f"cfg.{t[0]} = {t[1]}"]),
        st.tuples(st.sampled_from(KEYS), _expr()).map(lambda t: [f"d[{t[0]!r}] = {t[1]}"]),
        _expr().map(lambda e: [f"xs.append({e})"]),
        st.tuples(st.sampled_from(NAMES), st.sampled_from(CLASSES)).map(lambda t: [f"{t[0]} = {t[1]}()"]),
    ]
    if helpers:
        options.append(st.tuples(st.sampled_from(NAMES), st.integers(0, helpers - 1)).map(
            lambda t: [f"{t[0]} = helper{t[1]}(cfg, d, xs)"]))
        options.append(st.integers(0, helpers - 1).map(lambda i: [f"helper{i}(cfg, d, xs)"]))
    return st.one_of(*options)


@lru_cache(maxsize=None)
def _block(helpers: int, depth: int, in_branch: bool = False) -> st.SearchStrategy[list[str]]:
    stmt = _stmt(helpers, depth, in_branch)
    return st.lists(stmt, min_size=1, max_size=4).map(lambda blocks: [line for b in blocks for line in b])


@lru_cache(maxsize=None)
def _stmt(helpers: int, depth: int, in_branch: bool) -> st.SearchStrategy[list[str]]:
    """Ifs weigh as much as plain statements; a ``return`` only inside a branch (an early
    return at the top would make the rest dead)."""
    simple = _simple_stmt(helpers)
    options = [simple, simple]
    if in_branch:
        options.append(_expr().map(lambda e: [f"return {e}"]))
    if depth > 0:
        def if_stmt(t: tuple[str, list[str], list[str] | None]) -> list[str]:
            cond, body, orelse = t
            out = [f"if {cond}:"] + ["    " + x for x in body]
            if orelse:
                out += ["else:"] + ["    " + x for x in orelse]
            return out

        inner = _block(helpers, depth - 1, True)
        options += [st.tuples(_cond(), inner, st.one_of(st.none(), inner)).map(if_stmt)] * 3
    # (one_of would fold the repeated options into one: choose by index to keep the weights)
    return st.integers(0, len(options) - 1).flatmap(lambda i: options[i])


@st.composite
def modules(draw: st.DrawFn) -> str:
    n_helpers = draw(st.integers(0, 2))
    parts = ["class A:\n    pass\n", "class B:\n    pass\n"]
    for i in range(n_helpers):
        body = draw(_block(i, 2))
        parts.append(f"def helper{i}(cfg, d, xs):\n    v0 = v1 = v2 = 0\n" + "\n".join("    " + x for x in body)
                     + f"\n    return {draw(_expr())}\n")
    body = draw(_block(n_helpers, 3))
    parts.append("def main(cfg, d, xs):\n    v0 = v1 = v2 = None\n" + "\n".join("    " + x for x in body)
                 + f"\n    return {draw(_expr())}\n")
    return "\n".join(parts)


@st.composite
def configs(draw: st.DrawFn) -> tuple[dict[str, Any], frozenset[str]]:
    values: dict[str, Any] = {}
    for f in INT_FIELDS:
        values[f] = draw(_ints)
    for f in STR_FIELDS:
        values[f] = draw(_strs)
    for f in BOOL_FIELDS:
        values[f] = draw(st.booleans())
    for f in OPT_FIELDS:
        values[f] = draw(st.one_of(st.none(), _ints))
    # Mostly some fields hidden: branches on them are where unknowns could turn into knowns.
    hidden = draw(st.one_of(st.just(frozenset()), st.frozensets(st.sampled_from(FIELDS), min_size=1, max_size=4),
                            st.frozensets(st.sampled_from(BOOL_FIELDS + INT_FIELDS), min_size=1, max_size=3)))
    return values, hidden


class _ModuleWorld(World):
    def __init__(self, src: str) -> None:
        self.facts = _with_bodies(src)

    def resolve_name(self, path: str, name: str) -> Any:
        if name in self.facts.classes:
            return ClassRef(("m.py", name))
        if name in self.facts.functions:
            return FuncRef(("m.py", name))
        return Unknown(name)

    def function(self, key: tuple[str, str]) -> Any:
        return self.facts.functions.get(key[1])


def _agree(ev: Any, py: Any, where: str, problems: list[str]) -> None:
    """Everything ``ev`` (the evaluator's value) claims to know about ``py`` holds."""
    if isinstance(ev, Unknown):
        return
    if isinstance(ev, ClassRef):
        if not (isinstance(py, type) and py.__name__ == ev.cls[1]):
            problems.append(f"{where}: evaluator says class {ev.cls[1]}, CPython {py!r}")
        return
    if isinstance(ev, Instance):
        if type(py).__name__ != ev.cls[1]:
            problems.append(f"{where}: evaluator says {ev.cls[1]}(), CPython {py!r}")
        return
    if isinstance(ev, Obj):
        if not isinstance(py, types.SimpleNamespace):
            problems.append(f"{where}: evaluator says the config, CPython {py!r}")
            return
        for k, v in ev.fields.items():
            if not hasattr(py, k):
                if not (isinstance(v, Unknown) and v.maybe_absent):
                    problems.append(f"{where}.{k}: evaluator has it, CPython not")
                continue
            _agree(v, getattr(py, k), f"{where}.{k}", problems)
        if ev.closed:
            for k in vars(py):
                if k not in ev.fields:
                    problems.append(f"{where}.{k}: CPython has it, the evaluator says absent")
        return
    if isinstance(ev, list):
        if type(py) is not list or len(py) != len(ev):
            problems.append(f"{where}: evaluator {ev!r}, CPython {py!r}")
            return
        for i, (a, b) in enumerate(zip(ev, py)):
            _agree(a, b, f"{where}[{i}]", problems)
        return
    if isinstance(ev, dict):
        if type(py) is not dict or set(py) != set(ev):
            problems.append(f"{where}: evaluator keys {sorted(map(str, ev))}, CPython {py!r}")
            return
        for k in ev:
            _agree(ev[k], py[k], f"{where}[{k!r}]", problems)
        return
    if type(ev) is not type(py) or ev != py:
        problems.append(f"{where}: evaluator {ev!r}, CPython {py!r}")


def _run_cpython(src: str, values: dict[str, Any]) -> tuple[Any, types.SimpleNamespace, dict[str, Any], list[Any]]:
    namespace: dict[str, Any] = {}
    exec(compile(src, "<generated by this test>", "exec"), namespace)  # our generated code, not scanned code
    cfg, d, xs = types.SimpleNamespace(**values), {}, []
    result = namespace["main"](cfg, d, xs)
    return result, cfg, d, xs


def _run_evaluator(src: str, values: dict[str, Any], hidden: frozenset[str]) -> tuple[Any, Obj, Any, Any, Evaluator]:
    world = _ModuleWorld(src)
    cfg = Obj("cfg", {k: v for k, v in values.items() if k not in hidden}, closed=not hidden)
    d: dict[str, Any] = {}
    xs: list[Any] = []
    ev = Evaluator(world)
    frame = {"cfg": cfg, "d": d, "xs": xs}
    with mock.patch.object(builtins, "exec", side_effect=AssertionError("the evaluator called exec")), \
            mock.patch.object(builtins, "eval", side_effect=AssertionError("the evaluator called eval")):
        joined = ev.run_joined(("m.py", "main"), world.facts.functions["main"], frame)
    return joined.returned, cfg, frame["d"], frame["xs"], ev


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(modules(), configs())
def test_every_known_value_equals_what_cpython_computes(src: str, config: tuple[dict[str, Any], frozenset[str]]):
    values, hidden = config
    src = textwrap.dedent(src)
    py_result, py_cfg, py_d, py_xs = _run_cpython(src, values)
    ev_result, ev_cfg, ev_d, ev_xs, _ = _run_evaluator(src, values, hidden)
    problems: list[str] = []
    _agree(ev_result, py_result, "result", problems)
    _agree(ev_cfg, py_cfg, "cfg", problems)
    _agree(ev_d, py_d, "d", problems)
    _agree(ev_xs, py_xs, "xs", problems)
    assert not problems, "\n".join(problems) + "\n\n" + src + f"\nconfig: {values}, hidden from the evaluator: {sorted(hidden)}"


def test_the_evaluator_knows_something_on_these_programs():
    """The property is not vacuous: with nothing hidden, a straight-line program is known."""
    src = textwrap.dedent("""
        class A:
            pass

        def helper0(cfg, d, xs):
            d["k0"] = cfg.n0
            return A

        def main(cfg, d, xs):
            v0 = helper0(cfg, d, xs)
            if cfg.f0 and cfg.n0 > 1:
                xs.append(cfg.s0)
                cfg.s0 = "b"
            else:
                d["k1"] = not cfg.f1
            return v0
    """)
    values = {"n0": 2, "n1": 0, "s0": "a", "f0": True, "f1": False, "o0": None}
    result, cfg, d, xs, _ = _run_evaluator(src, values, frozenset())
    assert result == ClassRef(("m.py", "A")) and d == {"k0": 2} and xs == ["a"] and cfg.fields["s0"] == "b"
    result, cfg, d, xs, _ = _run_evaluator(src, values, frozenset({"f0"}))
    assert isinstance(d, Unknown) or isinstance(d.get("k1", Unknown("")), Unknown)
    assert isinstance(cfg.fields["s0"], Unknown)
