"""Approval questions on Slack: the real adapter (slack-bolt, slack-sdk) against ``FakeSlack``, in Socket
Mode and in HTTP mode.

The question is a Block Kit message with three buttons in the answer's channel and thread; a press
comes back as a ``block_actions`` payload, is acknowledged (the envelope's ack, or the HTTP 200) and
reaches the router as the command a person could type, from the presser. "Nothing was dispatched" is
proven by ordering: a later real press arrives alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from adapters.approvals import APPROVAL_CHOICES, ApprovalPrompt, approval_data
from adapters.base import ChatType, Disposition, InboundMessage, OutboundMessage
from adapters.slack import SlackAdapter, SlackSettings
from tests.emulators.fake_slack import BOT_TOKEN, SIGNING_SECRET, FakeSlack
from tests.gateway.conftest import free_port

from .test_stream import CHANNEL, DM, asked, connected

WAIT = 10.0
PROMPT = ApprovalPrompt("ab12CD34", "Run `rm -rf build/` <in the repo>? (terminal)")
BOB = "U0BOB0001"


@asynccontextmanager
async def connected_http(fake: FakeSlack) -> AsyncIterator[tuple[SlackAdapter, list[InboundMessage]]]:
    """The adapter in HTTP mode, its route on a server of its own; the fake posts there."""
    adapter = SlackAdapter(SlackSettings(bot_token=BOT_TOKEN, signing_secret=SIGNING_SECRET, mode="http",
                                         api_base_url=fake.api_base_url, thinking_placeholder=False))
    got: list[InboundMessage] = []

    async def accept(message: InboundMessage) -> Disposition:
        got.append(message)
        return Disposition.ACCEPTED

    adapter.bind(accept)
    app = web.Application()
    adapter.add_routes(app)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    fake.events_url = f"http://127.0.0.1:{port}/slack/events"
    task = asyncio.create_task(adapter.connect())
    try:
        await asyncio.wait_for(adapter.ready.wait(), WAIT)
        yield adapter, got
    finally:
        await adapter.disconnect()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, WAIT)
        await runner.cleanup()


async def ask(adapter: SlackAdapter, target: OutboundMessage) -> str:
    ts = await adapter.send_approval(target, PROMPT)
    assert ts is not None
    return ts


async def pressed(fake: FakeSlack, got: list[InboundMessage], channel: str, ts: str, choice: str,
                  **kw: Any) -> tuple[dict[str, Any], InboundMessage]:
    """A press, acknowledged within Slack's 3 s, and the message the router got for it."""
    press = await fake.user_presses(channel, ts, f"hermes_approval_{choice}", **kw)
    if "envelope_id" in press:
        await fake.wait_ack(press["envelope_id"], 3.0)
        assert time.monotonic() - press["sent_at"] < 3.0
    else:
        assert press["status"] == 200
    await fake.wait_for(lambda: got, WAIT, what="the press at the router")
    return press, got.pop(0)


def shown(fake: FakeSlack, channel: str, ts: str) -> dict[str, Any]:
    return fake.messages[(channel, ts)]


async def test_the_question_has_three_buttons_and_each_press_becomes_its_command() -> None:
    async with FakeSlack() as fake, connected(fake) as (adapter, got):
        target = await asked(fake, got, "clean up", chat=DM)
        got.clear()
        ts = await ask(adapter, target)
        message = shown(fake, DM, ts)
        assert message.get("thread_ts") is None
        assert "/approve ab12CD34" in message["text"] and "&lt;in the repo&gt;" in message["text"]
        section, actions = message["blocks"]
        assert section["type"] == "section" and section["text"]["text"] == PROMPT.text
        assert actions["type"] == "actions"
        assert [(b["action_id"], b["value"], b["text"]["text"], b.get("style")) for b in actions["elements"]] == [
            (f"hermes_approval_{choice}", approval_data(PROMPT.approval_id, choice), label, style)
            for style, (choice, label) in zip(("primary", None, "danger"), APPROVAL_CHOICES, strict=True)]

        expected = {"approve": "/approve ab12CD34", "always": "/approve always ab12CD34", "deny": "/deny ab12CD34"}
        for choice, text in expected.items():
            press, msg = await pressed(fake, got, DM, ts, choice, user=BOB)
            action_ts = press["payload"]["actions"][0]["action_ts"]
            assert msg.text == text and msg.user_id == BOB and msg.addressed
            assert (msg.chat_id, msg.chat_type, msg.thread_id, msg.message_id) == (DM, ChatType.DM, None, ts)
            assert msg.dedupe_id == f"action:{BOB}:{action_ts}"


async def test_the_ack_does_not_wait_for_the_router() -> None:
    async with FakeSlack() as fake, connected(fake) as (adapter, got):
        target = await asked(fake, got, "x", chat=DM)
        got.clear()
        ts = await ask(adapter, target)
        release = asyncio.Event()

        async def slow(message: InboundMessage) -> Disposition:
            got.append(message)
            await release.wait()  # a router busy with something else
            return Disposition.ACCEPTED

        adapter.bind(slow)
        press = await fake.user_presses(DM, ts, "hermes_approval_approve")
        await fake.wait_ack(press["envelope_id"], 3.0)
        await fake.wait_for(lambda: got, WAIT, what="the press at the router")
        release.set()
        assert got[0].text == "/approve ab12CD34"


