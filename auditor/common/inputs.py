"""An output path that is one of the command's inputs is refused before any work starts.

``layers --hf-config config.json -o config.json``, ``scan --baseline b.json -o b.json``,
``baseline create -o pyproject.toml`` (the configuration read by default): each would
overwrite what the command reads. Paths are compared as files (through symbolic links
and hard links, ``os.path.samefile``) when both exist, else by their resolved names; an
output inside a scanned package directory (``<root>/vllm/``) is refused too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable, Optional

from .errors import UsageError


def _same(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def _inside(path: Path, directory: Path) -> bool:
    try:
        return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(directory))
    except (OSError, ValueError):
        return False


def refuse_output_over_inputs(
    output: Optional[Path],
    inputs: Iterable[tuple[str, Optional[Path]]],
    trees: Iterable[Optional[Path]] = (),
    packages: Iterable[str] = ("vllm",),
) -> None:
    """UsageError when ``output`` is one of ``inputs`` (option name, path) or lies in a
    package directory of one of ``trees`` (roots that hold ``vllm/``)."""
    if output is None or str(output) in ("", "-"):
        return
    for option, path in inputs:
        if path is not None and str(path) and _same(output, path):
            raise UsageError(f"-o {output} is the command's own input ({option}); give another output file")
    packages = tuple(packages)
    for root in trees:
        if root is None:
            continue
        for pkg in packages:
            base = root / pkg if (root / pkg).is_dir() else (root if root.name == pkg else None)
            if base is not None and _inside(output, base):
                raise UsageError(f"-o {output} is inside the scanned tree {base}; give an output file outside it")


def default_config(path: Optional[Path]) -> Optional[Path]:
    """The pyproject.toml a command reads when no --config is given: that of PATH's root
    (the directory holding vllm/)."""
    if path is None:
        return None
    root = path.parent if path.name == "vllm" and not (path / "vllm").is_dir() else path
    return root / "pyproject.toml"
