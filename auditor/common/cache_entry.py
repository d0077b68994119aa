"""Sealed cache entries: every entry carries a digest of its content and of the key it answers.

An entry is one header line and the payload::

    mtp-audit-entry 1 <key> <sha256 of key, NUL, payload>\\n<payload>

:func:`unseal` returns the payload only when the header names the key asked for and the
digest matches the bytes that follow: a truncated, edited, foreign or old-format entry is
a miss (and the caller removes it), never an answer.
"""

from __future__ import annotations

import hashlib

MAGIC = b"mtp-audit-entry 1 "


def _digest(key: str, payload: bytes) -> str:
    return hashlib.sha256(key.encode("utf-8") + b"\0" + payload).hexdigest()


def seal(key: str, payload: bytes) -> bytes:
    return MAGIC + key.encode("utf-8") + b" " + _digest(key, payload).encode() + b"\n" + payload


def unseal(key: str, raw: bytes) -> bytes | None:
    """The payload of ``raw`` when it is a whole, unedited entry for ``key``; else None."""
    header, newline, payload = raw.partition(b"\n")
    if not newline or not header.startswith(MAGIC):
        return None
    fields = header[len(MAGIC):].split(b" ")
    if len(fields) != 2:
        return None
    try:
        named, digest = fields[0].decode("ascii"), fields[1].decode("ascii")
    except UnicodeDecodeError:
        return None
    if named != key or digest != _digest(key, payload):
        return None
    return payload
