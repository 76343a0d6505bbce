"""Pairing on Slack through the whole daemon: a stranger's DM gets a code, the owner approves it
through the CLI (the running daemon's control socket), the stranger chats; the same app in another
workspace (another bot account) does not take that approval; with an allowlist a stranger gets
nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.emulators.fake_slack import FakeSlack
from tests.fakes.openai_server import FakeOpenAI

from .._pairing import code_in, nowhere_in_clear, pairing_cli, said, wait_said
from ..conftest import rows
from .test_adapter import USER, run_slack_gateway

OPEN = {"SLACK_ALLOWED_USERS": ""}
STRANGER, STRANGER_DM = "U0STRANGE1", "D0DM0002"


async def test_stranger_pairs_through_the_cli_and_then_chats(tmp_path: Path, fake_openai: FakeOpenAI,
                                                             fake_slack: FakeSlack,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    fake, home = fake_slack, tmp_path / "h"
    async with run_slack_gateway(home, fake, fake_openai.base_url, env=OPEN,
                                 config={"logging": {"level": "debug"}}) as gw:
        await fake.user_says("hello?", user=STRANGER, chat=STRANGER_DM)
        code = code_in(await wait_said(fake, STRANGER_DM, "pairing code is"))
        r = await pairing_cli(home, "approve", code)
        assert r.code == 0 and f"Approved {STRANGER} on slack." in r.out, r.err
        await wait_said(fake, STRANGER_DM, "You're in")
        await fake.user_says("now hi", user=STRANGER, chat=STRANGER_DM)
        await wait_said(fake, STRANGER_DM, "echo: now hi")
        assert gw.adapter.account_id == f"{fake.team_id}:U0BOT0001"
    assert rows(home / "state.db", "SELECT account_id, user_id FROM gateway_pairing_allowed") == [
        (f"{fake.team_id}:U0BOT0001", STRANGER)]
    logs = capsys.readouterr()
    assert "pairing code given" in logs.out
    nowhere_in_clear(home, code, r.out, r.err, logs.out, logs.err)


async def test_the_app_in_another_workspace_does_not_take_the_approval(tmp_path: Path,
                                                                       fake_openai: FakeOpenAI) -> None:
    home = tmp_path / "h"
    async with FakeSlack(team_id="T0FIRST01") as first:
        async with run_slack_gateway(home, first, fake_openai.base_url, env=OPEN):
            await first.user_says("hi", user=STRANGER, chat=STRANGER_DM)
            code1 = code_in(await wait_said(first, STRANGER_DM, "pairing code is"))
            await first.user_says("hi", user="U0OTHER01", chat="D0DM0003")
            code2 = code_in(await wait_said(first, "D0DM0003", "pairing code is"))
            assert (await pairing_cli(home, "approve", code1)).code == 0
    async with FakeSlack(team_id="T0SECOND2") as second:
        async with run_slack_gateway(home, second, fake_openai.base_url, env=OPEN):
            await second.user_says("hi again", user=STRANGER, chat=STRANGER_DM)
            await wait_said(second, STRANGER_DM, "pairing code is")  # a stranger to this bot account
            r = await pairing_cli(home, "approve", code2)
            assert r.code == 1 and "another slack bot account" in r.err
            assert not [t for t in said(second, STRANGER_DM) if "echo:" in t]
    assert fake_openai.chat_requests == []


async def test_a_stranger_gets_nothing_once_an_allowlist_exists(tmp_path: Path, fake_openai: FakeOpenAI,
                                                                fake_slack: FakeSlack) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url):
        await fake.user_says("let me in", user=STRANGER, chat=STRANGER_DM)
        await fake.user_says("here too", user=STRANGER, chat="C0GENERAL", mention=True)
        await fake.user_says("hi", user=USER)
        await wait_said(fake, "D0DM0001", "echo: hi")
    assert said(fake, STRANGER_DM) == [] and said(fake, "C0GENERAL") == []
