"""Limits on what unpacking one source distribution may cost (a decompression bomb is refused).

An sdist is refused, with one line and before anything is written, when it holds more
than ``MTP_AUDIT_MAX_ARCHIVE_MEMBERS`` members (default 200,000) or its files add up to
more than ``MTP_AUDIT_MAX_UNPACKED_MB`` megabytes (default 4,096). A vLLM release has
about 10,000 members and 150 MB. Members are counted while the archive is read, so a
million-member archive stops at the limit instead of being listed whole.
"""

from __future__ import annotations

import os
import tarfile
from dataclasses import dataclass

from ..common.errors import FetchError, UsageError

MEMBERS_VAR = "MTP_AUDIT_MAX_ARCHIVE_MEMBERS"
SIZE_VAR = "MTP_AUDIT_MAX_UNPACKED_MB"
DEFAULT_MEMBERS = 200_000
DEFAULT_MB = 4096


class ArchiveTooLarge(FetchError):
    pass


@dataclass(frozen=True)
class ArchiveLimits:
    members: int = DEFAULT_MEMBERS
    megabytes: int = DEFAULT_MB

    @property
    def bytes(self) -> int:
        return self.megabytes * 1024 * 1024


def _positive(var: str, default: int) -> int:
    raw = os.environ.get(var, "").strip()
    if not raw:
        return default
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        value = 0
    if value <= 0:
        raise UsageError(f"{var} must be a positive whole number, got {raw!r}")
    return value


def archive_limits() -> ArchiveLimits:
    """The limits in force (environment variables of the module docstring, else the defaults)."""
    return ArchiveLimits(_positive(MEMBERS_VAR, DEFAULT_MEMBERS), _positive(SIZE_VAR, DEFAULT_MB))


def limited_members(tar: tarfile.TarFile, archive: str, limits: ArchiveLimits | None = None) -> list[tarfile.TarInfo]:
    """Every member of ``tar``; :class:`ArchiveTooLarge` as soon as a limit is passed."""
    limits = limits or archive_limits()
    members: list[tarfile.TarInfo] = []
    total = 0
    while True:
        m = tar.next()
        if m is None:
            return members
        members.append(m)
        if len(members) > limits.members:
            raise ArchiveTooLarge(
                f"sdist {archive} has more than {limits.members:,} members (the limit; raise it with "
                f"{MEMBERS_VAR}=N); nothing was unpacked")
        if m.isfile():
            total += max(m.size, 0)
            if total > limits.bytes:
                raise ArchiveTooLarge(
                    f"sdist {archive} unpacks to more than {limits.megabytes:,} MB (the limit; raise it with "
                    f"{SIZE_VAR}=N); nothing was unpacked")
