"""The terminal chat prints an answer as it is written: ``CliAdapter.open_stream`` pushes ``delta``
events over the chat's control-socket connection, and ``hermes-gateway chat`` prints them, then of
the final reply only what it has not printed. Until the gateway's stream driver lands, ``drive``
below stands in for it (it takes each line in place of the router)."""

from __future__ import annotations

import asyncio
import io
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.base import AdapterError, Disposition, InboundMessage, OutboundMessage, ReplyStream, SendKind
from adapters.cli import CliAdapter
from gateway.cli.chat_output import ReplyPrinter
from gateway.control.client import ChatConnection
from tests.gateway.cli.test_cli_chat import _command, chat
from tests.gateway.conftest import Running, run_gateway

WAIT = 30.0
PREAMBLE = "Let me check my notes first"
ANSWER = "The answer is forty-two, as it was the last time you asked."


def cli_of(run: Running) -> CliAdapter:
    assert run.gateway.services is not None
    cli = run.gateway.services.adapters["cli"]
    assert isinstance(cli, CliAdapter)
    return cli


def reply(chat_id: str, reply_to: str | None, text: str, **extra: Any) -> OutboundMessage:
    return OutboundMessage("cli", chat_id, text, reply_to=reply_to, **extra)


async def grow(stream: ReplyStream, text: str, step: int = 3) -> None:
    for end in [*range(1, len(text), step), len(text)]:
        await stream.update(text[:end])


async def like_the_driver(stream: ReplyStream, msg: InboundMessage) -> None:
    """Many updates, a model call's preamble dropped (the text shrinks), the answer, finish."""
    await grow(stream, PREAMBLE)
    await stream.update("")
    await grow(stream, ANSWER, 5)
    await stream.finish(reply(msg.chat_id, msg.message_id, ANSWER))


def drive(cli: CliAdapter, script: Callable[[ReplyStream, InboundMessage], Awaitable[None]]) -> None:
    """Every line the terminal sends is answered by ``script`` through a stream (before the line
    counts as answered: the daemon's ``done`` follows)."""

    async def take(msg: InboundMessage) -> Disposition:
        stream = cli.open_stream(reply(msg.chat_id, msg.message_id, ""))
        assert stream is not None and not stream.throttled
        await script(stream, msg)
        return Disposition.ANSWERED

    cli.bind(take)


# ------------------------------------------------------------------- the daemon's side


async def events_until_reply(conn: ChatConnection) -> list[tuple[str, str | None]]:
    seen: list[tuple[str, str | None]] = []
    while not seen or seen[-1][0] not in ("reply", "notice"):
        event = await asyncio.wait_for(conn.next_event(), WAIT)
        assert event is not None, seen
        if event["event"] != "typing":
            seen.append((event["event"], event.get("text")))
    return seen


async def test_a_stream_pushes_deltas_then_the_reply_over_the_chats_connection(gateway_home: Path) -> None:
    async with run_gateway(gateway_home, None) as run:
        conn = await ChatConnection.open(gateway_home)
        try:
            chat_id = conn.opened["chat_id"]
            stream = cli_of(run).open_stream(reply(chat_id, "7", ""))
            assert stream is not None and stream.message_ids == ()
            await stream.update("Hel")
            await stream.update("Hello")
            await stream.update("Hello")  # nothing new: nothing pushed
            await stream.update("")  # dropped: nothing to push until the text that replaces it
            await stream.update("Hi")
            await stream.update("Hi there")
            result = await stream.finish(reply(chat_id, "7", "Hi there!"))
            assert result.message_ids == stream.message_ids == (f"{chat_id}:7",)
            assert await events_until_reply(conn) == [
                ("delta", "Hel"), ("delta", "lo"), ("restart", "Hi"), ("delta", " there"), ("reply", "Hi there!")]
            assert cli_of(run).open_stream(reply("term-gone", "8", "")) is None
        finally:
            await conn.close()


async def test_a_terminal_gone_mid_stream_fails_the_stream(gateway_home: Path) -> None:
    async with run_gateway(gateway_home, None) as run:
        conn = await ChatConnection.open(gateway_home)
        stream = cli_of(run).open_stream(reply(conn.opened["chat_id"], "1", ""))
        assert stream is not None
        await stream.update("part")
        await conn.close()
        async with asyncio.timeout(WAIT):
            while cli_of(run).open_chats:
                await asyncio.sleep(0.02)
        with pytest.raises(AdapterError):  # the gateway stops updating; the answer is stored anyway
            await stream.update("part two")
        with pytest.raises(AdapterError):  # and the ledger records it as undelivered
            await stream.finish(reply(conn.opened["chat_id"], "1", "part two"))


