"""The terminal chat against a running daemon: each line goes over the control socket and its
answer is printed as it is written (``chat_output``), before the next line is sent; Ctrl-C stops a
reply being written, then leaves.

While a tool's approval question waits (the daemon printed it, with the commands to type), the
chat reads on: ``/approve``, ``/deny`` and ``/stop`` go out at once (the turn waits for them);
other lines typed meanwhile are sent after the answer, in order."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, TextIO

from gateway.cli.chat_output import ReplyPrinter
from gateway.cli.stdin_lines import StdinLines
from gateway.control.client import ChatConnection, ControlError
from gateway.handoff.marker import HANDOFF_DONE_PREFIX
from storage.errors import GatewayError

__all__ = ["ChatSignals", "run_chat"]

_QUIT = {"/quit", "/exit", "/q"}
#: what an approval question ends with (``adapters.approvals.ApprovalPrompt.typed``)
_QUESTION = re.compile(r"Reply /approve [A-Za-z0-9]+, /approve always")
#: lines that answer (or end) a waiting question at once
_ANSWERS = {"/approve", "/deny", "/stop"}
_PROMPT = "› "


class _Chat:
    def __init__(self, conn: ChatConnection, out: TextIO, err: TextIO, *, stream: bool = True) -> None:
        self.conn = conn
        self.out = out
        self.err = err
        self.printer = ReplyPrinter(out, stream=stream)
        self.settled: dict[str, asyncio.Event] = {}
        self.handed_off = False
        self.lost = asyncio.Event()
        self.quit = asyncio.Event()
        self.waiting = False  # a line was sent and its answer is not in yet
        self._awaiting: str | None = None  # the message id of that line
        self._interrupted = False
        self._stopper: asyncio.Future[None] | None = None
        self.exit_code: int | None = None  # set when a signal made the chat leave
        self.lines: StdinLines | None = None
        self.asked = asyncio.Event()  # the line being answered has an approval question waiting
        self.typed: list[str] = []  # lines read while a question waited, sent after the answer
        self.eof = False  # the input ended while a question waited
        self._line: asyncio.Future[str | None] | None = None  # one read of stdin at a time

    def next_line(self) -> asyncio.Future[str | None]:
        """The next line of input (None at its end); one read in flight, kept across waits."""
        if self._line is None:
            assert self.lines is not None
            self._line = asyncio.ensure_future(self.lines.next())
        return self._line

    def take_line(self) -> str | None:
        line, self._line = (self._line.result() if self._line is not None else None), None
        return line

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
            reply_to = event.get("reply_to")
            if kind in ("delta", "restart") and isinstance(text, str):
                self.printer.partial(text, reply_to, restart=kind == "restart")
            elif kind == "reasoning" and isinstance(text, str):  # /reasoning on: printed before the answer
                self.printer.final(text, reply_to)
            elif kind in ("reply", "notice", "ack") and isinstance(text, str):
                self.printer.final(text, reply_to)
                if kind == "ack" and reply_to == self._awaiting and _QUESTION.search(text):
                    self.asked.set()
                if kind != "ack" and text.startswith(HANDOFF_DONE_PREFIX):
                    self.handed_off = True
                if kind != "ack" and reply_to == self._awaiting:
                    # Answered (as the daemon counts it): a Ctrl-C from now on has no reply to stop.
                    self.waiting = False
            elif kind == "done" and isinstance(event.get("reply_to"), str):
                self.settle_event(event["reply_to"]).set()

    def show_opening(self, opened: dict[str, Any]) -> None:
        if opened.get("notice"):
            print(opened["notice"], file=self.err, flush=True)
        session_id = opened.get("session_id")
        if not session_id:
            return
        title = opened.get("title")
        resumed = f"Resumed session {session_id}" + (f' "{title}"' if title else "")
        if opened.get("resume_display") == "minimal":
            # display.resume_display: minimal — the reference's one-liner instead of the recap
            count = opened.get("message_count") or 0
            self._say(f"{resumed} ({count} message{'s' if count != 1 else ''})")
            return
        self._say(resumed)
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
        self._awaiting = str(result.get("message_id"))
        done = self.settle_event(self._awaiting)
        self.waiting, self._interrupted = True, False
        try:
            while True:
                # Reading on only while a question waits: otherwise the prompt would print into the answer.
                reading = self.asked.is_set() and self.lines is not None and not self.eof
                typing = self.next_line() if reading else None
                await _first(done.wait(), self.lost.wait(), self.quit.wait(),
                             asyncio.shield(typing) if typing is not None else self.asked.wait())
                if done.is_set() or self.lost.is_set() or self.quit.is_set():
                    break
                if typing is None or not typing.done():
                    continue  # a question came: read on from now
                await self._while_asked(self.take_line())
        finally:
            self.waiting, self._awaiting = False, None
            self.asked.clear()
        return done.is_set() or (self.quit.is_set() and not self.lost.is_set())

    async def _while_asked(self, line: str | None) -> None:
        """A line typed while a question waits: an answer goes out now, anything else after."""
        if line is None:
            self.eof = True  # the answer is still awaited; then the chat ends
            return
        text = line.strip()
        if text.split()[:1] and text.split()[0].lower() in _ANSWERS:
            with contextlib.suppress(GatewayError, ConnectionError):
                await self.conn.send(text)  # its reply comes as a notice; the turn's answer follows
        elif text:
            self.typed.append(text)

    def interrupt(self) -> None:
        """Ctrl-C: stop the reply being written; a second one (or one at the prompt) leaves."""
        if self.waiting and not self._interrupted:
            self._interrupted = True
            print("\n(stopping the reply — Ctrl-C again to leave)", file=self.err, flush=True)
            self._stopper = asyncio.ensure_future(self._stop_turn())
        else:
            print("", file=self.err, flush=True)
            self.quit.set()

    def leave(self, code: int) -> None:
        """A signal without a terminal to ask on (or SIGTERM): stop the reply being written, leave."""
        if self.exit_code is None:
            self.exit_code = code
            if self.waiting and not self._interrupted:
                self._interrupted = True
                self._stopper = asyncio.ensure_future(self._stop_turn())
        self.quit.set()

    async def settle(self) -> None:
        """Before the connection closes: a /stop sent on Ctrl-C is done (and its answer shown)."""
        if self._stopper is not None:
            with contextlib.suppress(Exception):
                await self._stopper

    async def _stop_turn(self) -> None:
        with contextlib.suppress(GatewayError, ConnectionError):
            result = await self.conn.send("/stop")
            await _first(self.settle_event(str(result.get("message_id"))).wait(), self.lost.wait())


class ChatSignals:
    """Ctrl-C and SIGTERM in a standalone chat. Before the chat opens they cancel the start;
    while it runs they leave it (on a terminal Ctrl-C keeps its meaning: stop the reply, then
    leave); once it is over they only say that the in-process daemon is stopping."""

    def __init__(self, err: TextIO) -> None:
        self._loop = asyncio.get_running_loop()
        self._err = err
        self._chat: _Chat | None = None
        self._interactive = False
        self._over = False
        self.before_chat: int | None = None  # the exit code of a signal that came before the chat
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                self._loop.add_signal_handler(sig, self._on, sig)

    def _on(self, sig: int) -> None:
        if self._over:
            print("(stopping the in-process gateway)", file=self._err, flush=True)
        elif self._chat is None:
            self.before_chat = 128 + sig
        elif sig == signal.SIGINT and self._interactive:
            self._chat.interrupt()
        else:
            self._chat.leave(128 + sig)

    def attach(self, chat: _Chat, interactive: bool) -> None:
        self._chat, self._interactive = chat, interactive

    def chat_over(self) -> None:
        self._chat, self._over = None, True

    def remove(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                self._loop.remove_signal_handler(sig)


async def _first(*aws: Awaitable[Any]) -> None:
    """Wait until the first of ``aws`` finishes; cancel the rest."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()


