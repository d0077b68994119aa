"""Temp files and directories that name the process writing them.

A download (``.part``) or an unpacking directory (``.tmp``) in the cache carries
``@<host>-<pid>@`` in its name. A later command removes it at once when that process is
gone on this host (a run killed with ``kill -9`` leaves nothing for long), and any such
entry after some hours (another host's, on a shared cache).
"""

from __future__ import annotations

import os
import re
import socket

_TAG = re.compile(r"@([A-Za-z0-9._-]+)-(\d+)@")


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "host"


def owner_tag() -> str:
    return f"@{_host()}-{os.getpid()}@"


def owner_is_gone(name: str) -> bool:
    """True when ``name`` carries the tag of a process of this host that no longer runs."""
    m = _TAG.search(name)
    if m is None or m.group(1) != _host():
        return False
    pid = int(m.group(2))
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, owned by another user
        return False
    return False
