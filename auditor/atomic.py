"""Writes that never leave a half-written file behind (temp file in the same directory + rename)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from .errors import UsageError


def write_atomic(path: Path, data: bytes | str) -> None:
    """Replace ``path`` with ``data`` atomically; raises OSError (nothing is left behind)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    # ".tmp-" prefix: leftovers are easy to find (and tests look for exactly that).
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def emit(text: str, output: Path | None) -> None:
    """A report to stdout, or atomically to ``output`` (a clear error if it cannot be written)."""
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        write_atomic(output, text)
    except OSError as exc:
        raise UsageError(f"cannot write {output}: {exc.strerror or exc}") from None
