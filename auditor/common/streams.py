"""Standard output that is closed or full: messages of their own, not internal errors.

``mtp-audit rules >&-`` starts with no stdout at all (``sys.stdout`` is None);
``mtp-audit rules > /dev/full`` fails at the first flush. Either way the user gets one
line naming stdout, and fd 1 is pointed at /dev/null so that the interpreter's own flush
at exit does not print a second error about the same stream.
"""

from __future__ import annotations

import errno
import io
import os
import sys

from .errors import UsageError

CLOSED = "standard output is closed; give -o FILE or redirect it"


class _ClosedStdout(io.TextIOBase):
    """Stands in for a missing stdout: writing to it is the usage error."""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        raise UsageError(CLOSED)

    def isatty(self) -> bool:
        return False


def guard_stdout() -> None:
    if sys.stdout is None:
        sys.stdout = _ClosedStdout()


def silence_stdout() -> None:
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass
    try:
        sys.stdout = open(os.devnull, "w")
    except OSError:
        pass


def stdout_error(exc: OSError) -> str | None:
    """The message for an OSError that came from writing stdout (None: it did not)."""
    if exc.errno not in (errno.ENOSPC, errno.EBADF, errno.EIO, errno.EDQUOT):
        return None
    silence_stdout()
    reason = "no space left on the device" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
    return f"cannot write to standard output: {reason}"
