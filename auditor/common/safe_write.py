"""Writing a user's file (``fix``, every ``-o``) without defeating what the file system says.

* A file the user cannot write (no write bit, or ``os.access`` says no) is refused with
  one line (:class:`ReadOnlyFile`, exit 2): the tool never writes through a read-only mode,
  even where it could (a temp file and a rename only need the directory to be writable).
* A symbolic link is written through: its target gets the new content, the link stays.
* A file with more than one hard link is rewritten in place, so that every name keeps
  seeing the same file; any other file is replaced atomically (temp file + rename).
* Its mode is kept.
* Text keeps its shape: :func:`read_text` returns the text with ``\\n`` line ends and the
  :class:`TextShape` (encoding, BOM, line end) that :func:`encode_text` puts back.

The temp file of an atomic write is anonymous (``O_TMPFILE``) until the instant it is
renamed into place, so a run killed while writing leaves nothing behind.
"""

from __future__ import annotations

import codecs
import errno
import io
import os
import stat
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path

from .errors import AuditError


class ReadOnlyFile(AuditError):
    """The target may not be written (a one-line error, exit 2)."""


@dataclass(frozen=True)
class TextShape:
    """How a text file's characters are stored: what :func:`encode_text` restores."""

    encoding: str = "utf-8"
    bom: bool = False
    newline: str = "\n"


class MixedLineEndings(ValueError):
    pass


def decode_text(raw: bytes) -> tuple[str, TextShape]:
    """``raw`` as text with ``\\n`` line ends, and its shape. The encoding is Python's
    (a BOM, else a PEP 263 coding line, else UTF-8). Raises ``UnicodeDecodeError``,
    ``SyntaxError`` (a bad coding line) or :class:`MixedLineEndings` (a file whose line
    ends differ cannot be written back as it was)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    bom = raw.startswith(codecs.BOM_UTF8)
    body = raw[len(codecs.BOM_UTF8):] if bom else raw
    codec = "utf-8" if encoding == "utf-8-sig" else encoding
    text = body.decode(codec)
    crlf, lf, cr = text.count("\r\n"), text.count("\n"), text.count("\r")
    if crlf and crlf == lf == cr:
        newline = "\r\n"
    elif cr == 0:
        newline = "\n"
    elif lf == 0:
        newline = "\r"
    else:
        raise MixedLineEndings("mixed line endings")
    if newline != "\n":
        text = text.replace(newline, "\n")
    return text, TextShape(codec, bom, newline)


def encode_text(text: str, shape: TextShape) -> bytes:
    if shape.newline != "\n":
        text = text.replace("\n", shape.newline)
    raw = text.encode(shape.encoding)
    return codecs.BOM_UTF8 + raw if shape.bom else raw


def read_text(path: Path) -> tuple[str, TextShape]:
    return decode_text(Path(path).read_bytes())


def check_writable(path: Path) -> None:
    """Raise :class:`ReadOnlyFile` when ``path`` exists (through links) and may not be written."""
    target = Path(os.path.realpath(path))
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ReadOnlyFile(f"cannot write {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        return  # devices and pipes are written into; callers refuse other kinds
    # The mode bits first: root passes os.access on any file, but a read-only mode is
    # the user's word that the file must not change.
    if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(target, os.W_OK):
        raise ReadOnlyFile(f"{path} is read-only ({stat.filemode(st.st_mode)}); it was not written")


def write_file(path: Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` as described in the module docstring. Raises
    :class:`ReadOnlyFile` or ``OSError``."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    check_writable(path)
    target = Path(os.path.realpath(path))  # through symbolic links: the link stays a link
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        # Hard links: a rename would give this name a new file and leave the others with
        # the old content. In place, so every name sees the new content.
        with open(target, "r+b") as fh:
            fh.write(raw)
            fh.truncate()
            fh.flush()
            os.fsync(fh.fileno())
        return
    mode = stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask()
    replace_atomic(target, raw, mode)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_O_TMPFILE = getattr(os, "O_TMPFILE", 0)


def replace_atomic(path: Path, raw: bytes, mode: int) -> None:
    """Put ``raw`` at ``path`` with one rename. The temp file has no name until just
    before the rename where the platform allows (Linux ``O_TMPFILE``), so a kill leaves
    nothing; elsewhere a ``.tmp-`` file that is removed on any error."""
    directory = path.parent
    if _O_TMPFILE:
        try:
            fd = os.open(directory, os.O_WRONLY | _O_TMPFILE, mode)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
                raise
        else:
            name = None
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(raw)
                    fh.flush()
                    os.fchmod(fh.fileno(), mode)
                    name = _link_anonymous(fh.fileno(), directory, path.name)
                if name is not None:
                    os.replace(name, path)
                    return
            except BaseException:
                if name is not None:
                    _unlink(name)
                raise
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".tmp-{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
            os.fchmod(fh.fileno(), mode)
        os.replace(tmp, path)
    except BaseException:
        _unlink(tmp)
        raise


def _link_anonymous(fd: int, directory: Path, name: str) -> str | None:
    """Give the ``O_TMPFILE`` file ``fd`` a temporary name in ``directory`` (None when the
    platform cannot: the caller falls back to a named temp file)."""
    for _ in range(100):
        candidate = str(directory / f".tmp-{name}.{os.urandom(4).hex()}")
        try:
            os.link(f"/proc/self/fd/{fd}", candidate, follow_symlinks=True)
            return candidate
        except FileExistsError:
            continue
        except OSError:
            return None
    return None


def _unlink(name: str) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass
