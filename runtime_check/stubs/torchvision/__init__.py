"""Import stub for torchvision (see _stub.py): NOT the real library.

Any ``torchvision.<sub>`` module that has no file here is created on import as an empty
stub whose attributes raise when called.
"""
import importlib.abc
import importlib.machinery
import sys
import types

from ._stub import missing as _missing

__version__ = "0.0.0+mtp-audit-stub"
MTP_AUDIT_STUB = True


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        mod = types.ModuleType(spec.name)
        mod.__path__ = []  # a package, so deeper submodules resolve too
        mod.__getattr__ = lambda name, _m=spec.name: _missing(_m, name)
        return mod

    def exec_module(self, module):
        pass


class _StubFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith("torchvision."):
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            try:
                spec = finder.find_spec(fullname, path, target)
            except Exception:
                spec = None
            if spec is not None:
                return None  # a real file of this stub: let the normal finder load it
        return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)


if not any(isinstance(f, _StubFinder) for f in sys.meta_path):
    sys.meta_path.append(_StubFinder())

from . import transforms  # noqa: E402,F401


def __getattr__(name):
    return _missing("torchvision", name)
