"""The real tools that act, through the whole daemon and its HTTP API: web_fetch's guard against
private addresses, a dangerous command asked about in a streamed request and approved by the next
request, and a command that floods its output. FakeOpenAI scripts the calls; results are read
back from state.db, as the model saw them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from tests.adapters.test_api_server_approvals import ask, question_in
from tests.adapters.test_api_server_stream import DONE, SseClient, assembled
from tests.core._agent_env import db_rows
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import run_gateway

PAGE = ("<html><head><title>Local notes</title></head><body><article><h1>Shopping list</h1>"
        "<p>We need to buy <b>milk</b> and <a href=\"/eggs\">eggs</a> today, because the fridge is empty and "
        "guests come tonight.</p><h2>Later</h2><ul><li>bread</li><li>cheese</li></ul></article></body></html>")


def stored_tool_results(db: Path) -> list[str]:
    """Every tool message in state.db, in order."""
    return [str(r[0]) for r in db_rows(db, "SELECT content FROM messages WHERE role = 'tool' ORDER BY id")]


@pytest.fixture
async def local_page() -> AsyncIterator[str]:
    """A page served on 127.0.0.1 (loopback: refused unless tools.web.allow_private)."""
    async def page(_: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    app = web.Application()
    app.router.add_get("/notes", page)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/notes"
    finally:
        await runner.cleanup()


async def test_web_fetch_refuses_metadata_and_loopback_and_the_daemon_keeps_answering(
    tmp_path: Path, fake_openai: FakeOpenAI, local_page: str
) -> None:
    fake_openai.reply_tool_calls([
        {"id": "m1", "name": "web_fetch", "arguments": {"url": "http://169.254.169.254/latest/meta-data/"}},
        {"id": "l1", "name": "web_fetch", "arguments": {"url": local_page}},
    ]).reply("Those addresses are refused.")
    fake_openai.reply("Still here.")
    async with run_gateway(tmp_path / "h", fake_openai.base_url) as gw:
        assert await ask(gw.http, "fetch the metadata and my notes") == "Those addresses are refused."
        metadata, loopback = stored_tool_results(gw.db_path)
        for result in (metadata, loopback):
            assert result.startswith("Error:") and "Shopping" not in result, result
        assert "169.254.169.254" in metadata and "127.0.0.1" in loopback
        assert "public addresses" in loopback
        assert await ask(gw.http, "are you there?") == "Still here."


@pytest.mark.parametrize("host", ["localhost", "2130706433", "0x7f.1", "[::ffff:127.0.0.1]"])
async def test_web_fetch_refuses_loopback_however_it_is_spelled(
    tmp_path: Path, fake_openai: FakeOpenAI, local_page: str, host: str
) -> None:
    url = local_page.replace("127.0.0.1", host)
    fake_openai.reply_tool_calls([{"name": "web_fetch", "arguments": {"url": url}}]).reply("Refused.")
    async with run_gateway(tmp_path / "h", fake_openai.base_url) as gw:
        assert await ask(gw.http, "fetch it") == "Refused."
        [result] = stored_tool_results(gw.db_path)
        assert result.startswith("Error:") and "Shopping" not in result, result


async def test_web_fetch_reads_a_local_page_as_markdown_with_allow_private(
    tmp_path: Path, fake_openai: FakeOpenAI, local_page: str
) -> None:
    fake_openai.reply_tool_calls([{"name": "web_fetch", "arguments": {"url": local_page}}]).reply("Milk.")
    async with run_gateway(tmp_path / "h", fake_openai.base_url,
                           config={"tools": {"web": {"allow_private": True}}}) as gw:
        assert await ask(gw.http, "what is on my list?") == "Milk."
        [result] = stored_tool_results(gw.db_path)
        assert "Title: Local notes" in result and "# Shopping list" in result and "**milk**" in result, result
        assert f"[eggs]({local_page.removesuffix('/notes')}/eggs)" in result and "- cheese" in result
        assert "<b>" not in result


async def test_a_streamed_request_asks_about_a_dangerous_command_and_the_next_request_approves(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home = tmp_path / "h"
    flag = home / "flag"
    command = f"echo ok > {flag}"
    fake_openai.reply_tool_calls([{"name": "terminal", "arguments": {"command": command}}]).reply("Flag is set.")
    async with run_gateway(home, fake_openai.base_url) as gw:
        stream = SseClient(gw.http, "set the flag")
        approval_id = await question_in(stream)
        assert not flag.exists()
        assert await ask(gw.http, f"/approve {approval_id}") == "✅ Approved by alice."
        events = await stream.done()
        text = assembled(events)
        assert events[-1] == DONE
        assert (text.index(command) < text.index("writes into $HERMES_HOME") < text.index("✅ Approved by alice")
                < text.index("Flag is set."))
        assert flag.read_text() == "ok\n"
        assert stored_tool_results(gw.db_path) == ["exit code 0\n(no output)"]


async def test_a_request_without_a_stream_gets_the_question_and_deny_keeps_the_command_from_running(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home = tmp_path / "h"
    flag = home / "flag"
    command = f"echo ok > {flag}"
    fake_openai.reply_tool_calls([{"name": "terminal", "arguments": {"command": command}}]).reply("Left it.")
    fake_openai.reply_tool_calls([{"name": "terminal", "arguments": {"command": "echo hi"}}]).reply("Said hi.")
    async with run_gateway(home, fake_openai.base_url) as gw:
        question = await ask(gw.http, "set the flag")
        assert command in question and "writes into $HERMES_HOME" in question and "/approve" in question
        assert await ask(gw.http, "/deny") == "⛔ Denied by alice.\n\nLeft it."
        assert not flag.exists()
        [denied] = stored_tool_results(gw.db_path)
        assert denied.startswith("Error: Not done") and "did not approve" in denied
        # a harmless command is not asked: the request gets the answer itself
        assert await ask(gw.http, "say hi") == "Said hi."
        assert stored_tool_results(gw.db_path)[-1] == "exit code 0\noutput (3 bytes):\nhi\n"


async def test_a_flood_of_output_is_stored_capped_and_the_daemon_answers_promptly_after(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    command = r"head -c 200000000 /dev/zero | tr '\0' x"
    fake_openai.reply_tool_calls([{"name": "terminal", "arguments": {"command": command}}]).reply("That was long.")
    fake_openai.reply("Right here.")
    async with run_gateway(tmp_path / "h", fake_openai.base_url, config={"agent": {"max_tool_result_kb": 16}}) as gw:
        assert await ask(gw.http, "print a lot") == "That was long."
        [result] = stored_tool_results(gw.db_path)
        assert len(result.encode()) <= 16 * 1024, len(result)
        assert result.startswith("killed: it printed more than 64 MiB of output"), result[:300]
        assert "xxxx" in result
        sent = [m for m in fake_openai.chat_requests[1].body["messages"] if m["role"] == "tool"]
        assert sent[0]["content"] == result  # the model saw what was stored
        started = time.monotonic()
        assert await asyncio.wait_for(ask(gw.http, "still alive?"), 5) == "Right here."
        assert time.monotonic() - started < 2.0