# ------------------------------------------------------------------- the terminal's side


async def test_the_terminal_prints_the_stream_once_with_the_dropped_text_before_a_blank_line(
    gateway_home: Path,
) -> None:
    async with run_gateway(gateway_home, None) as run:
        drive(cli_of(run), like_the_driver)
        done = await chat(gateway_home, "what is the answer?\n")
        assert done.code == 0, done
        assert done.out == f"{PREAMBLE}\n\n{ANSWER}\n"
        quiet = await chat(gateway_home, "and without streaming?\n", "--no-stream")
        assert quiet.code == 0, quiet
        assert quiet.out == f"{ANSWER}\n"


async def test_the_terminal_prints_each_delta_when_it_arrives(gateway_home: Path) -> None:
    """The answer's end waits until the terminal has printed its beginning: a terminal that held
    the text back until the reply would never get there."""
    printed = asyncio.Event()

    async def wait_for_the_screen(stream: ReplyStream, msg: InboundMessage) -> None:
        await stream.update("First words,")
        await asyncio.wait_for(printed.wait(), WAIT)
        await stream.finish(reply(msg.chat_id, msg.message_id, "First words, then the rest."))

    async with run_gateway(gateway_home, None) as run:
        drive(cli_of(run), wait_for_the_screen)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "API_SERVER_"))}
        proc = await asyncio.create_subprocess_exec(
            *_command(), "chat", "--home", str(gateway_home), stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL, env=env)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(b"hello\n")
            await proc.stdin.drain()
            proc.stdin.close()
            first = await asyncio.wait_for(proc.stdout.readexactly(len("First words,")), WAIT)
            printed.set()
            rest = await asyncio.wait_for(proc.stdout.read(), WAIT)
            assert await asyncio.wait_for(proc.wait(), WAIT) == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert (first + rest).decode() == "First words, then the rest.\n"


async def test_an_error_after_some_text_follows_it_on_a_line_of_its_own(gateway_home: Path) -> None:
    async def fail_midway(stream: ReplyStream, msg: InboundMessage) -> None:
        await grow(stream, "The first half of")
        await stream.finish(reply(msg.chat_id, msg.message_id, "⚠️ The model failed.", kind=SendKind.NOTICE))

    async with run_gateway(gateway_home, None) as run:
        drive(cli_of(run), fail_midway)
        done = await chat(gateway_home, "go\n")
        assert done.code == 0, done
        assert done.out == "The first half of\n⚠️ The model failed.\n"


@pytest.mark.parametrize(
    ("events", "printed"),
    [
        # the final text is what was printed: only the line's end
        ([("delta", "Hel"), ("delta", "lo"), ("reply", "Hello")], "Hello\n"),
        # the final text goes on: the rest
        ([("delta", "Hel"), ("reply", "Hello")], "Hello\n"),
        # text dropped: a blank line, the answer anew; the final text is that answer
        ([("delta", "Let me"), ("restart", "Hi"), ("delta", "!"), ("reply", "Hi!")], "Let me\n\nHi!\n"),
        # the final text is something else (an error): on a line of its own
        ([("delta", "Half"), ("notice", "⚠️ failed")], "Half\n⚠️ failed\n"),
        # another message in the middle: the answer leaves its line and resumes after "…"
        ([("delta", "One"), ("ack", "queued"), ("delta", " two"), ("reply", "One two three")],
         "One\nqueued\n… two three\n"),
        # a reply without a stream, as before
        ([("reply", "whole")], "whole\n"),
        ([("reply", "")], "\n"),
    ],
)
def test_the_printer_shows_every_answer_once(events: list[tuple[str, str]], printed: str) -> None:
    for stream in (True, False):
        out = io.StringIO()
        printer = ReplyPrinter(out, stream=stream)
        for kind, text in events:
            reply_to = "1" if kind != "ack" else "2"
            if kind in ("delta", "restart"):
                printer.partial(text, reply_to, restart=kind == "restart")
            else:
                printer.final(text, reply_to)
        finals = "".join(f"{text}\n" for kind, text in events if kind not in ("delta", "restart"))
        assert out.getvalue() == (printed if stream else finals)
