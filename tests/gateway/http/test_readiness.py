"""/readyz tells the truth about what the daemon can do: a disk that refuses writes (the storage
fault seam, and a real full filesystem where this machine can mount one) and descriptors running
out make it 503 with the reason, and it is ready again once they are back."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import resource
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.http import fd_usage, health
from storage import StorageFullError
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import Running, run_gateway

WAIT = 30.0
NO_BUDGET = 1073741823  # SQLite's default max_page_count


async def readyz(gw: Running) -> tuple[int, dict[str, Any]]:
    resp = await gw.http.get("/readyz")
    return resp.status_code, resp.json()


async def until_ready(gw: Running, check: Callable[[int, dict[str, Any]], bool], what: str) -> dict[str, Any]:
    async def poll() -> dict[str, Any]:
        while True:
            code, body = await readyz(gw)
            if check(code, body):
                return body
            await asyncio.sleep(0.05)

    try:
        return await asyncio.wait_for(poll(), WAIT)
    except TimeoutError:
        raise AssertionError(f"/readyz never showed {what}: {await readyz(gw)}") from None


def ready(code: int, body: dict[str, Any]) -> bool:
    return code == 200


def storage_failed(code: int, body: dict[str, Any]) -> bool:
    return code == 503 and body["storage"]["state"] == "failed"


# ------------------------------------------------------------------------ storage


async def test_a_write_refused_for_a_full_disk_makes_readyz_503_with_the_reason(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with run_gateway(tmp_path / "h", fake_openai.base_url) as gw:
        await until_ready(gw, ready, "ready")
        assert gw.gateway.services is not None
        writer = gw.gateway.services.store.writer
        # The suite's disk-full seam: a page budget just above what state.db holds now.
        pages = await writer.submit(lambda c: c.execute("PRAGMA page_count").fetchone()[0], transactional=False)
        await writer.submit(lambda c: c.execute(f"PRAGMA max_page_count={pages + 4}").fetchone(), transactional=False)
        await gw.ask("a message too long to fit " * 1200)  # ~31 KB: state.db cannot grow to store it
        body = await until_ready(gw, storage_failed, "the failed write")
        assert body["status"] == "not_ready"
        assert "full" in body["storage"]["reason"] and "write failed" in body["storage"]["reason"]
        # Room again; only the hold keeps it failed (a small probe write fits either way).
        await writer.submit(lambda c: c.execute(f"PRAGMA max_page_count={NO_BUDGET}").fetchone(),
                            transactional=False)
        monkeypatch.setattr(health, "DISK_FAULT_HOLD", 0.0)
        await until_ready(gw, ready, "ready once the disk has room")


@contextlib.contextmanager
def small_disk(path: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of ``size`` at ``path`` (needs root and mount; skipped elsewhere)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a size-limited filesystem needs root")
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(path: Path) -> None:
    """Write ``path`` until the filesystem has no byte left."""
    with open(path, "wb", buffering=0) as f:
        for chunk in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise


async def test_a_really_full_disk_makes_readyz_503_with_the_reason(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    with small_disk(tmp_path / "disk", "48m") as disk:
        async with run_gateway(disk / "h", fake_openai.base_url) as gw:
            await until_ready(gw, ready, "ready")
            assert gw.gateway.services is not None
            store = gw.gateway.services.store
            await store.create_session("big", "cli")
            filler = disk / "filler"
            await asyncio.to_thread(fill, filler)
            body = await until_ready(gw, storage_failed, "the full disk")
            assert "MiB free" in body["storage"]["reason"]
            with pytest.raises(StorageFullError):
                await store.append_message("big", "user", "no room for this " * 20_000)
            filler.unlink()
            # Room again, but a write was refused a moment ago: that is what it says now.
            body = await until_ready(gw, lambda code, b: "write failed" in str(b["storage"]["reason"]),
                                     "the refused write")
            assert body["storage"]["state"] == "failed" and "full" in body["storage"]["reason"]
            monkeypatch.setattr(health, "DISK_FAULT_HOLD", 0.0)
            await until_ready(gw, ready, "ready once the disk has room")


# -------------------------------------------------------------------- descriptors


@contextlib.contextmanager
def soft_fd_limit(limit: int) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_readyz_is_503_while_the_daemon_runs_short_of_descriptors(tmp_path: Path) -> None:
    async with run_gateway(tmp_path / "h", None) as gw:
        body = await until_ready(gw, ready, "ready")
        assert body["fds"]["state"] == "live" and body["fds"]["open"] > 0
        assert body["http"]["max_connections"] > 0 and body["http"]["connections"] >= 1  # this request's
        usage = fd_usage()
        assert usage is not None
        limit = usage.open + 300
        held: list[int] = []
        with soft_fd_limit(limit):
            try:
                # What a leak would look like: descriptors held until under 10% of the limit is free.
                while len(held) < limit - usage.open - limit // 20:
                    held.append(os.open(os.devnull, os.O_RDONLY))
                body = await until_ready(gw, lambda code, b: code == 503, "the descriptors running short")
                assert body["fds"]["state"] == "degraded" and body["fds"]["limit"] == limit
                assert "file descriptors open" in body["fds"]["reason"] and "LimitNOFILE" in body["fds"]["reason"]
                assert body["storage"]["state"] == "live"  # the only reason
            finally:
                for fd in held:
                    os.close(fd)
            await until_ready(gw, ready, "ready once they are released")


async def test_a_new_chat_on_a_full_disk_gets_an_answer_not_a_hung_request(
    tmp_path: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with run_gateway(tmp_path / "h", fake_openai.base_url) as gw:
        assert gw.gateway.services is not None
        index = gw.gateway.services.index

        async def refused(*args: Any, **kwargs: Any) -> Any:
            # What the writer raises when state.db cannot grow (tested for real above); here at the
            # moment a new chat's session is created, which a page budget cannot aim at.
            raise StorageFullError("the disk is full; nothing was written")

        monkeypatch.setattr(index, "resolve", refused)
        resp = await asyncio.wait_for(gw.ask("hello", user="someone-new"), WAIT)
        assert resp.status_code == 507, resp.text
        assert resp.json()["error"]["code"] == "storage_full"
        assert fake_openai.chat_requests == []  # no turn ran without its session
