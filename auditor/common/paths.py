"""Where mtp-audit keeps its caches (one definition, used by every command)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def default_cache_dir() -> Path:
    """``$MTP_AUDIT_CACHE_DIR``, else the platform's user cache directory for mtp-audit
    (``$XDG_CACHE_HOME/mtp-audit`` or ``~/.cache/mtp-audit`` on Linux)."""
    env = os.environ.get("MTP_AUDIT_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_cache_dir("mtp-audit", appauthor=False))
