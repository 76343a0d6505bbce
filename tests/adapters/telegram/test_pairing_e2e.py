"""Pairing on Telegram through the whole daemon: a stranger's DM gets a code, the owner approves it
with ``hermes-gateway pairing approve`` (the control socket of the running daemon), the stranger is
welcomed and chats. Another bot account (another token on the same home) does not take that
approval. Once an allowlist exists a stranger gets nothing; the limits and the lockout; the code
is never in a log nor in state.db in clear."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapters.base import ChatType, InboundMessage
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .._pairing import code_in, console, nowhere_in_clear, pairing_cli
from ..conftest import rows, run_telegram_gateway

WAIT = 20.0
OPEN = {"TELEGRAM_ALLOWED_USERS": ""}  # no allowlist: strangers may pair
DEBUG = {"logging": {"level": "debug"}}


def said(fake: FakeTelegram, chat_id: int) -> list[str]:
    return [s["rendered"] for s in fake.sent if s["method"] == "sendMessage" and s["chat_id"] == chat_id]


async def wait_said(fake: FakeTelegram, chat_id: int, part: str, n: int = 1) -> str:
    """The ``n``-th message the bot sent in ``chat_id`` holding ``part``."""
    def found() -> str | None:
        hits = [t for t in said(fake, chat_id) if part in t]
        return hits[n - 1] if len(hits) >= n else None

    result: str = await fake.wait_for(found, WAIT, what=f"message {n} with {part!r} in {chat_id}")
    return result


async def code_for(fake: FakeTelegram, user: dict[str, Any], text: str = "hello?") -> str:
    await fake.user_says(text, user=user)
    return code_in(await wait_said(fake, user["id"], "pairing code is"))


async def test_stranger_pairs_through_the_cli_and_then_chats(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    stranger = fake.add_user("Stranger", username="stranger")
    group = fake.group("Team")
    async with run_telegram_gateway(home, fake, fake_openai.base_url, env=OPEN, config=DEBUG) as gw:
        await fake.user_says("anyone here?", user=stranger, chat=group)  # groups: never answered
        code = await code_for(fake, stranger, "hello, who are you?")
        assert fake_openai.chat_requests == []  # no turn for a stranger
        listed = await pairing_cli(home, "list")
        assert listed.code == 0 and f"telegram: {stranger['id']} Stranger" in listed.out
        assert code not in listed.out
        r = await pairing_cli(home, "approve", code.lower())  # typed in any case
        assert r.code == 0, r.err
        assert f"Approved Stranger ({stranger['id']}) on telegram." in r.out and "now the owner" in r.out
        assert "welcomed" in r.out
        await wait_said(fake, stranger["id"], "You're in")
        await fake.user_says("now hi", user=stranger)
        await wait_said(fake, stranger["id"], "echo: now hi")
        assert gw.gateway.services is not None
        assert gw.gateway.services.owners.is_owner("telegram", str(stranger["id"]))
        again = await pairing_cli(home, "approve", code)
        assert again.code == 1 and "already approved" in again.err
        listed_json = json.loads((await pairing_cli(home, "list", "--json")).out)
        assert [u["user_id"] for u in listed_json["paired"]] == [str(stranger["id"])]
        assert listed_json["owners"]["telegram"] == [str(stranger["id"])]
        status = await console(home, "status")
        assert status.code == 0 and f"Owners: telegram {stranger['id']}" in status.out
        await fake.user_says("/status", user=stranger)
        await wait_said(fake, stranger["id"], "You are an owner of this bot")
    doctor = await console(home, "doctor")
    assert f"owners telegram: {stranger['id']} (first approved by pairing)" in doctor.out
    assert "allowlist telegram: 1 user id(s) let in by pairing" in doctor.out
    assert "permissions pairing.key: 0600" in doctor.out
    # The approval outlives the daemon: the stranger is let in after a restart too.
    async with run_telegram_gateway(home, fake, fake_openai.base_url, env=OPEN, config=DEBUG):
        await fake.user_says("after restart", user=stranger)
        await wait_said(fake, stranger["id"], "echo: after restart")
    out = capsys.readouterr()
    assert said(fake, group["id"]) == []
    assert "auth.refused" in out.out and "pairing code given" in out.out
    assert "hello, who are you?" not in out.out  # never a refused message's text
    nowhere_in_clear(home, code, out.out, out.err, r.out, r.err, listed.out)
    stored = rows(home / "state.db", "SELECT platform, account_id, user_id FROM gateway_pairing_allowed")
    assert stored == [("telegram", str(fake.bot_id), str(stranger["id"]))]


async def test_another_bot_account_does_not_take_the_approval(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home = tmp_path / "h"
    async with FakeTelegram("111111:AAAA-first-bot") as first:
        s1, s2 = first.add_user("One"), first.add_user("Two")
        async with run_telegram_gateway(home, first, fake_openai.base_url, env=OPEN):
            code1, code2 = await code_for(first, s1), await code_for(first, s2)
            assert (await pairing_cli(home, "approve", code1)).code == 0
            await first.user_says("hi", user=s1)
            await wait_said(first, s1["id"], "echo: hi")
    async with FakeTelegram("222222:BBBB-second-bot") as second:
        t1, t2 = second.add_user("One"), second.add_user("Two")
        assert (t1["id"], t2["id"]) == (s1["id"], s2["id"])  # the same people
        async with run_telegram_gateway(home, second, fake_openai.base_url, env=OPEN):
            # The first bot's approval lets nobody in here: One is a stranger to this bot.
            await code_for(second, t1, "hi again")
            assert not [t for t in said(second, t1["id"]) if "echo:" in t]
            r = await pairing_cli(home, "approve", code2)  # a code the first bot gave
            assert r.code == 1 and "another telegram bot account" in r.err
            await second.user_says("still me", user=t2)
            await wait_said(second, t2["id"], "pairing code is")
            assert fake_openai.chat_requests and all(
                req.body["messages"][-1]["content"] == "hi" for req in fake_openai.chat_requests)


async def test_strangers_get_nothing_once_an_allowlist_exists(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = fake_telegram
    mallory = fake.add_user("Mallory")
    group = fake.group("Team")
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, config={"logging": {"level": "info"}}):
        for i in range(6):
            await fake.user_says(f"let me in {i}", user=mallory)
        await fake.user_says("me too", user=mallory, chat=group)
        await fake.user_says("hi")  # the allowlisted user, after: proves mallory's were handled
        await wait_said(fake, fake.user["id"], "echo: hi")
    assert said(fake, mallory["id"]) == [] and said(fake, group["id"]) == []
    out = capsys.readouterr().out
    refusals = [line for line in out.splitlines() if "auth.refused" in line and str(mallory["id"]) in line]
    # One line per refusal, a few a minute per sender at most; the rest are counted into the next.
    assert 1 <= len(refusals) <= 3 and all("not in allowlist" in line for line in refusals)
    assert "let me in" not in out


async def test_limits_lockout_and_what_owners_and_others_are_told(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    owner, friend = fake.user, fake.add_user("Friend")
    strangers = [fake.add_user(f"S{i}") for i in range(4)]
    env = {"TELEGRAM_ALLOWED_USERS": f"{owner['id']},{friend['id']}"}
    # An allowlist exists: strangers get a code only because unknown_dm says so.
    config = {"auth": {"owners": [str(owner["id"])], "unknown_dm": "pair"}}
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, env=env, config=config):
        codes = [await code_for(fake, s) for s in strangers[:3]]
        assert len(set(codes)) == 3
        # At most one code per sender per 10 minutes: a second message gets nothing.
        await fake.user_says("again?", user=strangers[0])
        # Three codes wait for this bot: the fourth stranger is told to come back later.
        await fake.user_says("me?", user=strangers[3])
        await wait_said(fake, strangers[3]["id"], "can't take more pairing requests")
        await fake.user_says("/pair list")
        listing = await wait_said(fake, owner["id"], "Waiting for approval (3)")
        assert all(c not in listing for c in codes)
        assert len(said(fake, strangers[0]["id"])) == 1

        async def owner_says(text: str, expect: str, n: int = 1) -> str:
            await fake.user_says(text)
            return await wait_said(fake, owner["id"], expect, n)

        await fake.user_says("/pair approve " + codes[0], user=friend)
        await wait_said(fake, friend["id"], "Only an owner of this bot can use /pair")
        await owner_says("/pair approve 12", "That is not a pairing code")
        for n in range(1, 6):  # five wrong approvals lock the codes they could have meant
            await owner_says("/pair approve ZZZZ-ZZZZ", "No pairing code like that", n)
        await owner_says(f"/pair approve {codes[1]}", "locked after 5 wrong approvals")
        assert not [t for t in said(fake, strangers[1]["id"]) if "You're in" in t]
        r = await pairing_cli(tmp_path / "h", "approve", codes[2])
        assert r.code == 1 and "locked" in r.err


async def test_without_a_daemon_the_cli_writes_state_db_and_the_welcome_waits_for_the_next_start(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    stranger, other = fake.add_user("Stranger"), fake.add_user("Other")
    async with run_telegram_gateway(home, fake, fake_openai.base_url, env=OPEN):
        code = await code_for(fake, stranger)
        other_code = await code_for(fake, other)
    listed = await pairing_cli(home, "list")
    assert listed.code == 0 and "Waiting for approval (2)" in listed.out and "not running" in listed.err
    assert (await pairing_cli(home, "approve", "not-a-code")).code == 1
    r = await pairing_cli(home, "approve", code)
    assert r.code == 0 and "Approved Stranger" in r.out and "now the owner" in r.out
    assert "not running" in r.err and "goes out when the daemon runs" in r.out
    d = await pairing_cli(home, "deny", other_code)
    assert d.code == 0 and "Refused Other" in d.out
    async with run_telegram_gateway(home, fake, fake_openai.base_url, env=OPEN) as gw:
        await wait_said(fake, stranger["id"], "You're in")  # the welcome the CLI left in the ledger
        await fake.user_says("hello now", user=stranger)
        await wait_said(fake, stranger["id"], "echo: hello now")
        revoked = await pairing_cli(home, "revoke", f"telegram:{stranger['id']}")
        assert revoked.code == 0 and "no longer an owner" in revoked.out
        assert gw.gateway.runtime is not None
        msg = InboundMessage("telegram", str(stranger["id"]), ChatType.DM, str(stranger["id"]), "x")
        assert not gw.gateway.runtime.authorizer.check(msg).allowed
        data = json.loads((await pairing_cli(home, "list", "--json")).out)
        assert data["paired"] == [] and data["owners"]["telegram"] == []
    assert not [t for t in said(fake, other["id"]) if "You're in" in t]  # refused: never welcomed
    bad = await pairing_cli(home, "revoke", "nowhere:1")
    assert bad.code == 1 and "PLATFORM:ID" in bad.err


async def test_an_owner_approves_in_the_chat_and_revokes(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    owner, stranger = fake.user, fake.add_user("Newcomer")
    config = {"auth": {"owners": [f"telegram:{owner['id']}"], "unknown_dm": {"telegram": "pair"}}}
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, env=OPEN, config=config):
        code = await code_for(fake, stranger)
        await fake.user_says(f"/pair approve {code}")
        await wait_said(fake, owner["id"], f"✅ Approved Newcomer ({stranger['id']}) on telegram.")
        await wait_said(fake, stranger["id"], "You're in")
        await fake.user_says("thanks", user=stranger)
        await wait_said(fake, stranger["id"], "echo: thanks")
        await fake.user_says("/pair list")
        listing = await wait_said(fake, owner["id"], "Let in by pairing (1)")
        assert f"telegram: {stranger['id']} Newcomer" in listing and f"telegram: {owner['id']}" in listing
        await fake.user_says(f"/pair revoke {stranger['id']}")
        await wait_said(fake, owner["id"], f"✅ {stranger['id']} may no longer talk to this bot on telegram.")
        await fake.user_says("/pair", user=stranger)  # a stranger again: the refusal path, no command
        await fake.user_says("/pair approve")
        await wait_said(fake, owner["id"], "Name the code: /pair approve CODE")
    assert not [t for t in said(fake, stranger["id"]) if "Only an owner" in t or "Waiting" in t]
    assert [t for t in said(fake, stranger["id"]) if "echo:" in t] == ["echo: thanks"]
