"""Pairing on Discord through the whole daemon: a stranger's DM gets a code, the owner approves it
through the CLI (the running daemon's control socket), the stranger chats; another bot application
on the same home does not take that approval; with an allowlist a stranger gets nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.emulators.fake_discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI

from .._pairing import code_in, nowhere_in_clear, pairing_cli, said, wait_said
from ..conftest import rows
from .test_adapter import run_discord_gateway

OPEN = {"DISCORD_ALLOWED_USERS": ""}


async def test_stranger_pairs_through_the_cli_and_then_chats(tmp_path: Path, fake_openai: FakeOpenAI,
                                                             fake_discord: FakeDiscord,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    fake, home = fake_discord, tmp_path / "h"
    stranger = fake.add_user("stranger")
    dm = fake.dm_channel(stranger)["id"]
    async with run_discord_gateway(home, fake, fake_openai.base_url, env=OPEN,
                                   config={"logging": {"level": "debug"}}) as gw:
        await fake.user_says("hello?", user=stranger)
        code = code_in(await wait_said(fake, dm, "pairing code is"))
        r = await pairing_cli(home, "approve", code)
        assert r.code == 0 and f"Approved Stranger ({stranger['id']}) on discord." in r.out, r.err
        await wait_said(fake, dm, "You're in")
        await fake.user_says("now hi", user=stranger)
        await wait_said(fake, dm, "echo: now hi")
        assert gw.gateway.services is not None
        assert gw.gateway.services.owners.of("discord") == [stranger["id"]]
    assert rows(home / "state.db", "SELECT account_id, user_id FROM gateway_pairing_allowed") == [
        (str(fake.application_id), stranger["id"])]
    logs = capsys.readouterr()
    assert "pairing code given" in logs.out
    nowhere_in_clear(home, code, r.out, r.err, logs.out, logs.err)


async def test_another_bot_application_does_not_take_the_approval(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home = tmp_path / "h"
    async with FakeDiscord(application_id=1_000_001) as first:
        one, two = first.add_user("one"), first.add_user("two")
        async with run_discord_gateway(home, first, fake_openai.base_url, env=OPEN):
            await first.user_says("hi", user=one)
            code1 = code_in(await wait_said(first, first.dm_channel(one)["id"], "pairing code is"))
            await first.user_says("hi", user=two)
            code2 = code_in(await wait_said(first, first.dm_channel(two)["id"], "pairing code is"))
            assert (await pairing_cli(home, "approve", code1)).code == 0
    async with FakeDiscord(application_id=2_000_002) as second:
        same_one = second.add_user("one", user_id=one["id"])
        dm = second.dm_channel(same_one)["id"]
        async with run_discord_gateway(home, second, fake_openai.base_url, env=OPEN):
            await second.user_says("hi again", user=same_one)
            await wait_said(second, dm, "pairing code is")  # a stranger to this bot
            r = await pairing_cli(home, "approve", code2)
            assert r.code == 1 and "another discord bot account" in r.err
            assert not [t for t in said(second, dm) if "echo:" in t]
    assert fake_openai.chat_requests == []


async def test_a_stranger_gets_nothing_once_an_allowlist_exists(tmp_path: Path, fake_openai: FakeOpenAI,
                                                                fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    stranger = fake.add_user("mallory")
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url):
        await fake.user_says("let me in", user=stranger)
        await fake.user_says("in the channel too", user=stranger, chat="general", mention=True)
        await fake.user_says("hi")
        await wait_said(fake, fake.dm_channel()["id"], "echo: hi")
    assert said(fake, fake.dm_channel(stranger)["id"]) == [] and said(fake, fake.general) == []
