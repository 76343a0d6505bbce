"""Pairing on a real state.db: the codes, their limits and every way an approval can be wrong;
revoke and forget; who is an owner per bot account; who may answer a tool's question; and what a
refused DM gets (``auth.unknown_dm``), with refusals logged a few times a minute per sender."""

from __future__ import annotations

import re
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from adapters.base import ChatType, InboundMessage
from core.tools import ApprovalRequest
from gateway.config import ConfigError, load_config
from gateway.routing.approvals import Approvals
from gateway.routing.auth import Authorizer
from gateway.routing.owners import Owners
from gateway.routing.pairing import CODE_TTL, REQUEST_INTERVAL, Pairing
from gateway.routing.pairing_codes import ALPHABET, CodeKey, new_code, read_code
from storage import StateStore, pairing
from tests.gateway.conftest import write_config

CODE = re.compile(r"pairing code is ([A-Z2-9]{8})")


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


class World:
    """A store, owners and pairing, with the bot account each platform runs as (changeable)."""

    def __init__(self, store: StateStore, home: Path, owners: Owners | None = None) -> None:
        self.store, self.home = store, home
        self.accounts: dict[str, str | None] = {"telegram": "bot-A", "discord": "app-1", "slack": "T1:UB"}
        self.clock = Clock()
        self.owners = owners or Owners(accounts=self.accounts.get)
        self.pairing = Pairing(store, self.owners, home / "pairing.key", accounts=self.accounts.get,
                               clock=self.clock)

    async def code(self, user: str, platform: str = "telegram") -> str:
        reply, why = await self.pairing.request(dm(user, platform))
        assert reply is not None, why
        found = CODE.search(reply)
        assert found is not None
        return found.group(1)


def dm(user: str, platform: str = "telegram", text: str = "hi") -> InboundMessage:
    return InboundMessage(platform=platform, chat_id=f"dm-{user}", chat_type=ChatType.DM, user_id=user, text=text,
                          user_name=f"name-{user}")


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with StateStore(tmp_path / "state.db") as store:
        yield World(store, tmp_path)


def test_codes_are_eight_unambiguous_characters_and_read_back_forgivingly() -> None:
    codes = {new_code() for _ in range(500)}
    assert len(codes) == 500 and all(len(c) == 8 and set(c) <= set(ALPHABET) for c in codes)
    assert not set("01IOL") & set(ALPHABET)
    assert read_code(" abcd-2345 ") == "ABCD2345" and read_code("ABCD 2345") == "ABCD2345"
    for bad in ("", "ABCD234", "ABCD23456", "ABCD2340", "ABCDO345", "ÄBCD2345"):
        assert read_code(bad) is None, bad


def test_the_key_is_private_and_stable(tmp_path: Path) -> None:
    key = CodeKey(tmp_path / "pairing.key")
    first = key.hash("ABCD2345")
    assert stat.S_IMODE((tmp_path / "pairing.key").stat().st_mode) == 0o600
    assert CodeKey(tmp_path / "pairing.key").hash("ABCD2345") == first != key.hash("ABCD2346")
    assert CodeKey(tmp_path / "other.key").hash("ABCD2345") != first


async def test_nodes_sharing_hermes_pairing_key_approve_each_others_codes_and_write_no_key_file(
    tmp_path: Path
) -> None:
    """Several nodes over one database: the key comes from the common .env, so a code one node gave
    is approved through another; without it each home has its own key and the code is unknown there."""
    secret = "ab" * 32
    homes = [tmp_path / "n1", tmp_path / "n2"]
    for home in homes:
        write_config(home, {})
        (home / ".env").write_text(f"HERMES_PAIRING_KEY={secret}\n")
    keys = [load_config(home, environ={}).pairing_key for home in homes]
    assert keys[0] == keys[1] == bytes.fromhex(secret)
    async with StateStore(tmp_path / "state.db") as store:
        accounts = {"telegram": "bot-A"}.get
        giver = Pairing(store, Owners(accounts=accounts), homes[0] / "pairing.key", accounts=accounts, key=keys[0])
        other = Pairing(store, Owners(accounts=accounts), homes[1] / "pairing.key", accounts=accounts, key=keys[1])
        alone = Pairing(store, Owners(accounts=accounts), tmp_path / "alone" / "pairing.key", accounts=accounts)
        reply, _ = await giver.request(dm("u1"))
        found = CODE.search(reply or "")
        assert found is not None
        assert "No pairing code like that" in (await alone.approve(found.group(1), platform=None, by="cli")).message
        assert (await other.approve(found.group(1), platform=None, by="cli")).ok
    assert not any((home / "pairing.key").exists() for home in homes)


