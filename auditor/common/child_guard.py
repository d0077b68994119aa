"""Worker processes die with the process that started them.

A pool worker blocked in its task outlives a parent killed with ``kill -9`` (nothing runs
in the parent to stop it). :func:`die_with_parent` is the pool's initializer: on Linux
the kernel sends the worker SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``);
elsewhere a daemon thread polls for the parent and exits the worker when it is gone.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1


def _prctl_deathsig() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(1)
        time.sleep(0.5)


def die_with_parent(parent: int) -> None:
    """Pool initializer (``initargs=(os.getpid(),)``)."""
    if not _prctl_deathsig():
        threading.Thread(target=_watch, args=(parent,), daemon=True, name="mtp-audit-parent-watch").start()
    if os.getppid() != parent:  # the parent died before the guard was set
        os._exit(1)
