from .._stub import InterpolationMode  # noqa: F401
from .._stub import missing as _missing


def __getattr__(name):
    return _missing("torchvision.transforms.functional", name)
