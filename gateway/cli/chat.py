"""``hermes-gateway chat``: the terminal chat, through the running daemon.

Each line typed (or piped in) goes to the daemon over its control socket and
its answer is printed before the next line is sent; at end of input the
command exits once the last answer is in. The daemon stays the only writer of
state.db. ``--standalone`` starts the daemon in this process (terminal chat
only, under the writer lock) for when none runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable
from pathlib import Path
from typing import Annotated, Any, TextIO

import typer

from gateway.config.models import EX_CONFIG, ConfigError, default_home, load_config
from gateway.control.client import ChatConnection, ControlError, DaemonNotRunningError, call
from storage.errors import GatewayError, StorageLockedError

try:
    from gateway.handoff.runner import HANDOFF_DONE_PREFIX
except ImportError:  # pragma: no cover - the handoff module ships with the same release
    HANDOFF_DONE_PREFIX = "Handoff complete"

EX_UNAVAILABLE = 69  # sysexits.h: the service (the daemon) is not there
_QUIT = {"/quit", "/exit", "/q"}
_PROMPT = "› "
_STANDALONE_START_TIMEOUT = 60.0


class _DaemonRunningError(GatewayError):
    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        super().__init__("a daemon already runs")


class _Lines:
    """Lines of stdin, read on request in a daemon thread; None at end of input.

    The thread reads the file descriptor itself, not ``sys.stdin``: a daemon
    thread blocked inside a buffered reader aborts the interpreter at exit.
    """

    def __init__(self, prompt: str) -> None:
        self._loop = asyncio.get_running_loop()
        self._prompt = prompt
        self._want = threading.Event()
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._fd = sys.stdin.fileno()
        threading.Thread(target=self._read, name="chat-stdin", daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while True:
            self._want.wait()
            self._want.clear()
            if self._prompt:
                sys.stdout.write(self._prompt)
                sys.stdout.flush()
            while b"\n" not in buf:
                try:
                    chunk = os.read(self._fd, 65536)
                except InterruptedError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                buf += chunk
            line: str | None
            if b"\n" in buf:
                raw, buf = buf.split(b"\n", 1)
                line = raw.decode("utf-8", errors="replace")
            elif buf:
                line, buf = buf.decode("utf-8", errors="replace"), b""  # a last line without a newline
            else:
                line = None
            self._loop.call_soon_threadsafe(self._queue.put_nowait, line)
            if line is None:
                return

    async def next(self) -> str | None:
        self._want.set()
        return await self._queue.get()


class _Chat:
    def __init__(self, conn: ChatConnection, out: TextIO, err: TextIO) -> None:
        self.conn = conn
        self.out = out
        self.err = err
        self.settled: dict[str, asyncio.Event] = {}
        self.handed_off = False
        self.lost = asyncio.Event()
        self.quit = asyncio.Event()
        self.waiting = False  # a line was sent and its answer is not in yet
        self._interrupted = False
        self._stopper: asyncio.Future[None] | None = None

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def settle_event(self, mid: str) -> asyncio.Event:
        return self.settled.setdefault(mid, asyncio.Event())

    async def pump(self) -> None:
        """Print what the daemon pushes; note answers and a finished handoff."""
        while True:
            event = await self.conn.next_event()
            if event is None:
                self.lost.set()
                return
            kind = event.get("event")
            text = event.get("text")
            if kind in ("reply", "notice", "ack") and isinstance(text, str):
                self._say(text)
                if kind != "ack" and text.startswith(HANDOFF_DONE_PREFIX):
                    self.handed_off = True
            elif kind == "done" and isinstance(event.get("reply_to"), str):
                self.settle_event(event["reply_to"]).set()

    def show_opening(self, opened: dict[str, Any]) -> None:
        if opened.get("notice"):
            print(opened["notice"], file=self.err, flush=True)
        session_id = opened.get("session_id")
        if not session_id:
            return
        title = opened.get("title")
        self._say(f"Resumed session {session_id}" + (f' "{title}"' if title else ""))
        for item in opened.get("recap") or []:
            mark = "●" if item.get("role") == "user" else "◆"
            text = str(item.get("text") or "")
            tools = item.get("tool_calls") or []
            if tools:
                n = len(tools)
                text = (text + " " if text else "") + f"[{n} tool call{'s' if n != 1 else ''}: {', '.join(tools)}]"
            self._say(f"  {mark} {text}")
        self._say("")

    async def send(self, line: str) -> bool:
        """Send one line and wait for its answer; False when the daemon went away."""
        try:
            result = await self.conn.send(line)
        except ConnectionError:
            return False
        except ControlError as exc:
            print(f"⚠️ {exc}", file=self.err, flush=True)
            return True
        done = self.settle_event(str(result.get("message_id")))
        self.waiting, self._interrupted = True, False
        try:
            await _first(done.wait(), self.lost.wait(), self.quit.wait())
        finally:
            self.waiting = False
        return done.is_set() or (self.quit.is_set() and not self.lost.is_set())

    def interrupt(self) -> None:
        """Ctrl-C: stop the reply being written; a second one (or one at the prompt) leaves."""
        if self.waiting and not self._interrupted:
            self._interrupted = True
            print("\n(stopping the reply — Ctrl-C again to leave)", file=self.err, flush=True)
            self._stopper = asyncio.ensure_future(self._stop_turn())
        else:
            print("", file=self.err, flush=True)
            self.quit.set()

    async def _stop_turn(self) -> None:
        with contextlib.suppress(GatewayError, ConnectionError):
            await self.conn.send("/stop")


async def _first(*aws: Awaitable[Any]) -> None:
    """Wait until the first of ``aws`` finishes; cancel the rest."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()


