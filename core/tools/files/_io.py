"""The disk side of the file tools: opening without surprises, telling text from binary, and
replacing a file atomically. Everything here blocks; the tools call it in a thread."""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import stat
import tempfile
from pathlib import Path

from ...media import SNIFF_BYTES, human_size, sniff
from .._base import ToolError

__all__ = ["atomic_write", "binary_note", "is_binary", "open_regular"]

_DEFAULT_UMASK = 0o022


def open_regular(real: Path, checked: os.stat_result) -> io.BufferedReader:
    """``real`` opened for reading, only if it is still the regular file ``checked`` described.

    O_NOFOLLOW: a symlink swapped in after the check is not followed. O_NONBLOCK: a FIFO swapped
    in is not waited on (opening one for reading blocks until a writer comes). The fstat after
    opening proves the file is the one that was confined.
    """
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(real, flags)
    except OSError as exc:
        raise ToolError(f"{real.name} cannot be opened ({exc.strerror or type(exc).__name__}).") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (checked.st_dev, checked.st_ino):
            raise ToolError(f"{real.name} changed while it was being opened; try again.")
        return io.BufferedReader(io.FileIO(fd, "r", closefd=True), 64 * 1024)
    except BaseException:
        os.close(fd)
        raise


def is_binary(head: bytes, name: str) -> bool:
    """Whether the first bytes of a file are not text: a NUL, bytes that are not UTF-8, or a
    known binary format (``core.media.sniff``)."""
    if not head:
        return False
    if b"\x00" in head:
        return True
    try:
        # incremental: a character cut by the end of the head is not held against it
        codecs.getincrementaldecoder("utf-8")("strict").decode(head[:SNIFF_BYTES], final=False)
    except UnicodeDecodeError:
        return True
    return sniff(head, name).kind != "text"


def binary_note(display: str, head: bytes, size: int) -> str:
    found = sniff(head, display)
    return (f"{display} is a binary file ({found.mime}, {human_size(size)}); its bytes are not shown. "
            "Describe it from its type and size, or process it with a tool made for that format.")


def _umask() -> int:
    """The process umask without changing it (os.umask would, for every thread, for a moment)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return _DEFAULT_UMASK


def atomic_write(real: Path, data: bytes, existing: os.stat_result | None) -> bool:
    """Replace (or create) ``real`` with ``data``: a temporary file in the same folder, fsynced,
    renamed over it, the folder fsynced. Readers see the old file or the new one, never half.
    An existing file keeps its mode; a new one gets the usual 0666 & ~umask. Parents are
    created. Returns whether the file is new."""
    parent = real.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ToolError(f"The folder {parent} cannot be created ({exc.strerror or type(exc).__name__}).") from None
    if existing is not None:
        try:
            now = os.lstat(real)
        except FileNotFoundError:
            now = None
        # A symlink or another file put there since the path was confined is not written through.
        if now is None or not stat.S_ISREG(now.st_mode) or now.st_ino != existing.st_ino:
            raise ToolError(f"{real.name} changed while it was being written; read it again and retry.")
    elif os.path.lexists(real):
        raise ToolError(f"{real.name} appeared while it was being written; read it and retry.")
    mode = stat.S_IMODE(existing.st_mode) if existing is not None else 0o666 & ~_umask()
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{real.name[:100]}.", suffix=".tmp")
    except OSError as exc:
        raise ToolError(f"{real.name} cannot be written ({exc.strerror or type(exc).__name__}).") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(tmp, real)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ToolError(f"{real.name} cannot be written ({exc.strerror or type(exc).__name__}).") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(parent)
    return existing is None


def _fsync_folder(folder: Path) -> None:
    # The rename is durable only once the folder's entry is on disk.
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
