"""The agent sends files: ``send_file`` through the real daemon, the ledger's note of them, and the
HTTP API's links; the path rules of ``send_file`` against real files and symlinks."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from adapters.base import OutboundMessage
from core.tools import ToolError
from core.tools.send_file import confine
from gateway.media import TurnFiles
from gateway.routing.delivery import Delivery, record_reply
from storage import MediaStore, StateStore
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import run_gateway

ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1"}


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def tool_results(fake: FakeOpenAI) -> list[dict[str, Any]]:
    messages = fake.chat_requests[-1].body["messages"]
    return [json.loads(m["content"]) if m["content"].startswith("{") else {"error": m["content"]}
            for m in messages if m["role"] == "tool"]


async def test_the_agent_sends_a_file_it_wrote_and_one_from_its_workspace(gateway_home: Path,
                                                                        fake_openai: FakeOpenAI) -> None:
    workspace = gateway_home / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "report.csv").write_text("a,b\n1,2\n")
    fake_openai.reply_tool_calls([
        {"name": "send_file", "arguments": {"content": "# Notes\n", "name": "notes.md"}},
        {"name": "send_file", "arguments": {"path": "report.csv"}},
    ]).reply("Here are both.")
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat) as gw:
        await chat.say("send me the notes and the report", user="u1")
        [reply] = await chat.wait_sent(1)
        for _ in range(100):
            if len(chat.files) == 2:
                break
            await asyncio.sleep(0.02)
    assert reply.text == "Here are both."
    assert chat.files == [("u1", "notes.md", b"# Notes\n"), ("u1", "report.csv", b"a,b\n1,2\n")]
    [(files, files_sent, status)] = rows(gw.db_path, "SELECT files, files_sent, status FROM gateway_outbound")
    assert [f["name"] for f in json.loads(files)] == ["notes.md", "report.csv"]
    assert (files_sent, status) == (2, "sent")


async def test_send_file_refuses_paths_outside_its_folders(gateway_home: Path, fake_openai: FakeOpenAI,
                                                           tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the bot token")
    workspace = gateway_home / "workspace"
    workspace.mkdir(parents=True)
    os.symlink(secret, workspace / "link.txt")
    fake_openai.reply_tool_calls([
        {"name": "send_file", "arguments": {"path": "../../secret.txt"}},
        {"name": "send_file", "arguments": {"path": str(secret)}},
        {"name": "send_file", "arguments": {"path": "link.txt"}},
    ]).reply("I could not send those.")
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat):
        await chat.say("send me the secret", user="u1")
        await chat.wait_sent(1)
    results = [r["error"] for r in tool_results(fake_openai)]
    assert len(results) == 3
    assert all("outside the folders" in r or "no file" in r.lower() for r in results), results
    assert chat.files == []


def test_confine_follows_symlinks_and_keeps_to_the_roots(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "ok.txt").write_text("fine")
    os.symlink(root / "sub" / "ok.txt", root / "inside-link")
    os.symlink(tmp_path, root / "escape")
    os.symlink(root / "loop", root / "loop")
    assert confine("sub/ok.txt", (root,)) == (root / "sub" / "ok.txt").resolve()
    assert confine("inside-link", (root,)) == (root / "sub" / "ok.txt").resolve()
    for bad in ("escape/ws/../../etc/passwd", "../ws/sub/../../x", "/etc/passwd", "loop", "sub", "", "a\x00b"):
        with pytest.raises(ToolError):
            confine(bad, (root,))


async def test_a_retry_after_a_failed_upload_sends_only_the_files_that_did_not_go(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state.db")
    await store.open()
    blobs = MediaStore(tmp_path / "media")
    chat = ChatAdapter()
    try:
        outbox = TurnFiles(blobs, limit=2**20)
        for n in range(3):
            await outbox.add_bytes(f"file {n}".encode(), f"f{n}.txt")
        out = OutboundMessage("testchat", "u1", "three files", reply_to="m1", files=tuple(outbox.files))
        ledger_id = await store.write(lambda c: record_reply(c, out, "key", None))
        delivery = Delivery(store, {"testchat": chat}, blobs=blobs)
        chat.fail_files_after = 1  # the platform takes the first file, then fails
        assert await delivery.send(out, ledger_id=ledger_id) is False
        assert [f[1] for f in chat.files] == ["f0.txt"]
        # The row is pending again (as a crash would leave it): a recovery sends the text and the rest.
        await store.write(lambda c: c.execute("UPDATE gateway_outbound SET status = 'pending'"))
        outbox.release()
        assert await delivery.recover("testchat", 3600) == 1
        assert [f[1] for f in chat.files] == ["f0.txt", "f1.txt", "f2.txt"]
        assert [m.text for m in chat.sent] == ["three files"]  # the text had gone out: not again
        [(sent_count, status)] = await store.read(
            lambda c: c.execute("SELECT files_sent, status FROM gateway_outbound").fetchall())
        assert (sent_count, status) == (3, "recovered")
    finally:
        await delivery.aclose()
        await store.close()


async def test_the_http_api_links_files_behind_its_key(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.reply_tool_calls([{"name": "send_file", "arguments": {"content": "x,y\n", "name": "data.csv"}}]) \
        .reply("Attached.")
    config = {"platforms": {"api_server": {"key": "sekrit"}}}
    async with run_gateway(gateway_home, fake_openai.base_url, config=config) as gw:
        resp = await gw.http.post("/v1/chat/completions", headers={"Authorization": "Bearer sekrit"},
                                  json={"model": "fake-model", "messages": [{"role": "user", "content": "csv?"}]})
        text = resp.json()["choices"][0]["message"]["content"]
        assert text.startswith("Attached.\n\n📎 data.csv (4 bytes): /v1/files/")
        link = text.rsplit(": ", 1)[1]
        assert (await gw.http.get(link)).status_code == 401
        got = await gw.http.get(link, headers={"Authorization": "Bearer sekrit"})
        assert got.status_code == 200 and got.content == b"x,y\n"
        assert "data.csv" in got.headers["Content-Disposition"]
        missing = await gw.http.get("/v1/files/" + "0" * 64, headers={"Authorization": "Bearer sekrit"})
        assert missing.status_code == 404
    # Not retried (the HTTP API waits for its answer), but noted: the file is kept with the reply.
    assert rows(gw.db_path, "SELECT status FROM gateway_outbound") == [("sent",)]


async def test_an_image_the_answer_links_to_on_this_machine_is_uploaded(gateway_home: Path,
                                                                       fake_openai: FakeOpenAI,
                                                                       tmp_path: Path) -> None:
    workspace = gateway_home / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))
    (tmp_path / "outside.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(8))
    fake_openai.reply_tool_calls([{"name": "send_file", "arguments": {"path": "chart.png"}}]).reply(
        f"Here: ![chart](chart.png) and ![web](https://example.com/x.png) "
        f"and ![no](<{tmp_path / 'outside.png'}>) and ![gone](missing.png)")
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat) as gw:
        await chat.say("draw it", user="u1")
        await chat.wait_sent(1)
        for _ in range(100):
            if chat.files:
                break
            await asyncio.sleep(0.02)
    # Only the workspace's image, once (send_file took it too): the URL stays a link, the file outside
    # is not read, the missing one skipped.
    assert [(name, data[:4]) for _, name, data in chat.files] == [("chart.png", b"\x89PNG")]
    [(files, sent)] = rows(gw.db_path, "SELECT files, files_sent FROM gateway_outbound")
    assert [f["name"] for f in json.loads(files)] == ["chart.png"] and sent == 1