async def run_chat(home: Path, *, resume: str | None = None, continue_last: bool = False,
                   out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The chat loop against the daemon of ``home``; the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    conn = await ChatConnection.open(home, resume=resume, continue_last=continue_last)
    chat = _Chat(conn, out, err)
    pump = asyncio.create_task(chat.pump(), name="chat-events")
    interactive = sys.stdin.isatty()
    loop = asyncio.get_running_loop()
    code = 0
    try:
        chat.show_opening(conn.opened)
        if interactive:
            print("Type a message (/help for commands, /quit or Ctrl-D to leave).", file=err, flush=True)
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signal.SIGINT, chat.interrupt)
        lines = _Lines(_PROMPT if interactive else "")
        while not chat.quit.is_set():
            next_line = asyncio.ensure_future(lines.next())
            await _first(next_line, chat.quit.wait(), chat.lost.wait())
            if chat.lost.is_set() and not next_line.done():
                print("The daemon closed the connection (it stopped or restarted).", file=err, flush=True)
                code = 1
                break
            line = next_line.result() if next_line.done() and not next_line.cancelled() else None
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            if text.lower() in _QUIT:
                break
            if not await chat.send(text):
                print("The daemon closed the connection (it stopped or restarted).", file=err, flush=True)
                code = 1
                break
            if chat.handed_off:
                break
        if code == 0:
            await _say_goodbye(conn, err)
    finally:
        if interactive:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
        pump.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pump
        await conn.close()
    return code


async def _say_goodbye(conn: ChatConnection, err: TextIO) -> None:
    with contextlib.suppress(GatewayError, ConnectionError):
        info = await conn.info(reply_within=10)
        session_id = info.get("session_id")
        if session_id:
            print(f"Session: {session_id}\nResume it with: hermes-gateway chat -r {session_id}",
                  file=err, flush=True)


