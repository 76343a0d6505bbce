"""The media store on a real directory: what a put leaves (and never leaves), names that
are not digests, and which files a sweep removes while puts go on."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from storage import BlobTooLargeError, MediaStore, StorageError, StoredBlob

from ._procs import REPO, child_env
from ._support import WAIT, wait_until

MB = 1 << 20


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "home" / "media"


@pytest.fixture
def media(root: Path) -> MediaStore:
    return MediaStore(root)


class Source:
    """An async byte source that records whether it was closed, and can stall after some chunks."""

    def __init__(self, chunks: list[bytes], *, stall_after: int | None = None, fail_after: int | None = None):
        self.chunks = chunks
        self.stall_after = stall_after
        self.fail_after = fail_after
        self.sent = asyncio.Event()
        self.closed = False

    async def __call__(self) -> AsyncIterator[bytes]:
        try:
            for i, chunk in enumerate(self.chunks):
                if i == self.fail_after:
                    raise ConnectionResetError("the platform hung up")
                if i == self.stall_after:
                    self.sent.set()
                    await asyncio.Event().wait()
                yield chunk
        finally:
            self.closed = True


def temp_files(root: Path) -> list[str]:
    tmp = root / "tmp"
    return sorted(p.name for p in tmp.iterdir()) if tmp.exists() else []


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_put_streams_into_a_file_named_by_its_digest(media: MediaStore, root: Path) -> None:
    chunks = [os.urandom(700_000) for _ in range(3)] + [b"tail"]
    data = b"".join(chunks)
    blob = await media.put(Source(chunks)(), limit=len(data))
    digest = hashlib.sha256(data).hexdigest()
    assert blob == StoredBlob(digest, root / digest[:2] / digest[2:4] / digest, len(data))
    assert blob.path.read_bytes() == data
    assert media.path_for(digest) == blob.path
    assert temp_files(root) == []
    assert await media.usage() == (1, len(data))


async def test_directories_are_0700_and_files_0600(media: MediaStore, root: Path) -> None:
    old = os.umask(0o002)  # a permissive umask must not widen anything
    try:
        blob = await media.put_bytes(b"private photo")
    finally:
        os.umask(old)
    assert mode(blob.path) == 0o600
    for directory in (root, root / "tmp", blob.path.parent, blob.path.parent.parent):
        assert mode(directory) == 0o700, directory


async def test_more_than_the_limit_is_refused_and_leaves_nothing(media: MediaStore, root: Path) -> None:
    source = Source([b"x" * MB, b"y" * MB, b"z" * MB])
    with pytest.raises(BlobTooLargeError) as excinfo:
        await media.put(source(), limit=2 * MB + 1)
    assert excinfo.value.limit == 2 * MB + 1
    assert isinstance(excinfo.value, StorageError) and "limit" in str(excinfo.value)
    assert source.closed, "the download was left open"
    assert temp_files(root) == [] and await media.list_blobs() == []
    exact = await media.put(Source([b"x" * MB, b"y" * MB])(), limit=2 * MB)  # the limit itself is allowed
    assert exact.size == 2 * MB


async def test_put_bytes_keeps_to_its_limit(media: MediaStore) -> None:
    with pytest.raises(BlobTooLargeError):
        await media.put_bytes(b"12345", limit=4)
    assert (await media.put_bytes(b"1234", limit=4)).size == 4


async def test_a_cancelled_put_leaves_no_temporary_file(media: MediaStore, root: Path) -> None:
    source = Source([os.urandom(2 * MB), b"never"], stall_after=1)
    task = asyncio.create_task(media.put(source(), limit=10 * MB))
    await asyncio.wait_for(source.sent.wait(), WAIT)
    await wait_until(lambda: bool(temp_files(root)), "the temporary file")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert temp_files(root) == [] and await media.list_blobs() == []
    assert source.closed


async def test_a_source_that_fails_midway_leaves_no_temporary_file(media: MediaStore, root: Path) -> None:
    source = Source([os.urandom(MB), os.urandom(MB), b"never"], fail_after=2)
    with pytest.raises(ConnectionResetError):
        await media.put(source(), limit=10 * MB)
    assert temp_files(root) == [] and await media.list_blobs() == []


async def test_the_same_bytes_are_kept_once_and_their_put_time_refreshed(media: MediaStore) -> None:
    first = await media.put_bytes(b"the same photo")
    os.utime(first.path, (1_000_000_000, 1_000_000_000))
    second = await media.put(Source([b"the same ", b"photo"])(), limit=100)
    assert second == first
    blobs = await media.list_blobs()
    assert [(b.sha256, b.size) for b in blobs] == [(first.sha256, len(b"the same photo"))]
    assert blobs[0].mtime > 1_000_000_000
    assert first.path.read_bytes() == b"the same photo"


@pytest.mark.parametrize("hostile", [
    "../../.env", "../" * 30 + "etc/passwd", "/etc/passwd", "", "A" * 64, "a" * 63, "a" * 65, "g" * 64,
    "a" * 62 + "/.", "a" * 63 + "\n", "a" * 32 + "\x00" + "a" * 31,
])
async def test_anything_but_a_digest_is_never_a_path(media: MediaStore, root: Path, hostile: str) -> None:
    secret = root.parent / ".env"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text("TOKEN=do-not-touch")
    with pytest.raises(ValueError, match="sha256"):
        media.path_for(hostile)
    with pytest.raises(ValueError):
        await media.delete([hostile])

    async def nothing_referenced(digests: set[str]) -> set[str]:
        return set()

    with pytest.raises(ValueError):
        await media.sweep(nothing_referenced, only=[hostile])
    assert secret.read_text() == "TOKEN=do-not-touch"


async def test_list_blobs_sees_only_files_where_their_digest_puts_them(media: MediaStore, root: Path) -> None:
    blob = await media.put_bytes(b"real")
    (root / "notes.txt").write_text("stray")
    misplaced = root / "00" / "00" / blob.sha256  # a digest in the wrong directory
    misplaced.parent.mkdir(parents=True)
    misplaced.write_bytes(b"real")
    (blob.path.parent / "not-a-digest").write_bytes(b"x")
    (root / "tmp" / "put-half.part").write_bytes(b"half")
    assert [b.sha256 for b in await media.list_blobs()] == [blob.sha256]
    assert await media.usage() == (1, 4)


Referenced = Callable[[set[str]], Awaitable[set[str]]]


def _referencing(kept: set[str]) -> tuple[list[set[str]], Referenced]:
    asked: list[set[str]] = []

    async def referenced(digests: set[str]) -> set[str]:
        asked.append(set(digests))
        return digests & kept

    return asked, referenced


async def test_a_sweep_removes_every_file_no_row_references(media: MediaStore, root: Path) -> None:
    a, b, c = [await media.put_bytes(data) for data in (b"aaa", b"bbbb", b"ccccc")]
    media.release(a.sha256, b.sha256, c.sha256)
    asked, referenced = _referencing({a.sha256})
    assert await media.sweep(referenced) == (2, 9)
    assert asked == [{a.sha256, b.sha256, c.sha256}]
    assert [x.sha256 for x in await media.list_blobs()] == [a.sha256]
    assert a.path.read_bytes() == b"aaa"
    # The fan-out directories the removed files emptied went with them.
    assert sorted(os.listdir(root)) == sorted(["tmp", a.sha256[:2]])
    assert os.listdir(a.path.parent.parent) == [a.sha256[2:4]]


async def test_a_sweep_removes_old_temporary_files_only(media: MediaStore, root: Path) -> None:
    await media.put_bytes(b"makes the directories")
    old, fresh = root / "tmp" / "put-dead.part", root / "tmp" / "put-live.part"
    old.write_bytes(b"12345")
    fresh.write_bytes(b"678")
    os.utime(old, (1_000_000_000, 1_000_000_000))
    _, referenced = _referencing(set())
    await media.sweep(referenced, now=1_000_000_000 + 3601)
    assert not old.exists()
    assert fresh.exists()  # written "after" now: in flight


async def test_a_held_blob_survives_sweeps_until_released(media: MediaStore) -> None:
    blob = await media.put_bytes(b"its row is not committed yet")
    again = await media.put_bytes(b"its row is not committed yet")  # a second message, same bytes
    _, referenced = _referencing(set())
    assert await media.sweep(referenced) == (0, 0)
    media.release(blob.sha256)
    assert await media.sweep(referenced, only=[blob.sha256]) == (0, 0)
    media.release(again.sha256)
    assert await media.sweep(referenced, only=[blob.sha256]) == (1, blob.size)
    assert not blob.path.exists()


async def test_a_put_finishing_while_the_sweep_asks_the_database_is_kept(media: MediaStore) -> None:
    # The same bytes as a file a deleted session let go arrive for another message, and their row
    # is committed (and the blob released) after the sweep asked which digests are referenced.
    gone = await media.put_bytes(b"forwarded photo")
    media.release(gone.sha256)

    async def referenced(digests: set[str]) -> set[str]:
        blob = await media.put_bytes(b"forwarded photo")
        media.release(blob.sha256)
        return set()

    assert await media.sweep(referenced, only=[gone.sha256]) == (0, 0)
    assert gone.path.read_bytes() == b"forwarded photo"
    _, nothing = _referencing(set())
    assert await media.sweep(nothing, only=[gone.sha256]) == (1, gone.size)


async def test_a_blob_held_when_the_sweep_began_is_kept_though_released_meanwhile(media: MediaStore) -> None:
    # The database said "no row" a moment before the row was committed and the blob released.
    blob = await media.put_bytes(b"row on its way")

    async def referenced(digests: set[str]) -> set[str]:
        media.release(blob.sha256)
        return set()

    assert await media.sweep(referenced) == (0, 0)
    assert blob.path.exists()


async def test_a_sweep_with_only_judges_just_those(media: MediaStore) -> None:
    a, b = await media.put_bytes(b"one"), await media.put_bytes(b"two")
    media.release(a.sha256, b.sha256)
    asked, referenced = _referencing(set())
    assert await media.sweep(referenced, only=[a.sha256]) == (1, 3)
    assert asked == [{a.sha256}]
    assert b.path.exists()


async def test_delete_removes_files_but_never_a_held_one(media: MediaStore) -> None:
    a, b = await media.put_bytes(b"one"), await media.put_bytes(b"two")
    media.release(a.sha256)
    assert await media.delete([a.sha256, b.sha256, "0" * 64]) == (1, 3)
    assert not a.path.exists() and b.path.exists()


def _can_mount_tmpfs(where: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            f"mount -t tmpfs -o size=64k tmpfs {where}"], capture_output=True, timeout=WAIT)
    return probe.returncode == 0


def test_a_full_disk_is_a_storage_full_error_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _can_mount_tmpfs(disk):
        pytest.skip("needs unshare with user and mount namespaces to mount a small tmpfs")
    script = f'mount -t tmpfs -o size=512k tmpfs "$1" && exec "{sys.executable}" -m tests.storage._media_full_child "$1"'
    done = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, "sh", str(disk)],
                          capture_output=True, text=True, timeout=WAIT * 3, cwd=REPO, env=child_env())
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert str(result["outcome"]).startswith("full: The disk holding the media store")
    assert result["tmp"] == []
    assert result["small_kept"] is True
    assert len(result["blobs"]) == 1