@pytest.mark.parametrize("value", ["abc", "zz" * 32, "ab" * 16])
def test_a_pairing_key_that_is_not_one_refuses_the_config_without_showing_it(tmp_path: Path, value: str) -> None:
    write_config(tmp_path, {})
    with pytest.raises(ConfigError) as refused:
        load_config(tmp_path, environ={"HERMES_PAIRING_KEY": value})
    assert "HERMES_PAIRING_KEY" in str(refused.value) and value not in str(refused.value)


async def test_a_code_is_approved_once_and_the_user_is_let_in_for_that_account_only(world: World) -> None:
    code = await world.code("u1")
    assert not world.pairing.is_allowed("telegram", "u1")
    outcome = await world.pairing.approve(code, platform=None, by="cli:root")
    assert outcome.ok and outcome.became_owner and outcome.code is not None and outcome.code.chat_id == "dm-u1"
    assert world.pairing.is_allowed("telegram", "u1") and world.owners.is_owner("telegram", "u1")
    world.accounts["telegram"] = "bot-B"  # the same home, another bot
    assert not world.pairing.is_allowed("telegram", "u1") and not world.owners.is_owner("telegram", "u1")
    world.accounts["telegram"] = "bot-A"
    again = await world.pairing.approve(code, platform=None, by="cli:root")
    assert not again.ok and "already approved" in again.message
    # A second person approved on the command line is let in, but the platform has its owner now.
    second = await world.pairing.approve(await world.code("u2"), platform=None, by="cli:root")
    assert second.ok and not second.became_owner and world.owners.of("telegram") == ["u1"]
    # Loaded again at the next start, from state.db alone.
    fresh = World(world.store, world.home)
    await fresh.pairing.load()
    assert fresh.pairing.is_allowed("telegram", "u2") and fresh.owners.of("telegram") == ["u1"]


async def test_every_wrong_approval_gets_a_clear_answer(world: World) -> None:
    tg = await world.code("u1")
    assert "not a pairing code" in (await world.pairing.approve("12", platform="telegram", by="o")).message
    assert "No pairing code like that" in (await world.pairing.approve("ZZZZZZZZ", platform="telegram",
                                                                       by="o")).message
    other = await world.pairing.approve(tg, platform="discord", by="o")
    assert not other.ok and "given on telegram, not here" in other.message
    world.accounts["telegram"] = "bot-B"
    moved = await world.pairing.approve(tg, platform="telegram", by="o")
    assert not moved.ok and "another telegram bot account" in moved.message
    cli = await world.pairing.approve(tg, platform=None, by="cli")
    assert not cli.ok and "another telegram bot account" in cli.message
    world.accounts["telegram"] = "bot-A"
    world.clock.now += CODE_TTL + 1
    expired = await world.pairing.approve(tg, platform="telegram", by="o")
    assert not expired.ok and "expired" in expired.message and not world.pairing.is_allowed("telegram", "u1")


async def test_five_wrong_approvals_lock_the_codes_waiting(world: World) -> None:
    code, elsewhere = await world.code("u1"), await world.code("d1", "discord")
    for _ in range(5):
        assert not (await world.pairing.approve("ZZZZZZZZ", platform="telegram", by="o")).ok
    locked = await world.pairing.approve(code, platform="telegram", by="o")
    assert not locked.ok and "locked after 5 wrong approvals" in locked.message
    # Guesses in a telegram chat never touch another platform's codes.
    assert (await world.pairing.approve(elsewhere, platform="discord", by="o")).ok
    # The locked person gets a new code by writing again, after the interval.
    world.clock.now += REQUEST_INTERVAL
    assert (await world.pairing.approve(await world.code("u1"), platform="telegram", by="o")).ok


