"""The daemon's local control socket: ``$HERMES_HOME/gateway.sock``, mode 0600.

Local tools talk to the running daemon here instead of opening state.db for
writing, so the daemon stays its only writer. The wire is newline-delimited
JSON (see ``gateway.control.client``). Operations:

- ``ping`` -> ``{"pong": true, "pid"}``
- ``status`` -> pid, uptime, adapters with their states and last errors, turns, storage
- ``sessions.rename`` ``{"id_or_prefix", "title"}``, ``sessions.delete`` ``{"id_or_prefix"}``,
  ``sessions.prune`` ``{"older_than_days", "source"}`` -> ``gateway.cli.sessions_admin``
- ``cron.*`` (list, add, pause, resume, remove, run), ``users.forget``, ``pairing.*`` (list, approve,
  deny, revoke): in their own modules, ``cron_ops``, ``users_ops`` and ``pairing_ops``
- ``tools`` ``{"platform", "chat_type"}`` -> the tools of such a chat (``gateway.commands.tools``)
- ``chat.open`` ``{"continue": bool, "resume": "<id|prefix|title>"}`` turns the
  connection into one terminal chat (platform ``cli``); ``chat.send`` ``{"text"}``
  hands it one line; ``chat.info`` tells its session. Answers come back as events
  (``reply`` / ``notice`` / ``ack`` / ``typing``; ``delta`` / ``restart`` while an answer streams),
  then ``done`` once the line is fully answered, so a client can send the next one (and /handoff
  finds the chat idle).

Created at start (a stale socket left by a crashed daemon is removed: the
writer lock already proves no other daemon owns this home), removed at stop.
A bad request line (not JSON, too long, unknown op) gets an error response
and the connection stays usable.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import json
import os
import socket
import stat
from pathlib import Path
from typing import Any, Protocol

import structlog

from adapters.base import Disposition, InboundMessage
from adapters.cli import ChatGoneError, CliAdapter
from gateway.commands import tools_report
from gateway.control.client import MAX_REQUEST_BYTES, socket_path
from gateway.control.cron_ops import cron_ops
from gateway.control.pairing_ops import pairing_ops
from gateway.control.users_ops import users_ops
from gateway.control.wire import (
    Connection,
    Op,
    find_session,
    latest_cli_session,
    param,
    peer_user,
    read_lines,
    recap_rows,
)
from gateway.errors import ConfigError, RequestError
from gateway.logs import redact
from gateway.routing.services import Services
from gateway.routing.session_key import build_session_key
from gateway.status import status_snapshot
from storage.errors import GatewayError

__all__ = ["ControlServer", "GatewayView", "gateway_status"]

log = structlog.get_logger("hermes.control")

# sockaddr_un.sun_path is 108 bytes including the terminating NUL on Linux
_MAX_SOCKET_PATH = 107


class GatewayView(Protocol):
    """What ``status`` reads from the daemon (``gateway.daemon.runner.Gateway``)."""

    @property
    def services(self) -> Services | None: ...
    adapter_states: dict[str, Any]


def gateway_status(gateway: GatewayView) -> dict[str, Any]:
    # The very snapshot gateway.state.json holds: `hermes-gateway status` reads alike from either source.
    return status_snapshot(gateway)


class ControlServer:
    def __init__(self, home: Path, gateway: GatewayView) -> None:
        self.path = socket_path(home)
        self._gateway = gateway
        self._server: asyncio.AbstractServer | None = None
        self._identity: tuple[int, int] | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._message_ids = itertools.count(1)
        self._ops: dict[str, Op] = {
            "ping": self._ping,
            "status": self._status,
            "sessions.rename": self._sessions_op("rename", {"id_or_prefix": str, "title": str}),
            "sessions.delete": self._sessions_op("delete", {"id_or_prefix": str}),
            "sessions.prune": self._sessions_op("prune", {"older_than_days": (int, float), "source": str}),
            "chat.open": self._chat_open,
            "chat.send": self._chat_send,
            "chat.info": self._chat_info,
            "tools": self._tools,
            **cron_ops(lambda: self._services),
            **users_ops(lambda: self._services),
            **pairing_ops(lambda: self._services),
        }

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        path = self.path
        if len(os.fsencode(str(path))) > _MAX_SOCKET_PATH:
            raise ConfigError(
                f"the control socket path {path} is longer than {_MAX_SOCKET_PATH} bytes, the limit of a "
                "unix socket; use a shorter HERMES_HOME."
            )
        self._clear_stale(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # The process umask is left alone (other threads may create files at any
        # moment). A bound unix socket that does not listen yet refuses every
        # connection, so binding with whatever mode the umask gives, then
        # chmod 0600, then listening leaves no moment in which another user
        # could connect.
        try:
            sock.bind(str(path))
            os.chmod(path, 0o600)
            st = os.lstat(path)
            if not stat.S_ISSOCK(st.st_mode) or stat.S_IMODE(st.st_mode) != 0o600:
                raise OSError(f"{path} changed under us while it was being created")
        except OSError as exc:
            sock.close()
            raise ConfigError(f"cannot create the control socket {path}: {exc.strerror or exc}") from None
        self._identity = (st.st_dev, st.st_ino)
        # start_unix_server calls listen(): only now can anyone connect.
        self._server = await asyncio.start_unix_server(self._serve, sock=sock, limit=MAX_REQUEST_BYTES)
        log.info("control.listening", path=str(path))

    @staticmethod
    def _clear_stale(path: Path) -> None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(st.st_mode):
            raise ConfigError(f"{path} exists and is not a socket; move it away so the daemon can listen there.")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        probe.settimeout(1.0)
        try:
            probe.connect(str(path))
        except OSError:
            # Nobody answers: a crashed daemon left it behind.
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            log.info("control.stale_socket_removed", path=str(path))
            return
        finally:
            probe.close()
        raise ConfigError(f"another process is listening on {path}; stop it first.")

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)
            self._server = None
        self._unlink()
        log.info("control.stopped")

    def _unlink(self) -> None:
        # Only our own socket: a new daemon may already have replaced it.
        with contextlib.suppress(OSError):
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self._identity:
                os.unlink(self.path)

    # -------------------------------------------------------------- connection

    @property
    def _services(self) -> Services:
        services = self._gateway.services
        if services is None:
            raise RequestError("the daemon is still starting; try again in a moment")
        return services

    @property
    def _cli(self) -> CliAdapter:
        adapter = self._services.adapters.get("cli")
        if not isinstance(adapter, CliAdapter):
            raise RequestError("terminal chat is not enabled in this daemon")
        return adapter

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        conn = Connection(writer, peer_user(writer))
        try:
            async for line in read_lines(reader, MAX_REQUEST_BYTES):
                if line is None:
                    log.info("control.request_too_large", limit=MAX_REQUEST_BYTES)
                    await self._respond_error(conn, None, f"request line longer than {MAX_REQUEST_BYTES} bytes",
                                              "RequestTooLarge")
                    continue
                await self._handle(conn, line)
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        except Exception:  # never let one client take the server down
            log.exception("control.connection_failed")
        finally:
            conn.closed = True
            if conn.chat_id is not None:
                try:
                    await self._forget_chat(conn)
                finally:
                    with contextlib.suppress(RequestError):
                        self._cli.close_chat(conn.chat_id)
                log.info("control.chat_closed", chat_id=conn.chat_id)
            for t in list(conn.tasks):
                t.cancel()
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1)
            if task is not None:
                self._connections.discard(task)

    async def _forget_chat(self, conn: Connection) -> None:
        """A terminal chat id is never used again: a title queued in it can never apply."""
        with contextlib.suppress(Exception):
            template = self._chat_message(conn, "")
            await self._services.index.forget_pending_title(build_session_key(template, self._services.key_settings))

    async def _handle(self, conn: Connection, line: bytes) -> None:
        try:
            request = json.loads(line)
        except (ValueError, RecursionError):
            await self._respond_error(conn, None, "the request is not valid JSON", "BadRequest")
            return
        if not isinstance(request, dict):
            await self._respond_error(conn, None, "a request must be a JSON object", "BadRequest")
            return
        rid = request.get("id")
        if not isinstance(rid, int | str) or isinstance(rid, bool):
            rid = None
        op_name = request.get("op")
        params = request.get("params") or {}
        op = self._ops.get(op_name) if isinstance(op_name, str) else None
        if op is None:
            await self._respond_error(conn, rid, f"unknown op {op_name!r}; known: {', '.join(sorted(self._ops))}",
                                      "UnknownOp")
            return
        if not isinstance(params, dict):
            await self._respond_error(conn, rid, "'params' must be a JSON object", "BadRequest")
            return
        try:
            result = await op(conn, params)
        except ChatGoneError:
            raise
        except RequestError as exc:
            await self._respond_error(conn, rid, str(exc), "BadRequest")
            return
        except GatewayError as exc:
            await self._respond_error(conn, rid, str(exc), type(exc).__name__)
            return
        except Exception as exc:
            log.exception("control.op_failed", op=op_name)
            await self._respond_error(conn, rid, f"the daemon failed ({type(exc).__name__}); see its log",
                                      "InternalError")
            return
        await conn.write({"id": rid, "ok": True, "result": result})

    @staticmethod
    async def _respond_error(conn: Connection, rid: Any, message: str, error_type: str) -> None:
        await conn.write({"id": rid, "ok": False, "error": redact(message), "error_type": error_type})

    # --------------------------------------------------------------------- ops

    async def _ping(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"pong": True, "pid": os.getpid()}

    async def _status(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return gateway_status(self._gateway)

    async def _tools(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        platform = param(params, "platform", str, required=False) or "cli"
        report = tools_report(self._services, platform, param(params, "chat_type", str, required=False) or "dm")
        return {"available": report is not None, "overview": report.as_dict() if report is not None else None}

    def _sessions_op(self, name: str, schema: dict[str, type | tuple[type, ...]]) -> Op:
        async def op(conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
            unknown = sorted(set(params) - set(schema))
            if unknown:
                raise RequestError(f"unknown parameter(s) for sessions.{name}: {', '.join(unknown)}")
            kwargs = {k: param(params, k, kind, required=k != "source") for k, kind in schema.items()}
            try:
                admin = importlib.import_module("gateway.cli.sessions_admin")
            except ImportError:
                raise RequestError(f"sessions.{name} is not available in this daemon yet") from None
            result = await getattr(admin, name)(self._services.store, **kwargs)
            media = self._services.media
            if name in ("delete", "prune") and media is not None:
                try:  # the files of what was deleted go with it (a later sweep would catch them too)
                    await media.pruner.after_delete()
                except Exception:
                    log.exception("control.media_sweep_failed")
            return result if isinstance(result, dict) else {"value": result}

        return op

    async def _chat_open(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        if conn.chat_id is not None:
            raise RequestError("this connection already is a chat")
        cli = self._cli
        resume = param(params, "resume", str, required=False)
        continue_last = bool(param(params, "continue", bool, required=False))
        services = self._services
        session_id: str | None = None
        notice: str | None = None
        if resume is not None and resume.strip():
            ref = resume.strip()
            session_id = await services.store.read(lambda c: find_session(c, ref))
        elif continue_last:
            session_id = await services.store.read(latest_cli_session)
            if session_id is None:
                notice = "No earlier terminal session to continue; this is a new one."
        chat_id = cli.open_chat(conn)
        conn.chat_id = chat_id
        log.info("control.chat_opened", chat_id=chat_id, resumed=session_id)
        recap: list[dict[str, Any]] = []
        title: str | None = None
        count = 0
        display = services.config.settings.display.resume_display
        if session_id is not None:
            template = cli.message(chat_id, "", user_id=conn.user, user_name=conn.user)
            await services.index.rebind(build_session_key(template, self._services.key_settings), session_id, template)
            sid = session_id
            if display == "full":
                recap = await services.store.read(lambda c: recap_rows(c, sid))
            session = await services.store.get_session(session_id) or {}
            title, count = session.get("title"), session.get("message_count") or 0
        return {"chat_id": chat_id, "session_id": session_id, "title": title, "recap": recap, "notice": notice,
                "resume_display": display, "message_count": count}

    def _chat_message(self, conn: Connection, text: str) -> InboundMessage:
        if conn.chat_id is None:
            raise RequestError("open a chat first (op chat.open)")
        return self._cli.message(conn.chat_id, text, user_id=conn.user, user_name=conn.user,
                                 message_id=str(next(self._message_ids)))

    async def _chat_info(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        template = self._chat_message(conn, "")
        services = self._services
        session_id = await services.index.current(build_session_key(template, self._services.key_settings))
        session = await services.store.get_session(session_id) if session_id else None
        return {"chat_id": conn.chat_id, "session_id": session_id, "title": (session or {}).get("title")}

    async def _chat_send(self, conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        text = param(params, "text", str)
        msg = self._chat_message(conn, text)
        mid = msg.message_id or ""
        final = asyncio.Event()
        conn.finals[mid] = final
        try:
            disposition = await self._cli.receive(msg)
        except BaseException:
            conn.finals.pop(mid, None)
            raise
        key = build_session_key(msg, self._services.key_settings)
        queued = disposition is Disposition.ACCEPTED
        conn.spawn(self._settle(conn, mid, key, final, queued), f"control-settle:{mid}")
        return {"message_id": mid, "disposition": str(disposition)}

    async def _settle(self, conn: Connection, mid: str, key: str, final: asyncio.Event, queued: bool) -> None:
        """Push ``done`` once a message is answered and nothing it started is still
        under way: its lane ran dry (a turn is done only after its bookkeeping, so a
        next line never finds it busy, which /handoff would refuse), and an
        acknowledgement that promised a later answer (/handoff's) got it."""
        lanes = self._services.lanes
        try:
            while True:
                if queued:
                    await lanes.wait_idle(key)
                if mid in conn.acked and not final.is_set():
                    await final.wait()
                    continue
                if queued and lanes.busy(key):
                    continue  # the promised answer came from a job queued meanwhile
                break
            await conn.push_event("done", None, mid)
        except ConnectionError:
            pass
        finally:
            conn.finals.pop(mid, None)
            conn.acked.discard(mid)