async def test_in_a_channel_the_question_and_its_press_are_in_the_thread() -> None:
    async with FakeSlack() as fake, connected(fake) as (adapter, got):
        target = await asked(fake, got, "deploy", chat=CHANNEL)
        got.clear()
        assert target.thread_id is not None
        ts = await ask(adapter, target)
        assert shown(fake, CHANNEL, ts)["thread_ts"] == target.thread_id
        _, msg = await pressed(fake, got, CHANNEL, ts, "deny", user=BOB)
        assert msg.text == "/deny ab12CD34" and msg.user_id == BOB
        assert (msg.chat_id, msg.chat_type, msg.thread_id) == (CHANNEL, ChatType.THREAD, target.thread_id)


async def test_settle_leaves_the_outcome_and_no_buttons_and_a_stale_press_still_reaches_the_router() -> None:
    async with FakeSlack() as fake, connected(fake) as (adapter, got):
        target = await asked(fake, got, "x", chat=CHANNEL)
        got.clear()
        ts = await ask(adapter, target)
        await adapter.settle_approval(target, ts, "✅ Approved by <@U0USER001>")
        message = shown(fake, CHANNEL, ts)
        assert [b["type"] for b in message["blocks"]] == ["section"]
        assert message["blocks"][0]["text"]["text"] == "✅ Approved by <@U0USER001>"
        assert message["text"] == "✅ Approved by &lt;@U0USER001&gt;"
        try:
            await fake.user_presses(CHANNEL, ts, "hermes_approval_deny")
        except AssertionError:
            pass
        else:
            raise AssertionError("a settled question still shows buttons")
        _, msg = await pressed(fake, got, CHANNEL, ts, "deny", stale=True,
                               value=approval_data(PROMPT.approval_id, "deny"))
        assert msg.text == "/deny ab12CD34"  # the gateway says it is settled
        await adapter.settle_approval(target, "1.000001", "gone")  # deleted meanwhile: nothing to do


async def test_a_press_after_a_restart_reaches_the_new_adapter() -> None:
    async with FakeSlack() as fake:
        async with connected(fake) as (adapter, got):
            target = await asked(fake, got, "x", chat=CHANNEL)
            got.clear()
            ts = await ask(adapter, target)
        async with connected(fake) as (_, got):
            _, msg = await pressed(fake, got, CHANNEL, ts, "approve")
            assert msg.text == "/approve ab12CD34" and msg.thread_id == target.thread_id


#: slack_sdk itself drops an envelope whose payload is not an object (or a string), unacknowledged and
#: logged, before any handler of ours; Slack sends none
NOT_OBJECTS: list[Any] = [[], None, 7]
MALFORMED: list[Any] = [
    "junk", {"type": "block_actions"}, {"type": "block_actions", "actions": "x"},
    {"type": "view_submission", "view": {}}, {"type": "shortcut"},
    {"type": "block_actions", "actions": [{"value": "apv:approve:ab12CD34"}]},  # no user, no channel
    {"type": "block_actions", "actions": [None, 3, {"value": 5}], "user": {"id": "U1"}, "channel": {"id": "C1"}},
    {"type": "block_actions", "actions": [{"value": "apv:approve:ab12CD34"}], "user": {"id": ["U1"]},
     "channel": "C1"},
]


async def test_foreign_and_malformed_payloads_are_acknowledged_and_ignored() -> None:
    async with FakeSlack() as fake, connected(fake) as (adapter, got):
        target = await asked(fake, got, "x", chat=CHANNEL)
        got.clear()
        ts = await ask(adapter, target)
        foreign = fake.press_payload(CHANNEL, ts, "hermes_approval_approve")
        foreign["actions"][0]["value"] = "poll:vote:3"
        records = [await fake.deliver_press(foreign)] + [await fake.deliver_press(p) for p in MALFORMED]
        for payload in NOT_OBJECTS:
            await fake.deliver_press(payload)
        for record in records:
            await fake.wait_ack(record["envelope_id"], 3.0)
        _, msg = await pressed(fake, got, CHANNEL, ts, "always")
        assert msg.text == "/approve always ab12CD34" and not got
        assert adapter.health == "live" and adapter.reconnects == 0


async def test_http_mode_signed_presses_only() -> None:
    async with FakeSlack() as fake, connected_http(fake) as (adapter, got):
        await fake.user_says("x", chat=CHANNEL, mention=True)
        await fake.wait_for(lambda: len(got) == 2, WAIT, what="the message and its app_mention at the router")
        asked_msg = got.pop(0)
        got.clear()
        target = OutboundMessage("slack", asked_msg.chat_id, "", asked_msg.thread_id, asked_msg.message_id)
        ts = await ask(adapter, target)
        forged = await fake.user_presses(CHANNEL, ts, "hermes_approval_approve", secret="not-the-secret")
        assert forged["status"] == 401
        odd = [await fake.deliver_press(p) for p in [*NOT_OBJECTS, *MALFORMED]]
        assert {r["status"] for r in odd} == {200}
        press, msg = await pressed(fake, got, CHANNEL, ts, "deny", user=BOB)
        assert msg.text == "/deny ab12CD34" and msg.user_id == BOB and not got  # the forged one never came
        assert msg.dedupe_id == f"action:{BOB}:{press['payload']['actions'][0]['action_ts']}"
        assert (msg.chat_id, msg.chat_type, msg.thread_id) == (CHANNEL, ChatType.THREAD, target.thread_id)
