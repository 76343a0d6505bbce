"""The control socket's wire: newline-delimited JSON lines in, responses and events out, one
``Connection`` per client; and the reads its ops share (a chat's recap, a session by reference)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import structlog

from adapters.cli import ChatGoneError
from gateway.errors import RequestError
from storage import queries
from storage.errors import SessionNotFoundError

log = structlog.get_logger("hermes.control")

_WRITE_TIMEOUT = 30.0
_RECAP_MESSAGES = 6
_RECAP_CHARS = 300



async def read_lines(reader: asyncio.StreamReader, limit: int) -> AsyncIterator[bytes | None]:
    """Request lines; None once for every line longer than ``limit`` (skipped, not buffered)."""
    buf = bytearray()
    skipping = False
    while True:
        chunk = await reader.read(65536)
        if not chunk:
            if buf and not skipping:
                yield bytes(buf)
            return
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                if not skipping:
                    buf += chunk[start:]
                    if len(buf) > limit:
                        buf.clear()
                        skipping = True
                        yield None
                break
            if skipping:
                skipping = False
            else:
                buf += chunk[start:nl]
                if len(buf) > limit:
                    yield None
                elif buf.strip():
                    yield bytes(buf)
                buf.clear()
            start = nl + 1


def peer_user(writer: asyncio.StreamWriter) -> str:
    """The login name of the process at the other end (the socket is 0600: the owner or root)."""
    sock = writer.get_extra_info("socket")
    uid = os.getuid()
    peercred = getattr(socket, "SO_PEERCRED", None)
    if sock is not None and peercred is not None:
        with contextlib.suppress(OSError, struct.error):
            _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, peercred, struct.calcsize("3i")))
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


class Connection:
    """One client connection; as a terminal chat it is also the adapter's ``ChatSink``."""

    def __init__(self, writer: asyncio.StreamWriter, user: str) -> None:
        self.writer = writer
        self.user = user
        self.chat_id: str | None = None
        self.closed = False
        #: messages not yet answered: their final reply/notice sets the event
        self.finals: dict[str, asyncio.Event] = {}
        #: messages that got an interim acknowledgement: their answer follows later
        self.acked: set[str] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()

    async def write(self, obj: dict[str, Any]) -> None:
        if self.closed or self.writer.is_closing():
            self.closed = True
            raise ChatGoneError("the terminal disconnected")
        data = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        async with self._lock:
            try:
                self.writer.write(data)
                await asyncio.wait_for(self.writer.drain(), _WRITE_TIMEOUT)
            except (OSError, TimeoutError) as exc:
                # A client that stopped reading must not hold a lane forever.
                self.closed = True
                self.writer.close()
                raise ChatGoneError(f"the terminal stopped reading ({type(exc).__name__})") from None

    async def push_event(self, event: str, text: str | None, reply_to: str | None) -> None:
        obj: dict[str, Any] = {"event": event}
        if text is not None:
            obj["text"] = text
        if reply_to is not None:
            obj["reply_to"] = reply_to
        await self.write(obj)
        if reply_to is not None and reply_to in self.finals:
            if event in ("reply", "notice"):
                self.finals[reply_to].set()
            elif event == "ack":
                self.acked.add(reply_to)

    def spawn(self, coro: Awaitable[None], name: str) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        task.set_name(name)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


Op = Callable[[Connection, dict[str, Any]], Awaitable[dict[str, Any]]]


def param(params: dict[str, Any], name: str, kind: type | tuple[type, ...], *, required: bool = True) -> Any:
    value = params.get(name)
    if value is None:
        if required:
            raise RequestError(f"missing parameter '{name}'")
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise RequestError(f"parameter '{name}' has the wrong type ({type(value).__name__})")
    return value


def recap_rows(conn: Any, session_id: str) -> list[dict[str, Any]]:
    recap: list[dict[str, Any]] = []
    for row in queries.recent_dialogue(conn, session_id, _RECAP_MESSAGES * 3):
        names: list[str] = []
        if row["tool_calls"]:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                names = [str(c.get("function", {}).get("name") or "?") for c in json.loads(row["tool_calls"])]
        text = (row["content"] or "").strip()
        if not text and not names:
            continue
        if len(text) > _RECAP_CHARS:
            text = text[: _RECAP_CHARS - 1].rstrip() + "…"
        recap.append({"role": row["role"], "text": text, "tool_calls": names})
    return recap[-_RECAP_MESSAGES:]


def find_session(conn: Any, ref: str) -> str:
    """Exact id, then title (newest in its lineage), then unique id prefix."""
    if queries.get_session(conn, ref) is not None:
        return ref
    by_title = queries.resolve_session_by_title(conn, ref)
    if by_title is not None:
        return by_title
    try:
        return queries.resolve_session_id(conn, ref)
    except SessionNotFoundError:
        raise SessionNotFoundError(
            f"No session has the id, id prefix or title '{ref}'. `hermes-gateway sessions list` shows them."
        ) from None


def latest_cli_session(conn: Any) -> str | None:
    return queries.latest_session_id(conn, "cli")
