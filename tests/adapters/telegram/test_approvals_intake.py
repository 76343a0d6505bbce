"""Button presses the daemon must survive or place right: presses through the webhook, in a forum
topic, of buttons that are not ours, without a message, malformed; the question's text verbatim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.approvals import approval_data
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import free_port

from .._approval_tool import approving_agents
from ..conftest import run_telegram_gateway
from .test_approvals_e2e import approval_id, touch, wait_prompt, wait_said, wait_settled

SECRET = "s3cret-Token_for-the-webhook-0123456789"
WAIT = 20.0


async def test_a_press_through_the_webhook_answers_and_a_forum_topic_keeps_its_question(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, marker = fake_telegram, tmp_path / "marker"
    forum = fake.forum("Forum")
    touch(fake_openai, marker, "Done in the topic.")
    port = free_port()
    async with run_telegram_gateway(
        tmp_path / "h", fake, fake_openai.base_url, port=port, agent_maker=approving_agents(),
        telegram={"mode": "webhook", "webhook_url": f"http://127.0.0.1:{port}/telegram/webhook",
                  "require_mention": False},
        env={"TELEGRAM_WEBHOOK_SECRET": SECRET},
    ):
        hook = fake.webhook
        assert hook is not None and "callback_query" in (hook["allowed_updates"] or [])
        await fake.user_says("touch it", chat=forum, thread=7)
        prompt = await wait_prompt(fake, forum["id"])
        assert prompt["thread_id"] == 7  # asked in the topic the question came from
        await fake.user_presses((forum, prompt["message_id"]), approval_data(approval_id(prompt), "approve"))
        await wait_settled(fake, forum["id"], prompt, "✅ Approved by Alice")
        answer = await wait_said(fake, forum["id"], "Done in the topic.")
        assert answer["thread_id"] == 7 and marker.exists()


async def test_presses_that_are_not_ours_or_broken_are_acknowledged_and_ignored(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    chat = fake.private_chat()
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, agent_maker=approving_agents()):
        fake_openai.reply("a message with someone else's button")
        await fake.user_says("hi")
        sent = await wait_said(fake, chat["id"], "someone else's button")
        alien: dict[str, Any] = {"id": "991", "from": fake.user, "chat_instance": "1", "data": "other:thing",
                                 "message": fake.message(chat, sent["message_id"])}
        await fake.raw_update({"callback_query": alien})
        await fake.raw_update({"callback_query": {**alien, "id": "992", "data": "apv:approve:abcd1234",
                                                  "message": None}})
        await fake.raw_update({"callback_query": {"id": 5, "data": ["not", "text"]}})
        await fake.raw_update({"callback_query": "nonsense"})
        # Ours, for a question nobody asked: a clear word, nothing else.
        await fake.raw_update({"callback_query": {**alien, "id": "993", "data": "apv:deny:abcd1234"}})
        await wait_said(fake, chat["id"], "No approval abcd1234 is waiting")
        await fake.wait_for(lambda: len(fake.calls_to("answerCallbackQuery")) >= 3, WAIT,
                            what="the presses to be acknowledged")
        fake_openai.reply("still serving")
        await fake.user_says("are you there?")
        await wait_said(fake, chat["id"], "still serving")


async def test_the_question_shows_the_action_verbatim_and_cuts_a_long_one(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    odd = tmp_path / "a_b*c`d[e].txt"
    long = tmp_path / ("x" * 900)
    fake_openai.reply_tool_calls([{"name": "touch", "arguments": {"path": str(odd)}}]).reply("one")
    fake_openai.reply_tool_calls([{"name": "touch", "arguments": {"path": str(long)}}]).reply("two")
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, agent_maker=approving_agents(),
                                    config={"tools": {"approval_timeout": 1}}):
        chat = fake.private_chat()["id"]
        await fake.user_says("touch the odd one")
        first = await wait_prompt(fake, chat)
        assert f"touch {odd}" in first["rendered"] and first["parse_mode"] is None
        await wait_said(fake, chat, "one")
        await fake.user_says("touch the long one")
        second = await wait_prompt(fake, chat, 2)
        assert "characters left out) …" in second["rendered"] and len(second["rendered"]) < 1500


async def test_two_questions_in_one_chat_are_listed_and_answered_by_id(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    bob = fake.add_user("Bob")
    group = fake.group()
    alice_marker, bob_marker = tmp_path / "alice", tmp_path / "bob"
    # Each person has a session of their own in the group, so both turns run and both ask.
    fake_openai.reply_tool_calls([{"name": "touch", "arguments": {"path": str(alice_marker)}}])
    fake_openai.reply_tool_calls([{"name": "touch", "arguments": {"path": str(bob_marker)}}])
    fake_openai.reply("answered")
    fake_openai.reply("answered")
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, agent_maker=approving_agents(),
                                    telegram={"require_mention": False},
                                    env={"TELEGRAM_ALLOWED_USERS": f"{fake.user['id']},{bob['id']}"}):
        await fake.user_says("touch mine", chat=group)
        first = await wait_prompt(fake, group["id"])
        await fake.user_says("touch mine too", chat=group, user=bob)
        second = await wait_prompt(fake, group["id"], 2)
        await fake.user_says("/approve", chat=group)
        listing = await wait_said(fake, group["id"], "2 approvals are waiting")
        assert approval_id(first) in listing["rendered"] and approval_id(second) in listing["rendered"]
        await fake.user_says(f"/deny {approval_id(second)}", chat=group)  # Bob's: not Alice's to answer
        await wait_said(fake, group["id"], "Only Bob can answer")
        await fake.user_says(f"/approve {approval_id(first)}", chat=group)
        await wait_settled(fake, group["id"], first, "✅ Approved by Alice")
        await fake.user_says(f"/deny {approval_id(second)}", chat=group, user=bob)
        await wait_settled(fake, group["id"], second, "⛔ Denied by Bob")
        await fake.wait_for(lambda: alice_marker.exists(), WAIT, what="Alice's marker")
        assert not bob_marker.exists()
