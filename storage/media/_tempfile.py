"""The thread side of a put: a temporary file that hashes what is written to it.

Every method runs on the put's own worker thread, one after another, so the
event loop never waits for the disk and a discard always runs after the last
write (a cancelled put may leave a write in flight).
"""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from ..errors import StorageFullError

_FULL = (errno.ENOSPC, errno.EDQUOT)


def make_private_dir(path: Path) -> None:
    """Create ``path`` (mode 0700) if it is missing; its parent must exist."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass


def full_or_raise(exc: OSError, root: Path) -> None:
    """A full disk (or quota) becomes ``StorageFullError``; anything else goes on as it is."""
    if exc.errno in _FULL:
        raise StorageFullError(f"The disk holding the media store ({root}) is full; the file was not kept.") \
            from exc


class TempBlob:
    """A temporary file (mode 0600) in ``tmp_dir`` and the sha256 of what was written to it."""

    def __init__(self, root: Path, tmp_dir: Path) -> None:
        self.root = root
        fd, name = tempfile.mkstemp(prefix="put-", suffix=".part", dir=tmp_dir)
        self.path = Path(name)
        self._file: BinaryIO | None = os.fdopen(fd, "wb")
        self._hash = hashlib.sha256()
        self.size = 0

    def write(self, batch: Sequence[bytes]) -> None:
        assert self._file is not None
        try:
            for chunk in batch:
                self._file.write(chunk)
                self._hash.update(chunk)
                self.size += len(chunk)
        except OSError as exc:
            full_or_raise(exc, self.root)
            raise

    def finish(self) -> str:
        """Flush to disk and close; the hex digest of the content."""
        assert self._file is not None
        try:
            self._file.flush()
            # The row that names this file may be committed right after: the bytes come first.
            os.fsync(self._file.fileno())
            self._file.close()
        except OSError as exc:
            full_or_raise(exc, self.root)
            raise
        self._file = None
        return self._hash.hexdigest()

    def discard(self) -> None:
        """Close and remove the file; never raises (it runs while another error is on its way)."""
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass  # a flush that hit the full disk again: the file goes anyway
            self._file = None
        try:
            self.path.unlink(missing_ok=True)
        except OSError:
            pass
