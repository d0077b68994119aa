"""Writes that never leave a half-written file behind (temp file in the same directory + rename).

The file gets the permissions a plain ``open(path, "w")`` would give it: an existing
file keeps its mode, a new one follows the umask (``tempfile.mkstemp`` alone would
make every report, baseline and fixed source file private, 0600).
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import tempfile
from pathlib import Path

from .errors import UsageError


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode_for(path: Path) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def write_atomic(path: Path, data: bytes | str) -> None:
    """Replace ``path`` with ``data`` atomically; raises OSError (nothing is left behind)."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    mode = _mode_for(path)
    # ".tmp-" prefix: leftovers are easy to find (and tests look for exactly that).
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            os.fchmod(fh.fileno(), mode)
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
    if str(output) in ("", "."):
        raise UsageError("-o needs a file name (an empty name or '.' is the current directory)")
    problem = _unwritable(output)
    if problem:
        raise UsageError(f"cannot write the report to {str(output)!r}: {problem}")
    try:
        if _is_stream(output):
            # /dev/null, /dev/stdout, a named pipe: write into it. Renaming a temp file over
            # it would replace the device node itself with a regular file.
            with open(output, "w", encoding="utf-8") as fh:
                fh.write(text)
        else:
            write_atomic(output, text)
    except OSError as exc:
        raise UsageError(f"cannot write the report to {str(output)!r}: {_reason(exc, output)}") from None


def _is_stream(output: Path) -> bool:
    try:
        mode = os.stat(output).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def _unwritable(output: Path) -> str:
    """Why ``output`` cannot take a report, in plain words ('' when it looks fine)."""
    if output.is_dir():
        return "it is a directory; give a file name"
    if output.exists() and not output.is_file() and not _is_stream(output):
        return "it is not a regular file, a device or a pipe"
    if not output.parent.exists():
        return f"the directory {str(output.parent)!r} does not exist"
    if not output.parent.is_dir():
        return f"{str(output.parent)!r} is not a directory"
    return ""


def _reason(exc: OSError, output: Path) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"no permission to create files in {str(output.parent)!r}"
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    if exc.errno == errno.ENOENT:
        return f"{str(output.parent)!r} does not accept new files"
    return exc.strerror or str(exc)