async def test_one_code_per_sender_per_interval_and_three_waiting_per_account(world: World) -> None:
    first = await world.code("u1")
    assert await world.pairing.request(dm("u1")) == (None, "pairing code already given lately")
    await world.code("u2")
    await world.code("u3")
    full, why = await world.pairing.request(dm("u4"))
    assert full is not None and "can't take more" in full and why == "pairing requests full"
    assert await world.pairing.request(dm("u4")) == (None, "pairing requests full (told already)")
    await world.code("u4", "slack")  # another account has its own three
    world.clock.now += REQUEST_INTERVAL
    # u1's new code replaces the first (still three waiting: u1's new one takes its place).
    newer = await world.code("u1")
    replaced = await world.pairing.approve(first, platform=None, by="cli")
    assert not replaced.ok and "replaced by a newer one" in replaced.message
    denied = await world.pairing.deny(newer, platform="telegram", by="o")
    assert denied.ok and "Refused name-u1 (u1)" in denied.message and not world.pairing.is_allowed("telegram", "u1")
    codes, _users = await world.pairing.snapshot()
    assert sorted(c.user_id for c in codes) == ["u2", "u3", "u4"]


async def test_codes_are_kept_hashed_and_revoke_and_forget_remove_the_person(world: World) -> None:
    code = await world.code("u1")
    await world.pairing.approve(code, platform=None, by="cli")
    other = await world.code("u2")
    await world.pairing.approve(other, platform="telegram", by="o")
    dump = "\n".join(await world.store.read(lambda c: list(c.iterdump())))
    assert code not in dump and other not in dump

    assert await world.pairing.revoke("telegram", "u1") == (1, 1)
    assert not world.pairing.is_allowed("telegram", "u1") and not world.owners.has_any("telegram")
    assert world.pairing.is_allowed("telegram", "u2")
    assert await world.pairing.revoke("telegram", "nobody") == (0, 0)

    def forget(conn: Any) -> int:
        return pairing.forget_user(conn, "telegram", "u2")

    assert await world.store.write(forget) == 2  # u2's code and allowlist row
    left = await world.store.read(lambda c: c.execute(
        "SELECT user_id FROM gateway_pairing_codes UNION ALL SELECT user_id FROM gateway_pairing_allowed "
        "UNION ALL SELECT user_id FROM gateway_owners").fetchall())
    assert [tuple(r) for r in left] == [("u1",)]  # u1's code row stays until it is swept; u2 has nothing left


async def test_no_code_before_the_bot_account_is_known(world: World) -> None:
    world.accounts["telegram"] = None  # not connected yet
    assert await world.pairing.request(dm("u1")) == (None, "unknown sender or bot account")
    assert (await world.pairing.snapshot())[0] == []


def test_owners_recorded_for_one_bot_account_own_only_that_one() -> None:
    accounts: dict[str, str | None] = {"telegram": None}
    owners = Owners(["slack:U9"], accounts=accounts.get)
    owners.add("telegram", "1", "bot-A")
    owners.add("telegram", "2")  # any account
    assert owners.is_owner("telegram", "1") and owners.of("telegram") == ["1", "2"]  # not connected: all listed
    accounts["telegram"] = "bot-B"
    assert not owners.is_owner("telegram", "1") and owners.is_owner("telegram", "2")
    assert owners.is_owner("slack", "U9") and not owners.is_owner("discord", "U9")


async def test_owners_answer_tools_questions_on_their_platform() -> None:
    owners = Owners(["telegram:9"])
    approvals = Approvals(owners=owners)
    pending = approvals.open(ApprovalRequest(tool="terminal", action="rm x", reason="r", pattern="rm *"),
                             session_id="s", session_key="k", platform="telegram", chat_id="c", thread_id=None,
                             asker_id="1", asker_name="A", timeout=30)
    assert approvals.may_answer(pending, "telegram", "9") and not approvals.may_answer(pending, "telegram", "8")
    assert approvals.others("telegram") == " (or an owner)" and approvals.others("slack") == ""
    assert approvals.answer(pending.id, "approve", platform="telegram", user_id="9", user_name="O").status == \
        "answered"


