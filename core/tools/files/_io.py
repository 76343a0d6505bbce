"""The disk side of the file tools: opening without surprises, telling text from binary, and
replacing a file atomically. Everything here blocks; the tools call it in a thread."""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import secrets
import stat
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
    created. Returns whether the file is new.

    The folder is opened once and everything after goes through that descriptor, after proving
    it is the folder the path was confined to: a folder swapped for a symlink since (by another
    process, or while a person was deciding) is refused, not written through.
    """
    parent = real.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        dfd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ToolError(f"The folder {parent} cannot be used ({exc.strerror or type(exc).__name__}).") from None
    try:
        _prove_folder(dfd, parent, real.name)
        _check_target(dfd, real.name, existing)
        mode = stat.S_IMODE(existing.st_mode) if existing is not None else 0o666 & ~_umask()
        _replace(dfd, real.name, data, mode)
    finally:
        os.close(dfd)
    return existing is None


def _prove_folder(dfd: int, parent: Path, name: str) -> None:
    try:
        same = os.path.realpath(parent) == str(parent) and _ident(os.fstat(dfd)) == _ident(os.stat(parent))
    except OSError:
        same = False
    if not same:
        raise ToolError(f"The folder of {name} changed while it was being written (a symlink?); nothing was written.")


def _ident(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _check_target(dfd: int, name: str, existing: os.stat_result | None) -> None:
    try:
        now: os.stat_result | None = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        now = None
    if existing is None:
        if now is not None:
            raise ToolError(f"{name} appeared while it was being written; read it and retry.")
    # A symlink or another file put there since the path was confined is not written through.
    elif now is None or not stat.S_ISREG(now.st_mode) or _ident(now) != _ident(existing):
        raise ToolError(f"{name} changed while it was being written; read it again and retry.")


def _replace(dfd: int, name: str, data: bytes, mode: int) -> None:
    tmp = f".{name[:100]}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
    except OSError as exc:
        raise ToolError(f"{name} cannot be written ({exc.strerror or type(exc).__name__}).") from None
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fchmod(out.fileno(), mode)
            os.fsync(out.fileno())
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        if isinstance(exc, OSError):
            raise ToolError(f"{name} cannot be written ({exc.strerror or type(exc).__name__}).") from None
        raise
    # The rename is durable only once the folder's entry is on disk.
    with contextlib.suppress(OSError):
        os.fsync(dfd)
