"""The partial evaluator on classes, objects and modules of the tree (issue 18, vLLM 0.34.0's
speculator dispatch: a method's config class looked up in a module table of qualified names
built by f-strings, resolved with ``importlib.import_module`` and ``getattr``, specialised by a
classmethod that calls ``super()``, read through a property, its class attribute naming the
class to build). Each known value is checked against CPython importing the same fixture
package (ours, never scanned code); where paths disagree the value is one of the options
CPython gives for the configurations they stand for; what is not modelled stays unknown."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest
from scan_helpers import write_tree

from auditor.analyses.dispatch.syntax import BodiesWorld
from auditor.analyses.partial_eval import Evaluator, Instance, Obj, Unknown
from auditor.common.config import Config
from auditor.facts.cache import FactsCache
from auditor.index.bodies import FunctionBodies
from auditor.index.index import Index
from auditor.source.trees import DirectoryTree

PKG = "mtpfixture"
CONFS = f"{PKG}/confs.py"
FILES = {
    f"{PKG}/__init__.py": "",
    CONFS: textwrap.dedent(f'''
        import importlib
        from typing import cast

        from {PKG}.builders import Base

        _PKG = "{PKG}"


        def _builtin(module, name):
            return f"{{_PKG}}.{{module}}.{{name}}"


        _BY_METHOD: dict = {{"a": _builtin("kinds", "AConf"), "b": _builtin("kinds", "BConf")}}


        def resolve(qualname):
            module_name, obj_name = qualname.rsplit(".", 1)
            module = importlib.import_module(module_name)
            return getattr(module, obj_name)


        class Spec:
            def __init__(self, method, n):
                self.method = method
                self.n = n

            def wide(self):
                return self.n > 1

            @property
            def conf(self):
                return conf_class(self)(self)


        def conf_class(spec):
            cls = resolve(_BY_METHOD[spec.method])
            return cls.specialize(spec)


        def build(spec):
            conf = spec.conf
            factory = cast(type, resolve(conf.target))
            if not (isinstance(factory, type) and issubclass(factory, Base)):
                raise TypeError("not a Base")
            return factory(spec)


        def target_of(spec):
            return spec.conf.target


        def missing(spec):
            return getattr(conf_class(spec), "no_such_attribute", None)


        def allows(spec, option):
            return option in conf_class(spec).options


        def written(spec):
            conf = conf_class(spec)(spec)
            conf.target = "elsewhere"
            return conf.target


        def outside():
            return importlib.import_module("json")
    '''),
    f"{PKG}/kinds.py": textwrap.dedent('''
        from typing import ClassVar


        class Conf:
            target: ClassVar[str | None] = None
            options = frozenset({"x", "y"})

            def __init__(self, spec):
                self.spec = spec

            @classmethod
            def specialize(cls, spec):
                return cls


        class AConf(Conf):
            target = "%s.builders.ABuilder"
            options = Conf.options | {"z"}

            @classmethod
            def specialize(cls, spec):
                if not spec.wide():
                    return super().specialize(spec)
                from %s.kinds import WideAConf
                return WideAConf


        class WideAConf(AConf):
            target = "%s.builders.WideBuilder"
            options = AConf.options - {"x"}


        class BConf(Conf):
            target = "%s.builders.BBuilder"
            extra = {"w"}
            options = Conf.options ^ extra  # a name of the class body (its scope, not the module's)
    ''' % ((PKG,) * 4)),
    f"{PKG}/builders.py": textwrap.dedent('''
        class Base:
            def __init__(self, spec):
                self.spec = spec


        class ABuilder(Base):
            pass


        class WideBuilder(Base):
            pass


        class BBuilder(Base):
            pass
    '''),
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    return write_tree(tmp_path_factory.mktemp("classes"), FILES)


@pytest.fixture(scope="module")
def world(tree):
    index = Index(DirectoryTree(tree, packages=(PKG,)), Config(), FactsCache(None))
    return BodiesWorld(FunctionBodies(index))


@pytest.fixture(scope="module")
def cpython(tree):
    sys.path.insert(0, str(tree))  # our own fixture package, never scanned code
    try:
        yield importlib.import_module(f"{PKG}.confs")
    finally:
        sys.path.remove(str(tree))
        for name in [m for m in sys.modules if m == PKG or m.startswith(f"{PKG}.")]:
            del sys.modules[name]


def _evaluate(world, func: str, **args):
    fn = world.function((CONFS, func))
    assert fn is not None and fn.body, func
    return Evaluator(world).run_joined((CONFS, func), fn, args).returned


def _spec(method, n):
    return Obj("spec", {"method": method, "n": n}, cls=(CONFS, "Spec"))


def _name(v):
    """A value as CPython's result is compared: a class's or an object's class name, else itself."""
    if isinstance(v, Instance):
        return v.cls[1]
    return v


@pytest.mark.parametrize("method,n", [("a", 1), ("a", 3), ("b", 1), ("b", 5)])
def test_the_class_built_is_the_one_cpython_builds(world, cpython, method, n):
    got = _evaluate(world, "build", spec=_spec(method, n))
    assert isinstance(got, Instance), got
    assert got.cls[1] == type(cpython.build(cpython.Spec(method, n))).__name__


@pytest.mark.parametrize("method,n", [("a", 1), ("a", 2), ("b", 2)])
def test_a_class_attribute_through_a_property_is_cpythons(world, cpython, method, n):
    assert _evaluate(world, "target_of", spec=_spec(method, n)) == cpython.target_of(cpython.Spec(method, n))


def test_an_attribute_no_class_of_a_whole_mro_defines_takes_getattrs_default(world, cpython):
    assert _evaluate(world, "missing", spec=_spec("b", 1)) is None is cpython.missing(cpython.Spec("b", 1))


def test_paths_that_build_different_classes_give_the_options_cpython_can_build(world, cpython):
    """The layer count unknown: which class is built depends on it, and the value says so with
    exactly the classes CPython builds for the counts that decide it."""
    got = _evaluate(world, "build", spec=_spec("a", Unknown("n")))
    assert isinstance(got, Unknown) and got.options is not None, got
    assert {_name(o) for o in got.options} == {type(cpython.build(cpython.Spec("a", n))).__name__ for n in (1, 2)}


@pytest.mark.parametrize("method,n,option", [("a", 1, "x"), ("a", 1, "z"), ("a", 2, "x"), ("a", 2, "y"),
                                             ("a", 2, "w")])
def test_a_class_attribute_computed_from_a_bases_is_cpythons(world, cpython, method, n, option):
    """``options = Base.options - {"x"}`` in a class body: evaluated in its module, the base's
    own computed value first."""
    got = _evaluate(world, "allows", spec=_spec(method, n), option=option)
    assert got is cpython.allows(cpython.Spec(method, n), option)


@pytest.mark.parametrize("func,args", [
    ("allows", {"spec": _spec("b", 1), "option": "w"}),  # reads a name of its class body
    ("build", {"spec": _spec(Unknown("method"), 1)}),  # the table read at an unknown key
    ("written", {"spec": _spec("a", 1)}),  # set on an object: its class attribute no longer says
    ("outside", {}),  # a module the tree does not hold
])
def test_what_is_not_modelled_stays_unknown(world, cpython, func, args):
    got = _evaluate(world, func, **args)
    assert isinstance(got, Unknown) and not got.options, got
