"""Talking to the running daemon over its control socket (``$HERMES_HOME/gateway.sock``).

The wire is newline-delimited JSON. A request is ``{"id": n, "op": "...",
"params": {...}}``; its response ``{"id": n, "ok": true, "result": {...}}`` or
``{"id": n, "ok": false, "error": "...", "error_type": "..."}``. A chat
connection also receives events the daemon pushes on its own:
``{"event": "reply" | "notice" | "ack" | "typing" | "done", "text": "...",
"reply_to": "<message id>"}``; ``done`` says a message has been fully answered.
While an answer is written, ``delta`` events carry the text that follows what
was sent of it so far, and ``restart`` events the answer anew after text it
dropped (``adapters.cli``); its ``reply`` (or ``notice``) event still follows
with the whole text.

``call`` is for one-shot operations (the ``sessions`` CLI, ``status``);
``ChatConnection`` is the terminal chat's long-lived connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import json
from pathlib import Path
from typing import Any

from gateway.errors import ControlError, DaemonNotRunningError
from storage.errors import GatewayError

__all__ = [
    "MAX_REQUEST_BYTES",
    "SOCKET_NAME",
    "ChatConnection",
    "ControlError",
    "DaemonNotRunningError",
    "call",
    "call_sync",
    "socket_path",
]

SOCKET_NAME = "gateway.sock"
#: the longest request line the daemon reads; longer lines get an error response
MAX_REQUEST_BYTES = 1024 * 1024
#: replies can be long; the client reads lines up to this size
_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
_DEFAULT_TIMEOUT = 60.0


def socket_path(home: Path) -> Path:
    return Path(home) / SOCKET_NAME


async def _connect(home: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    path = socket_path(home)
    try:
        return await asyncio.open_unix_connection(str(path), limit=_MAX_RESPONSE_BYTES)
    except (FileNotFoundError, ConnectionRefusedError):
        raise DaemonNotRunningError(home) from None
    except PermissionError:
        raise GatewayError(
            f"Permission denied on {path}: the daemon runs as another user. Run this as that user."
        ) from None
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK):
            raise DaemonNotRunningError(home) from None
        raise DaemonNotRunningError(home, exc.strerror or str(exc)) from None


def _encode(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _result(response: dict[str, Any]) -> dict[str, Any]:
    if response.get("ok"):
        result = response.get("result")
        return result if isinstance(result, dict) else {}
    raise ControlError(str(response.get("error") or "the daemon refused the request"),
                       str(response.get("error_type") or "Error"))


class _Link:
    """One connection: responses matched to requests by id, events queued in order."""

    def __init__(self, home: Path, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.home = home
        self._reader = reader
        self._writer = writer
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.events: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._pump = asyncio.create_task(self._read(), name="control-client")
        self.closed = False

    async def _read(self) -> None:
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue  # a daemon bug must not take the client down with it
                if not isinstance(obj, dict):
                    continue
                if "event" in obj:
                    self.events.put_nowait(obj)
                    continue
                rid = obj.get("id")
                fut = self._waiting.pop(rid, None) if isinstance(rid, int) else None
                if fut is not None and not fut.done():
                    fut.set_result(obj)
        except (OSError, ValueError, asyncio.IncompleteReadError):
            pass
        finally:
            self.closed = True
            for fut in self._waiting.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("the daemon closed the connection"))
            self._waiting.clear()
            self.events.put_nowait(None)

    async def request(self, op: str, params: dict[str, Any] | None, reply_within: float | None) -> dict[str, Any]:
        if self.closed:
            raise ConnectionError("the daemon closed the connection")
        rid = next(self._ids)
        data = _encode({"id": rid, "op": op, "params": params or {}})
        if len(data) > MAX_REQUEST_BYTES:
            raise ControlError(f"that is too large to send to the daemon ({len(data)} bytes; the limit is "
                               f"{MAX_REQUEST_BYTES})", "RequestTooLarge")
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        try:
            self._writer.write(data)
            await self._writer.drain()
            response = await asyncio.wait_for(fut, reply_within)
        except TimeoutError:
            raise ControlError(f"the daemon did not answer '{op}' within {reply_within:.0f}s", "Timeout") from None
        finally:
            self._waiting.pop(rid, None)
        return _result(response)

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(Exception):
            await self._writer.wait_closed()
        self._pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._pump


async def call(home: Path, op: str, params: dict[str, Any] | None = None, *,
               reply_within: float | None = _DEFAULT_TIMEOUT) -> dict[str, Any]:
    """One request to the daemon of ``home``; its ``result``.

    Raises ``DaemonNotRunningError`` when no daemon listens, ``ControlError``
    when the daemon answers with an error (``error_type`` says which).
    """
    reader, writer = await _connect(Path(home))
    link = _Link(Path(home), reader, writer)
    try:
        try:
            return await link.request(op, params, reply_within)
        except ConnectionError as exc:
            raise DaemonNotRunningError(home, str(exc)) from None
    finally:
        await link.close()


def call_sync(home: Path, op: str, params: dict[str, Any] | None = None, *,
              reply_within: float | None = _DEFAULT_TIMEOUT) -> dict[str, Any]:
    """``call`` for synchronous code (CLI commands)."""
    return asyncio.run(call(home, op, params, reply_within=reply_within))


class ChatConnection:
    """The terminal chat's connection: one chat on the daemon's ``cli`` platform.

    ``opened`` is the daemon's answer to ``chat.open``: ``chat_id``,
    ``session_id`` (None until the first message of a new chat), ``title``,
    ``recap`` (a list of ``{"role", "text"}`` when a session was resumed; empty when
    ``resume_display`` is ``minimal``), ``message_count`` (of the resumed session) and
    ``notice`` (something to tell the user, or None).
    """

    def __init__(self, link: _Link, opened: dict[str, Any]) -> None:
        self._link = link
        self.opened = opened

    @classmethod
    async def open(cls, home: Path, *, resume: str | None = None, continue_last: bool = False,
                   reply_within: float | None = _DEFAULT_TIMEOUT) -> ChatConnection:
        reader, writer = await _connect(Path(home))
        link = _Link(Path(home), reader, writer)
        params: dict[str, Any] = {"continue": continue_last}
        if resume is not None:
            params["resume"] = resume
        try:
            opened = await link.request("chat.open", params, reply_within)
        except ConnectionError as exc:
            await link.close()
            raise DaemonNotRunningError(home, str(exc)) from None
        except BaseException:
            await link.close()
            raise
        return cls(link, opened)

    @property
    def closed(self) -> bool:
        return self._link.closed

    async def send(self, text: str, *, reply_within: float | None = _DEFAULT_TIMEOUT) -> dict[str, Any]:
        """Hand one line to the daemon: ``{"message_id", "disposition"}``."""
        return await self._link.request("chat.send", {"text": text}, reply_within)

    async def info(self, *, reply_within: float | None = _DEFAULT_TIMEOUT) -> dict[str, Any]:
        """``{"chat_id", "session_id", "title"}`` of this chat now."""
        return await self._link.request("chat.info", {}, reply_within)

    async def next_event(self) -> dict[str, Any] | None:
        """The next event the daemon pushed; None once the connection is gone."""
        event = await self._link.events.get()
        if event is None:
            self._link.events.put_nowait(None)  # every later call sees the end too
        return event

    async def close(self) -> None:
        await self._link.close()
