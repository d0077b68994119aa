"""The blob ids of a directory tree's files, remembered by their identity on disk
(``<cache>/tree-shas/``), so that a tree's digest does not read every file each command.

As in git's index: a file's blob id is reused while its inode, size, modification and change
times are the ones it had when it was read, and only for a file that had not changed for
:data:`~auditor.source.trees.SETTLED_NS` before it was read (a rewrite within the file
system's clock tick could keep its times). A file rewritten since is read again; the change
time cannot be set back from user space, so an edit always shows. A release this tool unpacked
into its own cache (``DirectoryTree.immutable``) is never changed: its listing and blob ids are
taken as recorded, without looking at the disk. One entry per tree root;
sealed (:mod:`auditor.common.cache_entry`) msgspec JSON: a truncated, edited or foreign entry
is a miss (every file is read), never trusted.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import msgspec

from ..common.atomic import write_atomic
from ..common.cache_entry import seal, unseal
from .trees import SETTLED_NS, DirectoryTree

SHA_MEMO_FORMAT = 1


class KnownBlob(msgspec.Struct, frozen=True, array_like=True):
    path: str
    ident: tuple[int, int, int, int]  # inode, size, mtime_ns, ctime_ns when it was read
    sha: str


class ShaMemoEntry(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    format: int
    root: str
    blobs: list[KnownBlob]
    # An immutable tree's listing and its problems (None for any other tree: listed every time).
    files: list[str] | None = None
    problems: list[tuple[str, str, str]] | None = None


_decoder = msgspec.json.Decoder(ShaMemoEntry)
_encoder = msgspec.json.Encoder()


class ShaMemo:
    """Blob ids of one directory tree's files kept between commands (no cache root: none)."""

    def __init__(self, cache_root: Path | None, tree: DirectoryTree) -> None:
        self.tree = tree
        ident = f"tree-shas:{SHA_MEMO_FORMAT}:{tree.root}:{','.join(tree.packages)}:{'immutable' if tree.immutable else 'dir'}"
        self.key = hashlib.sha256(ident.encode()).hexdigest()
        self.path = cache_root / "tree-shas" / self.key[:2] / f"{self.key}.json" if cache_root is not None else None
        self.reused = 0

    def fill(self) -> None:
        """Give the tree the blob ids of the files whose identity on disk is the recorded one."""
        if self.path is None:
            return
        try:
            raw = self.path.read_bytes()
        except OSError:
            return
        payload = unseal(self.key, raw)
        try:
            if payload is None:
                raise ValueError("entry does not verify")
            entry = _decoder.decode(payload)
            if entry.format != SHA_MEMO_FORMAT or entry.root != str(self.tree.root):
                raise ValueError("foreign entry")
        except (ValueError, msgspec.DecodeError, RecursionError):
            self._discard()
            return
        if self.tree.immutable and entry.files is not None and entry.problems is not None:
            if self.tree.listed() is None:
                self.tree.adopt_listing(entry.files, entry.problems)
            listed = set(self.tree.python_files())
            for blob in entry.blobs:
                if blob.path in listed:
                    self.tree.know_blob_sha(blob.path, blob.sha, blob.ident)
                    self.reused += 1
            return
        listed = set(self.tree.python_files())
        for blob in entry.blobs:
            if blob.path not in listed:
                continue
            try:
                st = os.lstat(os.path.join(self.tree.root, blob.path))
            except OSError:
                continue
            if (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) == tuple(blob.ident):
                self.tree.know_blob_sha(blob.path, blob.sha, blob.ident)
                self.reused += 1

    def save(self) -> None:
        """Record the blob ids the tree knows of files that had settled when they were read."""
        if self.path is None:
            return
        settled_before = time.time_ns() - SETTLED_NS
        blobs = [KnownBlob(p, ident, sha) for p, (ident, sha) in sorted(self.tree.known_blob_shas().items())
                 if max(ident[2], ident[3]) < settled_before]
        listing = self.tree.listed() if self.tree.immutable else None
        entry = ShaMemoEntry(SHA_MEMO_FORMAT, str(self.tree.root), blobs,
                             listing[0] if listing else None, listing[1] if listing else None)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, seal(self.key, _encoder.encode(entry)))
        except OSError:
            pass

    def _discard(self) -> None:
        if self.path is not None:
            try:
                self.path.unlink()
            except OSError:
                pass
