"""Approval questions on Discord: the real adapter and discord.py against ``FakeDiscord``.

The question is a message with three buttons where the answer goes; a press comes back over the
gateway as an interaction, is acknowledged (type 6) well within Discord's 3 s, and reaches the router
as the command a person could type, from the presser. "Nothing was dispatched" is proven by ordering:
a later real press arrives alone.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from adapters.approvals import APPROVAL_CHOICES, ApprovalPrompt, approval_data
from adapters.base import AdapterError, ChatType, Disposition, InboundMessage, OutboundMessage
from adapters.discord import DiscordAdapter
from tests.emulators.fake_discord import FakeDiscord, Press

from .test_stream import asked, connected

WAIT = 15.0
PROMPT = ApprovalPrompt("ab12CD34", "Run `rm -rf build/`? (terminal) — answer within 5 minutes")


def buttons(fake: FakeDiscord, message_id: str) -> list[dict[str, Any]]:
    [row] = fake.find_message(message_id)["components"]
    assert row["type"] == 1
    return list(row["components"])


async def pressed(fake: FakeDiscord, inbound: list[InboundMessage], message_id: str, custom_id: str,
                  **kw: Any) -> tuple[Press, InboundMessage]:
    """A press, acknowledged, and the message the router got for it."""
    press = await fake.user_presses(message_id, custom_id, **kw)
    await fake.wait_for(lambda: inbound, WAIT, what="the press at the router")
    assert press.response_type == 6 and not press.failed
    return press, inbound.pop(0)


async def ask(adapter: DiscordAdapter, target: OutboundMessage, prompt: ApprovalPrompt = PROMPT) -> str:
    message_id = await adapter.send_approval(target, prompt)
    assert message_id is not None
    return message_id


async def test_the_question_shows_three_buttons_in_the_dm_and_a_press_becomes_the_command() -> None:
    async with FakeDiscord() as fake, connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "clean up the build")
        message_id = await ask(adapter, target)
        question = fake.find_message(message_id)
        assert question["channel_id"] == target.chat_id and question["content"] == PROMPT.text
        shown = buttons(fake, message_id)
        assert [(b["style"], b["label"], b["custom_id"]) for b in shown] == [
            (style, label, approval_data(PROMPT.approval_id, choice))
            for style, (choice, label) in zip((3, 2, 4), APPROVAL_CHOICES, strict=True)]
        assert all(len(b["custom_id"]) <= 100 for b in shown)

        seen_acked: list[bool] = []
        take = adapter._handler
        assert take is not None

        async def checking(message: InboundMessage) -> Any:
            # The press was acknowledged before the router saw it.
            seen_acked.append(all(p.response_type is not None for p in fake.presses))
            return await take(message)

        adapter.bind(checking)
        expected = {"approve": "/approve ab12CD34", "always": "/approve always ab12CD34", "deny": "/deny ab12CD34"}
        for choice, text in expected.items():
            press, msg = await pressed(fake, inbound, message_id, approval_data(PROMPT.approval_id, choice))
            assert msg.text == text
            assert (msg.chat_id, msg.chat_type, msg.thread_id) == (target.chat_id, ChatType.DM, None)
            assert msg.user_id == fake.user["id"] and msg.addressed
            assert msg.dedupe_id == f"interaction:{press.id}" and msg.message_id == message_id
            assert press.acked_after is not None and press.acked_after < 1.0
        assert seen_acked == [True, True, True]


async def test_in_a_thread_the_question_goes_to_the_thread_and_the_press_comes_from_another_user() -> None:
    async with FakeDiscord() as fake, connected(fake, auto_thread=True) as (adapter, inbound):
        target = await asked(fake, inbound, "deploy it", chat="general", mention=True)
        assert target.thread_id is not None  # a prospective thread, opened by the question
        message_id = await ask(adapter, target)
        assert fake.find_message(message_id)["channel_id"] == target.thread_id
        assert [t["id"] for t in fake.threads] == [target.thread_id]
        bob = fake.add_user("bob")
        press, msg = await pressed(fake, inbound, message_id, approval_data(PROMPT.approval_id, "deny"), user=bob)
        assert msg.text == "/deny ab12CD34" and msg.user_id == bob["id"]
        assert (msg.chat_type, msg.chat_id, msg.thread_id) == (ChatType.THREAD, fake.general, target.thread_id)
        assert msg.dedupe_id == f"interaction:{press.id}"
        # A payload without the channel object: where the channel sits comes from discord.py's cache.
        _, msg = await pressed(fake, inbound, message_id, approval_data(PROMPT.approval_id, "always"),
                               extra={"channel": None})
        assert (msg.chat_type, msg.chat_id, msg.thread_id) == (ChatType.THREAD, fake.general, target.thread_id)


async def test_a_press_in_a_channel_keys_the_channel() -> None:
    async with FakeDiscord() as fake, connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "go", chat="general", mention=True)
        message_id = await ask(adapter, target)
        assert fake.find_message(message_id)["message_reference"]["message_id"] == target.reply_to
        _, msg = await pressed(fake, inbound, message_id, approval_data(PROMPT.approval_id, "approve"))
        assert (msg.chat_type, msg.chat_id, msg.thread_id) == (ChatType.CHANNEL, fake.general, None)


async def test_a_foreign_button_is_acknowledged_and_ignored() -> None:
    async with FakeDiscord() as fake, connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "x")
        message_id = await ask(adapter, target)
        foreign = await fake.user_presses(message_id, "poll:vote:3", stale=True)
        close = await fake.user_presses(message_id, "apv:maybe:ab12CD34", stale=True)
        await fake.wait_for(lambda: foreign.response_type and close.response_type, WAIT, what="the acks")
        _, msg = await pressed(fake, inbound, message_id, approval_data(PROMPT.approval_id, "always"))
        assert msg.text == "/approve always ab12CD34" and not inbound
        assert foreign.response_type == close.response_type == 6


async def test_settle_shows_the_outcome_without_buttons_and_a_stale_press_still_reaches_the_router() -> None:
    async with FakeDiscord() as fake, connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "x")
        message_id = await ask(adapter, target)
        await adapter.settle_approval(target, message_id, "✅ Approved by alice")
        question = fake.find_message(message_id)
        assert question["content"] == "✅ Approved by alice" and question["components"] == []
        with pytest.raises(AssertionError):
            await fake.user_presses(message_id, approval_data(PROMPT.approval_id, "deny"))  # no button now
        _, msg = await pressed(fake, inbound, message_id, approval_data(PROMPT.approval_id, "deny"), stale=True)
        assert msg.text == "/deny ab12CD34"  # the gateway says it is settled
        # A question deleted meanwhile is nothing to settle; another failure is the adapter's error.
        await adapter.settle_approval(target, "123456789", "gone")
        fake.fail_next("edit_message", 403, "Missing Access")
        with pytest.raises(AdapterError):
            await adapter.settle_approval(target, message_id, "again")


async def test_a_press_after_a_restart_reaches_the_new_adapter() -> None:
    async with FakeDiscord() as fake:
        async with connected(fake) as (adapter, inbound):
            target = await asked(fake, inbound, "x")
            message_id = await ask(adapter, target)
        async with connected(fake) as (_, inbound):
            press, msg = await pressed(fake, inbound, message_id, approval_data(PROMPT.approval_id, "approve"))
            assert msg.text == "/approve ab12CD34" and msg.dedupe_id == f"interaction:{press.id}"


async def test_a_long_question_is_cut_to_discords_limit() -> None:
    async with FakeDiscord() as fake, connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "x")
        message_id = await ask(adapter, target, ApprovalPrompt("Z" * 32, "y" * 2500))
        content = fake.find_message(message_id)["content"]
        assert len(content) == 2000 and content.endswith("…")
        assert max(len(b["custom_id"]) for b in buttons(fake, message_id)) == len("apv:approve:") + 32 <= 100


MALFORMED: list[Any] = [
    {"type": 3},
    {"type": 3, "id": "not-a-snowflake", "token": "t"},
    {"type": 3, "id": "123", "token": 5},
    {"type": 3, "id": "124", "token": "t", "data": "junk"},
    {"type": 3, "id": "125", "token": "t", "data": {"custom_id": 7}},
    {"type": 3, "id": "126", "token": "t", "data": {"custom_id": "apv:approve:ab12CD34"}},  # no user, no channel
    {"type": 3, "id": "127", "token": "t", "data": {"custom_id": "apv:deny:ab12CD34"}, "channel_id": "1",
     "user": {"id": ["x"]}},
    {"type": 2, "id": "128", "token": "t", "data": {"name": "cmd"}},
    {"type": "3", "id": "129", "token": "t"},
    [],
    "junk",
]


async def test_malformed_interactions_crash_nothing() -> None:
    async with FakeDiscord() as fake, connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "x")
        message_id = await ask(adapter, target)
        identifies = len(fake.identifies)
        for payload in MALFORMED:
            await fake.dispatch("INTERACTION_CREATE", payload)
        # A press whose presser is unreadable (but whose id and token are fine) is acknowledged, not dispatched.
        odd = await fake.user_presses(message_id, approval_data(PROMPT.approval_id, "approve"),
                                      extra={"user": None, "member": {"user": {"id": None}}})
        await fake.wait_for(lambda: odd.response_type, WAIT, what="the ack of the odd press")
        _, msg = await pressed(fake, inbound, message_id, approval_data(PROMPT.approval_id, "deny"))
        assert msg.text == "/deny ab12CD34" and not inbound
        assert adapter.health == "live" and len(fake.identifies) == identifies


async def test_a_replayed_press_is_one_press_for_the_router() -> None:
    async with FakeDiscord() as fake, connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "x")
        message_id = await ask(adapter, target)
        press, first = await pressed(fake, inbound, message_id, approval_data(PROMPT.approval_id, "approve"))
        await fake.dispatch("INTERACTION_CREATE", press.payload)  # as a RESUME replays it
        await fake.wait_for(lambda: inbound, WAIT, what="the replay at the router")
        again = inbound.pop(0)
        assert again.dedupe_id == first.dedupe_id  # the router's dedupe makes it one
        assert press.responses == [(6, 200), (6, 400)]  # the second ack met 40060, nothing broke


async def test_the_ack_does_not_wait_for_a_busy_router() -> None:
    async with FakeDiscord() as fake, connected(fake) as (adapter, inbound):
        target = await asked(fake, inbound, "x")
        message_id = await ask(adapter, target)
        release = asyncio.Event()

        async def busy(message: InboundMessage) -> Disposition:
            inbound.append(message)
            await release.wait()  # the router is slow to take it
            return Disposition.ACCEPTED

        adapter.bind(busy)
        first = await fake.user_presses(message_id, approval_data(PROMPT.approval_id, "approve"))
        second = await fake.user_presses(message_id, approval_data(PROMPT.approval_id, "deny"))
        await fake.wait_for(lambda: first.response_type and second.response_type, WAIT, what="both acks")
        release.set()
        await fake.wait_for(lambda: len(inbound) == 2, WAIT, what="both presses at the router")
        assert [m.text for m in inbound] == ["/approve ab12CD34", "/deny ab12CD34"]  # in order
        assert not first.failed and not second.failed