async def run_standalone(home: Path, *, resume: str | None = None, continue_last: bool = False,
                         out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Start the daemon in this process (terminal chat only), chat, stop it."""
    from gateway.daemon.runner import Gateway

    with contextlib.suppress(DaemonNotRunningError):
        pong = await call(home, "ping", reply_within=5)
        raise _DaemonRunningError(pong.get("pid"))
    gateway = Gateway(load_config(home), standalone=True)
    task = asyncio.create_task(gateway.run(), name="standalone-gateway")
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _STANDALONE_START_TIMEOUT
        while True:
            if task.done():
                task.result()  # raises why it could not start
                raise GatewayError("the in-process gateway stopped while starting")
            with contextlib.suppress(DaemonNotRunningError, ControlError):
                await call(home, "ping", reply_within=5)
                break
            if loop.time() > deadline:
                raise GatewayError(f"the in-process gateway did not start within {_STANDALONE_START_TIMEOUT:g}s")
            await asyncio.sleep(0.05)
        return await run_chat(home, resume=resume, continue_last=continue_last, out=out, err=err)
    finally:
        gateway.request_stop()
        with contextlib.suppress(Exception):
            await task


def _quiet_logging(home: Path) -> None:
    """In standalone mode the daemon's log must not mix with the chat on stdout."""
    from gateway.logs import configure_logging

    try:
        fmt = load_config(home).settings.logging.format
    except ConfigError:
        fmt = "auto"
    configure_logging("warning", fmt)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(sys.stderr)


HomeOption = Annotated[Path | None, typer.Option(
    "--home", metavar="DIR", help="HERMES_HOME (default: $HERMES_HOME or ~/.hermes)")]


def chat(
    title: Annotated[list[str] | None, typer.Argument(
        metavar="TITLE", help="With -c: the session to continue, by title (the newest of its lineage) or id.",
        show_default=False)] = None,
    continue_last: Annotated[bool, typer.Option(
        "-c", "--continue", help="Continue the most recent terminal session (or the one named after -c).")] = False,
    resume: Annotated[str | None, typer.Option(
        "-r", "--resume", metavar="SESSION", help="Resume a session by id, unique id prefix or title.",
        show_default=False)] = None,
    standalone: Annotated[bool, typer.Option(
        "--standalone", help="No daemon running: run one in this process for this chat.")] = False,
    home: HomeOption = None,
) -> None:
    """Chat with the agent in this terminal (through the running daemon)."""
    root = home or default_home()
    named = " ".join(title).strip() if title else None
    if named and not continue_last:
        typer.echo("hermes-gateway chat: a session name needs -c (continue) or -r (resume).", err=True)
        raise typer.Exit(2)
    if named and resume:
        typer.echo("hermes-gateway chat: give either -c <title> or -r <id|title>, not both.", err=True)
        raise typer.Exit(2)
    ref = resume or named
    runner = run_standalone if standalone else run_chat
    if standalone:
        _quiet_logging(root)
    try:
        code = asyncio.run(runner(root, resume=ref, continue_last=continue_last and not named))
    except DaemonNotRunningError as exc:
        typer.echo(f"hermes-gateway chat: {exc}\nOr chat without a daemon: hermes-gateway chat --standalone",
                   err=True)
        raise typer.Exit(EX_UNAVAILABLE) from None
    except (StorageLockedError, _DaemonRunningError) as exc:
        pid = exc.holder_pid if isinstance(exc, StorageLockedError) else exc.pid
        who = f" (process {pid})" if pid else ""
        typer.echo(f"hermes-gateway chat: a daemon already runs for {root}{who}; "
                   "run `hermes-gateway chat` without --standalone to talk to it.", err=True)
        raise typer.Exit(1) from None
    except ConfigError as exc:
        typer.echo(f"hermes-gateway chat: configuration error: {exc}", err=True)
        raise typer.Exit(EX_CONFIG) from None
    except GatewayError as exc:
        typer.echo(f"hermes-gateway chat: {exc}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo("", err=True)
        raise typer.Exit(130) from None
    raise typer.Exit(code)