async def run_chat(home: Path, *, resume: str | None = None, continue_last: bool = False,
                   out: TextIO | None = None, err: TextIO | None = None, signals: ChatSignals | None = None,
                   stream: bool = True) -> int:
    """The chat loop against the daemon of ``home``; the exit code. ``stream``: print answers as
    they are written (False: each when it is finished)."""
    out = out or sys.stdout
    err = err or sys.stderr
    conn = await ChatConnection.open(home, resume=resume, continue_last=continue_last)
    chat = _Chat(conn, out, err, stream=stream)
    pump = asyncio.create_task(chat.pump(), name="chat-events")
    interactive = sys.stdin.isatty()
    loop = asyncio.get_running_loop()
    code = 0
    try:
        chat.show_opening(conn.opened)
        if interactive:
            print("Type a message (/help for commands, /quit or Ctrl-D to leave).", file=err, flush=True)
        if signals is not None:
            signals.attach(chat, interactive)
        elif interactive:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signal.SIGINT, chat.interrupt)
        chat.lines = StdinLines(_PROMPT if interactive else "")
        while not chat.quit.is_set():
            line: str | None
            if chat.typed or chat.eof:
                line = chat.typed.pop(0) if chat.typed else None
            else:
                next_line = chat.next_line()
                await _first(asyncio.shield(next_line), chat.quit.wait(), chat.lost.wait())
                if chat.lost.is_set() and not next_line.done():
                    print("The daemon closed the connection (it stopped or restarted).", file=err, flush=True)
                    code = 1
                    break
                line = chat.take_line() if next_line.done() and not next_line.cancelled() else None
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
            await chat.settle()
            await _say_goodbye(conn, err)
            code = chat.exit_code or 0
    finally:
        if signals is not None:
            signals.chat_over()
        elif interactive:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
        await chat.settle()
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