def _authorizer(tmp_path: Path, world: World, config: dict[str, Any], env: dict[str, str] | None = None,
                clock: Clock | None = None) -> Authorizer:
    home = tmp_path / "cfg"
    write_config(home, config, env)
    return Authorizer(load_config(home, environ={}), ["telegram", "discord", "slack", "testchat"],
                      owners=world.owners, pairing=world.pairing, clock=clock or Clock())


async def test_unknown_dm_pairs_only_while_a_platform_has_nobody_unless_set(tmp_path: Path, world: World) -> None:
    auth = _authorizer(tmp_path, world, {}, {"DISCORD_ALLOWED_USERS": "5"})
    assert auth.unknown_dm("telegram") == "pair"
    assert auth.unknown_dm("discord") == "ignore"  # an allowlist exists
    assert auth.unknown_dm("testchat") == "ignore"  # no pairing on platforms without a bot account
    world.owners.add("telegram", "1", "bot-A")
    assert auth.unknown_dm("telegram") == "ignore"  # an owner exists
    assert auth.check(dm("1")).reason == "owner" and auth.check(dm("2")).reason == "not in allowlist"
    await world.pairing.approve(await world.code("u7", "slack"), platform="slack", by="o")
    assert auth.unknown_dm("slack") == "ignore" and auth.check(dm("u7", "slack")).reason == "paired"
    set_all = _authorizer(tmp_path, world, {"auth": {"unknown_dm": "pair"}}, {"DISCORD_ALLOWED_USERS": "5"})
    assert set_all.unknown_dm("discord") == "pair" and set_all.unknown_dm("telegram") == "pair"
    per = _authorizer(tmp_path, world, {"auth": {"unknown_dm": {"discord": "pair", "slack": "ignore"}}})
    assert (per.unknown_dm("discord"), per.unknown_dm("slack"), per.unknown_dm("telegram")) == \
        ("pair", "ignore", "ignore")


async def test_refusals_are_logged_a_few_times_a_minute_per_sender(tmp_path: Path, world: World) -> None:
    clock = Clock()
    auth = _authorizer(tmp_path, world, {}, clock=clock)
    msg = dm("mallory", text="secret words")
    with structlog.testing.capture_logs() as logs:
        for _ in range(10):
            auth.log_refusal(msg, auth.check(msg))
        auth.log_refusal(dm("eve"), auth.check(dm("eve")))
        clock.now += 60
        auth.log_refusal(msg, auth.check(msg))
    lines = [e for e in logs if e["event"] == "auth.refused"]
    assert [e["user_id"] for e in lines] == ["mallory"] * 3 + ["eve", "mallory"]
    assert [e.get("suppressed") for e in lines] == [None, None, None, None, 7]  # the 7 held back, counted
    assert all(e["platform"] == "telegram" and e["reason"] for e in lines)
    assert all("secret words" not in str(e) for e in logs)


async def test_a_forget_of_a_paired_owner_lets_them_in_no_more_in_state_db_or_in_memory(world: World) -> None:
    from gateway.userdata.forget import Forgetter

    await world.pairing.approve(await world.code("u1"), platform=None, by="cli")
    assert world.pairing.is_allowed("telegram", "u1") and world.owners.is_owner("telegram", "u1")
    forgetter = Forgetter(world.store, None, world.home, forgotten=world.pairing.forgotten)
    report = await forgetter.forget("telegram", "u1", requested_by="telegram:u1", forget_memory=False, vacuum=False)
    assert report.counts["pairing records"] == 3  # the code, the allowlist row, the recorded owner
    assert not world.pairing.is_allowed("telegram", "u1") and not world.owners.is_owner("telegram", "u1")
    left = await world.store.read(lambda c: c.execute(
        "SELECT count(*) FROM gateway_pairing_codes WHERE user_id = 'u1'").fetchone()[0]
        + c.execute("SELECT count(*) FROM gateway_pairing_allowed WHERE user_id = 'u1'").fetchone()[0]
        + c.execute("SELECT count(*) FROM gateway_owners WHERE user_id = 'u1'").fetchone()[0])
    assert left == 0
    fresh = World(world.store, world.home)
    await fresh.pairing.load()
    assert not fresh.pairing.is_allowed("telegram", "u1") and not fresh.owners.has_any("telegram")
