"""``MediaStore``: files kept by the sha256 of their bytes, under ``$HERMES_HOME/media/``.

A file lives at ``<root>/ab/cd/<sha256>``: the name is the digest, so no name a
sender chose ever becomes a path, and the same bytes are kept once however
often they arrive. A put streams into ``<root>/tmp/`` (mode 0600, directories
0700), hashing as it goes, and renames into place when complete; a failed or
cancelled put leaves nothing behind.

Which files are still needed is known to state.db (the attachment rows), not
here. Files go with ``sweep``: the caller hands it a function that says which
of a set of digests some row still references, and everything else goes. A put
*holds* its digest until ``release`` (the caller releases once the rows naming
it are committed), and any put that completes while a sweep runs is spared by
that sweep: so a file is never removed between its put and its row's commit,
even when the same bytes belonged to a session being deleted. Holds live in this
object: the daemon builds one ``MediaStore`` and every part of it shares it.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections import Counter
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from ..errors import BlobTooLargeError
from ._tempfile import TempBlob, full_or_raise, make_private_dir

_T = TypeVar("_T")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_HEX2 = re.compile(r"[0-9a-f]{2}")
#: bytes gathered before they go to the writer thread (one hop per batch, not per chunk)
_BATCH = 1 << 20
#: a temporary file older than this belongs to a put that died with its process
TEMP_MAX_AGE = 3600.0


@dataclass(frozen=True)
class StoredBlob:
    """A file in the store: its digest (lowercase hex), where it is, its size in bytes."""

    sha256: str
    path: Path
    size: int


class BlobInfo(NamedTuple):
    """A file found in the store; ``mtime`` is when it was last put."""

    sha256: str
    size: int
    mtime: float


class MediaStore:
    """The content-addressed files under ``root`` (``$HERMES_HOME/media``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._tmp = self.root / "tmp"
        # Guards holds, sweeps, and every rename or unlink under root (thread and loop alike).
        self._lock = threading.Lock()
        self._held: Counter[str] = Counter()
        self._sweeps: list[set[str]] = []

    def path_for(self, sha256: str) -> Path:
        """Where the file with this digest lives (whether or not it exists).

        Anything but 64 lowercase hex characters raises ``ValueError``: a value from
        a message or a row never becomes a path of its own making."""
        if not isinstance(sha256, str) or _HEX64.fullmatch(sha256) is None:
            raise ValueError(f"not a sha256 digest (64 lowercase hex characters): {str(sha256)[:80]!r}")
        return self.root / sha256[:2] / sha256[2:4] / sha256

    # ------------------------------------------------------------ putting

    async def put(self, chunks: AsyncIterable[bytes], *, limit: int) -> StoredBlob:
        """Store what ``chunks`` yields; the blob stays held until ``release(blob.sha256)``.

        More than ``limit`` bytes: ``BlobTooLargeError`` (counted as they arrive, before
        any is written past the limit). A full disk: ``StorageFullError``. On any error
        or cancellation the temporary file is gone and ``chunks`` is closed."""
        loop = asyncio.get_running_loop()
        # One thread per put: its writes, and the discard after a cancel, run in order.
        executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="media-put")

        def run(fn: Callable[..., _T], *args: Any) -> asyncio.Future[_T]:
            return loop.run_in_executor(executor, fn, *args)

        temp: TempBlob | None = None
        settled: asyncio.Future[str] | None = None
        try:
            temp = await run(self._open_temp)
            batch: list[bytes] = []
            gathered = 0
            async for chunk in chunks:
                if temp.size + gathered + len(chunk) > limit:
                    raise BlobTooLargeError(limit)
                batch.append(chunk)
                gathered += len(chunk)
                if gathered >= _BATCH:
                    await run(temp.write, batch)
                    batch, gathered = [], 0
            if batch:
                await run(temp.write, batch)
            digest = await run(temp.finish)
            settled = run(self._settle, temp, digest)
            await asyncio.shield(settled)
            return StoredBlob(digest, self.path_for(digest), temp.size)
        except BaseException:
            if temp is not None:
                # Queued behind whatever the thread still does (a write, the settle), so it runs last.
                with suppress(BaseException):
                    await asyncio.shield(run(temp.discard))
            if settled is not None and settled.done() and not settled.cancelled() and settled.exception() is None:
                self.release(settled.result())  # in place, but nobody will hear of it: a sweep may take it
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                with suppress(Exception):
                    await aclose()
            raise
        finally:
            executor.shutdown(wait=False)

    async def put_bytes(self, data: bytes, *, limit: int | None = None) -> StoredBlob:
        """``put`` for bytes already in memory (held until released, like any put)."""

        async def one() -> AsyncIterator[bytes]:
            yield data

        return await self.put(one(), limit=len(data) if limit is None else limit)

    def release(self, *sha256s: str) -> None:
        """The rows naming these blobs are committed (or will never be): sweeps may judge them again."""
        with self._lock:
            for sha in sha256s:
                if self._held[sha] > 1:
                    self._held[sha] -= 1
                else:
                    self._held.pop(sha, None)

    def _open_temp(self) -> TempBlob:
        try:
            self._make_dirs(self._tmp)
            return TempBlob(self.root, self._tmp)
        except OSError as exc:
            full_or_raise(exc, self.root)
            raise

    def _make_dirs(self, path: Path) -> None:
        self.root.parent.mkdir(parents=True, exist_ok=True)
        make_private_dir(self.root)
        for part in reversed(path.relative_to(self.root).parents[:-1]):
            make_private_dir(self.root / part)
        make_private_dir(path)

    def _settle(self, temp: TempBlob, digest: str) -> str:
        final = self.path_for(digest)
        try:
            with self._lock:  # a sweep removes files and empty directories under this lock
                self._make_dirs(final.parent)
                try:
                    existing = final.stat().st_size
                except FileNotFoundError:
                    existing = None
                if existing == temp.size:
                    temp.path.unlink()
                    os.utime(final)  # "last put": the age retention and sweeps go by
                else:
                    os.replace(temp.path, final)
                self._held[digest] += 1
                for spared in self._sweeps:
                    spared.add(digest)
            _fsync_dir(final.parent)
        except OSError as exc:
            full_or_raise(exc, self.root)
            raise
        return digest

    # ------------------------------------------------------------ removing

    async def sweep(self, referenced: Callable[[set[str]], Awaitable[set[str]]],
                    *, only: Iterable[str] | None = None, now: float | None = None) -> tuple[int, int]:
        """Remove the files no row references; (files, bytes) removed.

        ``referenced(digests)`` answers which of ``digests`` some attachment row still
        uses (``storage.attachments.referenced`` run in ``StateStore.read``). With
        ``only``, just those digests are judged (the ones a deletion has just let go);
        without it, every file in the store, and temporary files older than an hour
        go too. Held blobs and blobs put while the sweep runs are kept."""
        spared: set[str] = set()
        with self._lock:
            spared.update(self._held)
            self._sweeps.append(spared)
        try:
            if only is None:
                candidates = {blob.sha256 for blob in await self.list_blobs()}
                stale = await asyncio.to_thread(self._remove_stale_temps, time.time() if now is None else now)
            else:
                candidates = self._digests(only)
                stale = (0, 0)
            if not candidates:
                return stale
            keep = await referenced(set(candidates))
            files, size = await asyncio.to_thread(self._remove, candidates - keep, spared)
            return files + stale[0], size + stale[1]
        finally:
            with self._lock:
                self._sweeps.remove(spared)

    async def delete(self, sha256s: Iterable[str]) -> tuple[int, int]:
        """Remove these files now, whatever references them (held ones excepted); (files, bytes).

        For files that rows may still name, ``sweep(referenced, only=...)`` is the safe way."""
        return await asyncio.to_thread(self._remove, self._digests(sha256s), set())

    def _digests(self, sha256s: Iterable[str]) -> set[str]:
        """The digests, each checked (``ValueError`` for anything that is not one)."""
        return {self.path_for(sha).name for sha in sha256s}

    def _remove(self, sha256s: Iterable[str], spared: set[str]) -> tuple[int, int]:
        files = size = 0
        for sha in sorted(sha256s):
            path = self.path_for(sha)
            with self._lock:
                if sha in spared or sha in self._held:
                    continue
                try:
                    gone = path.stat().st_size
                    path.unlink()
                except FileNotFoundError:
                    continue
                for parent in (path.parent, path.parent.parent):
                    try:
                        parent.rmdir()
                    except OSError:
                        break  # not empty: the rest of the fan-out stays
            files += 1
            size += gone
        return files, size

    def _remove_stale_temps(self, now: float) -> tuple[int, int]:
        files = size = 0
        try:
            entries = list(os.scandir(self._tmp))
        except FileNotFoundError:
            return 0, 0
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
                if now - st.st_mtime > TEMP_MAX_AGE:
                    os.unlink(entry.path)
                    files += 1
                    size += st.st_size
            except OSError:
                continue  # a put finishing or discarding it right now
        return files, size

    # ------------------------------------------------------------ looking

    async def list_blobs(self) -> list[BlobInfo]:
        """Every file in the store (temporary ones aside), sorted by digest."""
        return await asyncio.to_thread(self._scan)

    async def usage(self) -> tuple[int, int]:
        """(files, bytes) the store holds, temporary files aside."""
        blobs = await self.list_blobs()
        return len(blobs), sum(blob.size for blob in blobs)

    def _scan(self) -> list[BlobInfo]:
        found: list[BlobInfo] = []
        for first in _subdirs(self.root):
            for second in _subdirs(Path(first.path)):
                prefix = first.name + second.name
                with suppress(FileNotFoundError, NotADirectoryError):
                    for entry in os.scandir(second.path):
                        if _HEX64.fullmatch(entry.name) and entry.name.startswith(prefix) \
                                and entry.is_file(follow_symlinks=False):
                            with suppress(FileNotFoundError):
                                st = entry.stat(follow_symlinks=False)
                                found.append(BlobInfo(entry.name, st.st_size, st.st_mtime))
        return sorted(found)


def _subdirs(path: Path) -> list[os.DirEntry[str]]:
    """The two-hex-digit directories of one level of the fan-out (``tmp`` and strays left out)."""
    try:
        with os.scandir(path) as it:
            return [e for e in it if _HEX2.fullmatch(e.name) and e.is_dir(follow_symlinks=False)]
    except (FileNotFoundError, NotADirectoryError):
        return []


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
