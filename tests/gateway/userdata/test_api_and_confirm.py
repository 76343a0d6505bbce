"""/export-my-data on the HTTP API (the file is a ``/v1/files/<id>`` link in the answer, served while
the daemon runs), /forget-me there (no buttons: ``/forget-me confirm``), and the confirmation's rules:
two minutes, the asker only, one per sender."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time
from pathlib import Path

import pytest

from gateway.errors import RequestError
from gateway.userdata import Confirmations, UserData, parse_sender
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import run_gateway
from tests.storage._userdata_fixture import fts_hits, rows_naming, wait_indexed


async def _say(run: object, text: str, user: str = "alice") -> str:
    resp = await run.ask(text, user=user)  # type: ignore[attr-defined]
    assert resp.status_code == 200, resp.text
    return str(resp.json()["choices"][0]["message"]["content"])


async def test_export_link_and_typed_forget_over_http(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with run_gateway(gateway_home, fake_openai.base_url) as run:
        fake_openai.reply("noted")
        assert await _say(run, "zorbalicious plans") == "noted"
        fake_openai.reply("hello bob")
        assert await _say(run, "quaxbobbly here", user="bob") == "hello bob"
        answer = await _say(run, "/export-my-data")
        link = re.search(r"/v1/files/[0-9a-f]{64}", answer)
        assert link is not None, answer
        got = await run.http.get(link.group(0))
        assert got.status_code == 200
        export = json.loads(got.content)
        assert [m["content"] for m in export["sessions"][0]["messages"]] == ["zorbalicious plans", "noted"]

        assert "No deletion of your data is waiting" in await _say(run, "/forget-me confirm")
        asked = await _say(run, "/forget-me")
        assert "Send /forget-me confirm" in asked and "1 conversation(s) of yours" in asked
        assert "Only the person" not in await _say(run, "/forget-me confirm", user="bob")  # bob has none pending
        report = await _say(run, "/forget-me confirm")  # the report is the answer
        assert report.startswith("✅ Your data is deleted") and "sessions deleted: 1" in report
        db = gateway_home / "state.db"
        await wait_indexed(db)
        with sqlite3.connect(str(db)) as conn:
            assert rows_naming(conn, "alice") == [] and fts_hits(conn, "quaxbobbly") == 2


def test_confirmations_expire_and_belong_to_their_asker() -> None:
    book = Confirmations(seconds=0.0)
    pending = book.open("telegram", "1", "1", None)
    assert book.take("telegram", "2", pending.id).status == "not_yours"
    time.sleep(0.01)
    assert book.take("telegram", "1").status == "expired"
    assert book.take("telegram", "1").status == "none"  # gone once answered
    book = Confirmations(seconds=60.0)
    first = book.open("telegram", "1", "1", None)
    second = book.open("telegram", "1", "1", None)
    assert book.take("telegram", "1", first.id).status == "none"  # replaced by the newer one
    taken = book.take("telegram", "1", second.id)
    assert taken.status == "ok" and taken.pending is second
    assert book.take("discord", "1").status == "none"  # the same id on another platform is someone else


@pytest.mark.parametrize("text", ["alice", ":1", "telegram:", "telegram: "])
def test_a_sender_is_platform_colon_id(text: str) -> None:
    with pytest.raises(RequestError):
        parse_sender(text)
    assert parse_sender("Telegram:123") == ("telegram", "123")


async def test_an_owner_gets_the_profile_and_an_expired_confirmation_is_refused(
        gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    await asyncio.to_thread((gateway_home / "memories").mkdir, parents=True)
    await asyncio.to_thread((gateway_home / "memories" / "USER.md").write_text, "Likes tea\n§\nLives in Oslo")
    async with run_gateway(gateway_home, fake_openai.base_url, config={"auth": {"owners": ["api-server:alice"]}}) as run:
        fake_openai.reply("noted")
        await _say(run, "hello")
        answer = await _say(run, "/export-my-data")
        link = re.search(r"/v1/files/[0-9a-f]{64}", answer)
        assert link is not None
        export = json.loads((await run.http.get(link.group(0))).content)
        assert export["memory"] == {"user_profile": ["Likes tea", "Lives in Oslo"]}
        bob = json.loads((await run.http.get(re.search(  # type: ignore[union-attr]
            r"/v1/files/[0-9a-f]{64}", await _say(run, "/export-my-data", user="bob")).group(0))).content)
        assert bob["memory"] is None and bob["sessions"] == []  # not an owner; no data

        services = run.gateway.services
        assert services is not None and isinstance(services.userdata, UserData)
        services.userdata.confirmations = Confirmations(seconds=0.0)
        await _say(run, "/forget-me")
        await asyncio.sleep(0.01)
        assert "Too late: that request has expired" in await _say(run, "/forget-me confirm")
        services.userdata.confirmations = Confirmations()
        await _say(run, "/forget-me")
        assert (await _say(run, "/forget-me confirm")).startswith("✅ Your data is deleted")
        assert (await asyncio.to_thread((gateway_home / "memories" / "USER.md").read_text)).strip() == ""
