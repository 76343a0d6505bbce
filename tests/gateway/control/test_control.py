"""The daemon's control socket, against the real daemon started in-process."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.cli import CliAdapter
from gateway.control.client import ChatConnection, call, socket_path
from gateway.errors import ConfigError, ControlError, DaemonNotRunningError
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import run_gateway


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


async def until(check: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)
    assert check(), what


class RawClient:
    """Bytes on the socket, no client library: for what a well-behaved client never sends."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def connect(cls, home: Path) -> RawClient:
        reader, writer = await asyncio.open_unix_connection(str(socket_path(home)), limit=2**26)
        return cls(reader, writer)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def response(self) -> dict[str, Any]:
        while True:
            line = await asyncio.wait_for(self.reader.readline(), 15)
            assert line, "the daemon closed the connection"
            obj = json.loads(line)
            if "event" not in obj:
                return dict(obj)

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


async def test_socket_is_private_and_removed_at_stop(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    path = socket_path(gateway_home)
    async with run_gateway(gateway_home, fake_openai.base_url):
        st = os.lstat(path)
        assert stat.S_ISSOCK(st.st_mode)
        assert stat.S_IMODE(st.st_mode) == 0o600
        assert st.st_uid == os.getuid()
        assert (await call(gateway_home, "ping"))["pong"] is True
    assert not path.exists()
    with pytest.raises(DaemonNotRunningError):
        await call(gateway_home, "ping")


async def test_the_socket_is_private_without_touching_the_process_umask(
    gateway_home: Path, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other threads may create files while the daemon starts: the process umask is never
    changed, even briefly, and the socket is 0600 under the most permissive umask."""
    real_umask = os.umask
    changes: list[int] = []

    def watched_umask(mask: int) -> int:
        changes.append(mask)
        return real_umask(mask)

    previous = real_umask(0)  # nothing masked: only the daemon's own chmod can make the socket private
    monkeypatch.setattr(os, "umask", watched_umask)
    try:
        async with run_gateway(gateway_home, fake_openai.base_url):
            st = os.lstat(socket_path(gateway_home))
            assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
            assert (await call(gateway_home, "ping"))["pong"] is True
    finally:
        real_umask(previous)
    assert changes == []


def leave_dead_socket(home: Path) -> Path:
    """What a killed daemon leaves behind: a socket file nobody listens on."""
    home.mkdir(parents=True)
    path = socket_path(home)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    return path


def put_file_at_socket_path(home: Path) -> None:
    home.mkdir(parents=True)
    socket_path(home).write_text("not a socket")


async def test_stale_socket_from_a_crashed_daemon_is_replaced(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    path = leave_dead_socket(gateway_home)
    assert stat.S_ISSOCK(os.lstat(path).st_mode)
    with pytest.raises(DaemonNotRunningError):
        await call(gateway_home, "ping")
    async with run_gateway(gateway_home, fake_openai.base_url):
        assert (await call(gateway_home, "ping"))["pid"] == os.getpid()
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    assert not path.exists()


async def test_something_else_at_the_socket_path_is_a_clear_start_error(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    put_file_at_socket_path(gateway_home)
    with pytest.raises(ConfigError, match="not a socket"):
        async with run_gateway(gateway_home, fake_openai.base_url):
            pass
    assert socket_path(gateway_home).read_text() == "not a socket"  # never deleted


async def test_ping_and_status(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        await until(lambda: all(st.state == "connected" for st in gw.gateway.adapter_states.values()),
                    "adapters connected")
        pong = await call(gateway_home, "ping")
        assert pong == {"pong": True, "pid": os.getpid()}
        status = await call(gateway_home, "status")
        assert status["pid"] == os.getpid()
        assert status["uptime_seconds"] >= 0
        assert set(status["adapters"]) == {"api-server", "testchat", "cli"}
        # The same snapshot as gateway.state.json: readiness in "state", the runner's view in "supervision".
        assert status["adapters"]["cli"] == {"supervision": "connected", "state": "live", "reason": None,
                                             "restarts": 0, "last_error": None}
        assert status["turns"] == {"running": 0, "waiting": 0}
        assert {"queue_depth", "commits", "busy_retries"} <= set(status["storage"])
        with pytest.raises(ControlError) as info:
            await call(gateway_home, "no.such.op")
        assert info.value.error_type == "UnknownOp" and "ping" in str(info.value)


async def test_no_daemon_says_how_to_start_it(tmp_path: Path) -> None:
    with pytest.raises(DaemonNotRunningError) as info:
        await call(tmp_path / "nothing-here", "status")
    assert "hermes-gateway run" in str(info.value)


async def test_bad_request_lines_get_errors_and_the_daemon_carries_on(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url):
        raw = await RawClient.connect(gateway_home)
        cases: list[tuple[bytes, str]] = [
            (b"this is not json\n", "BadRequest"),
            (b"[1, 2, 3]\n", "BadRequest"),
            (b'{"id": 1, "op": "ping", "params": [1]}\n', "BadRequest"),
            (b'{"id": 2, "op": 42}\n', "UnknownOp"),
            (b"\xff\xfe garbage bytes \x00\n", "BadRequest"),
            (b"[" * 200_000 + b"\n", "BadRequest"),  # nesting deeper than any parser's recursion
            (b'{"id": 3, "op": "ping", "pad": "' + b"x" * (3 * 1024 * 1024) + b'"}\n', "RequestTooLarge"),
            (b'{"id": 4, "op": "sessions.rename", "params": {"id_or_prefix": 7, "title": "x"}}\n', "BadRequest"),
            (b'{"id": 5, "op": "chat.send", "params": {"text": "hi"}}\n', "BadRequest"),  # no chat.open
        ]
        for data, error_type in cases:
            await raw.send(data)
            resp = await raw.response()
            assert resp["ok"] is False, data[:40]
            assert resp["error_type"] == error_type, (data[:40], resp)
            assert resp["error"]
        # The same connection still works, and so does everyone else's.
        await raw.send(b'{"id": 9, "op": "ping"}\n')
        assert await raw.response() == {"id": 9, "ok": True, "result": {"pong": True, "pid": os.getpid()}}
        # A huge line cut off by a disconnect is just a closed connection.
        await raw.send(b'{"id": 10, "op": "ping", "pad": "' + b"y" * (2 * 1024 * 1024))
        await raw.close()
        assert (await call(gateway_home, "ping"))["pong"] is True


async def test_sessions_write_ops_go_through_the_daemon(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        assert (await gw.ask("remember me", user="alice")).status_code == 200
        [(sid,)] = rows(gw.db_path, "SELECT id FROM sessions")
        await call(gateway_home, "sessions.rename", {"id_or_prefix": sid[:12], "title": "Kept for later"})
        assert rows(gw.db_path, "SELECT title FROM sessions") == [("Kept for later",)]
        with pytest.raises(ControlError) as info:
            await call(gateway_home, "sessions.delete", {"id_or_prefix": "19990101_nope"})
        assert info.value.error_type == "SessionNotFoundError"
        with pytest.raises(ControlError) as info:
            await call(gateway_home, "sessions.rename", {"id_or_prefix": sid, "title": "x", "extra": 1})
        assert info.value.error_type == "BadRequest"
        await call(gateway_home, "sessions.delete", {"id_or_prefix": sid})
        assert rows(gw.db_path, "SELECT COUNT(*) FROM sessions") == [(0,)]


async def test_chat_over_the_socket(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        chat = await ChatConnection.open(gateway_home)
        try:
            assert chat.opened["session_id"] is None and chat.opened["chat_id"].startswith("term-")
            sent = await chat.send("hello daemon")
            assert sent["disposition"] == "accepted"
            events = []
            while not events or events[-1].get("event") != "done":
                event = await asyncio.wait_for(chat.next_event(), 15)
                assert event is not None
                if event["event"] != "typing":
                    events.append(event)
            mid = sent["message_id"]
            # The answer streams as it is written (deltas), then comes whole, then "done".
            deltas = [e for e in events if e["event"] == "delta"]
            assert "".join(e["text"] for e in deltas) == "echo: hello daemon"
            assert all(e["reply_to"] == mid for e in deltas)
            assert events[len(deltas):] == [
                {"event": "reply", "text": "echo: hello daemon", "reply_to": mid},
                {"event": "done", "reply_to": mid},
            ]
            info = await chat.info()
        finally:
            await chat.close()
    [(sid, source, user)] = rows(gw.db_path, "SELECT id, source, user_id FROM sessions")
    assert info["session_id"] == sid and source == "cli" and user
    assert len(sid.rsplit("_", 1)[1]) == 6


async def test_client_disconnecting_mid_turn_keeps_the_reply(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.delay(3600)  # held until released below, so the order of events is certain
    async with run_gateway(gateway_home, fake_openai.base_url) as gw:
        cli = gw.gateway.services.adapters["cli"] if gw.gateway.services else None
        assert isinstance(cli, CliAdapter)
        chat = await ChatConnection.open(gateway_home)
        await chat.send("a question worth an answer")
        await until(lambda: len(fake_openai.chat_requests) == 1, "the turn reached the model")
        await chat.close()
        await until(lambda: cli.open_chats == 0, "the daemon saw the terminal go")
        fake_openai._release.set()  # the model answers now, to nobody
        await until(
            lambda: bool(rows(gw.db_path, "SELECT 1 FROM gateway_outbound WHERE platform = 'cli' "
                                          "AND status != 'pending'")),
            "the delivery was settled",
        )
        assert (await call(gateway_home, "ping"))["pong"] is True
        # A new terminal works as before.
        again = await ChatConnection.open(gateway_home)
        try:
            await again.send("still there?")
            texts = []
            while True:
                event = await asyncio.wait_for(again.next_event(), 15)
                assert event is not None
                if event["event"] == "done":
                    break
                if event["event"] == "reply":
                    texts.append(event["text"])
            assert texts == ["echo: still there?"]
        finally:
            await again.close()
    msgs = rows(gw.db_path, "SELECT m.role, m.content FROM messages m JOIN sessions s ON s.id = m.session_id "
                            "WHERE s.source = 'cli' ORDER BY m.id")
    assert ("assistant", "echo: a question worth an answer") in msgs
    [(status, error)] = rows(gw.db_path, "SELECT status, error FROM gateway_outbound WHERE text = ?",
                             "echo: a question worth an answer")
    assert status == "failed" and "disconnected" in error
