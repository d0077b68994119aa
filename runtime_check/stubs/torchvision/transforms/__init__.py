from .._stub import InterpolationMode  # noqa: F401
from .._stub import missing as _missing
from . import functional, v2  # noqa: F401


def __getattr__(name):
    return _missing("torchvision.transforms", name)
