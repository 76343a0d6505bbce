"""Approvals through the whole daemon on Discord: a tool asks (``tests.adapters._approval_tool``),
FakeDiscord shows the question with three buttons, a person presses one (an ``INTERACTION_CREATE``),
and the tool runs or not; the question is edited into its outcome, its buttons gone.

In a channel (not a thread) every user has a session of their own, so a press from someone else
than the asker comes with another session key: the gateway finds the question by its id.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adapters.approvals import APPROVAL_CHOICES, ApprovalChoice, approval_data, parse_approval_data
from tests.emulators.fake_discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI

from .._approval_tool import QUIET_AGENT, REASON, approving_agents, tool_results, touch, waiting
from .test_adapter import RunningDiscord, run_discord_gateway

WAIT = 20.0


def gateway(tmp_path: Path, fake: FakeDiscord, fake_openai: FakeOpenAI, *, tools: dict[str, Any] | None = None,
            users: Sequence[dict[str, Any]] = (), **discord: Any) -> Any:
    allowed = ",".join([fake.user["id"], *(u["id"] for u in users)])
    return run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, agent_maker=approving_agents(),
                               discord=discord, env={"DISCORD_ALLOWED_USERS": allowed},
                               config={**QUIET_AGENT, "tools": tools or {}})


def approval_id(question: dict[str, Any]) -> str:
    parsed = parse_approval_data(question["components"][0]["components"][0]["custom_id"])
    assert parsed is not None
    return parsed[0]


def button(question: dict[str, Any], choice: ApprovalChoice) -> str:
    """The ``custom_id`` of a button of ``question`` (it still has them, or had: see ``wait_question``)."""
    return approval_data(question["approval_id"], choice)


async def wait_question(fake: FakeDiscord, channel: str) -> dict[str, Any]:
    """The approval question in ``channel`` (a bot message with buttons) as first shown, with its
    ``approval_id``."""
    def found() -> dict[str, Any] | None:
        return next((m for m in fake.channel_messages(channel)
                     if m["author"]["id"] == fake.bot["id"] and m.get("components")), None)

    shown: dict[str, Any] = await fake.wait_for(found, WAIT, what=f"an approval question in {channel}")
    return {**shown, "approval_id": approval_id(shown)}


async def wait_said(fake: FakeDiscord, channel: str, part: str) -> dict[str, Any]:
    """The bot's first message in ``channel`` that shows ``part`` (edits count)."""
    def found() -> dict[str, Any] | None:
        return next((m for m in fake.channel_messages(channel)
                     if m["author"]["id"] == fake.bot["id"] and part in m["content"]), None)

    result: dict[str, Any] = await fake.wait_for(found, WAIT, what=f"a message with {part!r} in {channel}")
    return result


async def wait_settled(fake: FakeDiscord, question: dict[str, Any], part: str) -> dict[str, Any]:
    """The question once edited to show ``part``; it has no buttons left."""
    def settled() -> dict[str, Any] | None:
        shown = fake.find_message(question["id"])
        return shown if part in shown["content"] else None

    result: dict[str, Any] = await fake.wait_for(settled, WAIT, what=f"the question edited to {part!r}")
    assert result["components"] == []
    return result


async def test_in_a_dm_the_asker_approves_and_the_tool_runs(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake, marker = fake_discord, tmp_path / "marker"
    touch(fake_openai, marker, "Done: the marker is written.")
    async with gateway(tmp_path, fake, fake_openai) as gw:
        running: RunningDiscord = gw
        asked = await fake.user_says("touch the marker please")
        dm = asked["channel_id"]
        question = await wait_question(fake, dm)
        [row] = question["components"]
        assert [(b["style"], b["label"]) for b in row["components"]] == [
            (style, label) for style, (_, label) in zip((3, 2, 4), APPROVAL_CHOICES, strict=True)]
        assert [b["custom_id"] for b in row["components"]] == [button(question, c) for c in ("approve", "always", "deny")]
        assert f"touch {marker}" in question["content"] and REASON in question["content"]
        assert "Alice" in question["content"] and "300 s" in question["content"]
        assert not marker.exists() and waiting(running.gateway) == 1
        press = await fake.user_presses(question["id"], button(question, "approve"))
        await wait_settled(fake, question, "✅ Approved by Alice")
        await wait_said(fake, dm, "Done: the marker is written.")
        assert marker.read_text() == f"approved by {fake.user['id']}\n"
        assert tool_results([r.body for r in fake_openai.chat_requests]) == [f"touched {marker}"]
        assert press.response_type == 6 and not press.failed
        # No reply of its own: the edited question says it.
        assert not [m for m in fake.channel_messages(dm) if "Approved" in m["content"] and m["id"] != question["id"]]
        assert waiting(running.gateway) == 0


async def test_deny_keeps_the_tool_from_running_and_the_model_hears_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake, marker = fake_discord, tmp_path / "marker"
    touch(fake_openai, marker, "Understood, I did not touch it.")
    async with gateway(tmp_path, fake, fake_openai):
        dm = (await fake.user_says("touch the marker"))["channel_id"]
        question = await wait_question(fake, dm)
        await fake.user_presses(question["id"], button(question, "deny"))
        await wait_settled(fake, question, "⛔ Denied by Alice")
        await wait_said(fake, dm, "Understood, I did not touch it.")
        assert not marker.exists()
        [result] = tool_results([r.body for r in fake_openai.chat_requests])
        assert "Not done" in result and "did not approve" in result and "denied by" in result


async def test_in_a_channel_another_user_is_refused_then_the_asker_approves_and_a_second_press_is_late(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake, marker = fake_discord, tmp_path / "marker"
    bob = fake.add_user("bob")
    touch(fake_openai, marker)
    async with gateway(tmp_path, fake, fake_openai, users=[bob]) as gw:
        running: RunningDiscord = gw
        asked = await fake.user_says("touch the marker", chat="general", mention=True)
        question = await wait_question(fake, fake.general)
        assert question["message_reference"]["message_id"] == asked["id"]  # under the message that asked
        # Bob's press: another user, so another session key in this channel.
        bobs = await fake.user_presses(question["id"], button(question, "approve"), user=bob)
        refusal = await wait_said(fake, fake.general, "Only Alice can answer")
        assert "still waiting" in refusal["content"] and bobs.response_type == 6
        assert refusal["message_reference"]["message_id"] == question["id"]
        assert fake.find_message(question["id"])["components"] != [] and not marker.exists()
        assert waiting(running.gateway) == 1
        await fake.user_presses(question["id"], button(question, "approve"))
        await wait_settled(fake, question, "✅ Approved by Alice")
        await wait_said(fake, fake.general, "Done.")
        assert marker.exists()
        # A client that had not seen the edit presses again; Bob too.
        await fake.user_presses(question["id"], button(question, "deny"), stale=True)
        late = await wait_said(fake, fake.general, "already answered")
        assert "Approved by Alice" in late["content"]
        await fake.user_presses(question["id"], button(question, "approve"), user=bob, stale=True)
        await fake.wait_for(lambda: len([m for m in fake.channel_messages(fake.general)
                                         if "already answered" in m["content"]]) == 2, WAIT, what="Bob told too")
        assert len(marker.read_text().splitlines()) == 1 and waiting(running.gateway) == 0
        assert all(not p.failed for p in fake.presses)


async def test_an_approver_from_config_may_answer_in_a_channel(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake, marker = fake_discord, tmp_path / "marker"
    bob = fake.add_user("bob")
    touch(fake_openai, marker)
    async with gateway(tmp_path, fake, fake_openai, users=[bob], tools={"approvers": [f"discord:{bob['id']}"]}):
        await fake.user_says("touch the marker", chat="general", mention=True)
        question = await wait_question(fake, fake.general)
        assert "approver" in question["content"]
        await fake.user_presses(question["id"], button(question, "approve"), user=bob)
        await wait_settled(fake, question, "✅ Approved by Bob")
        await wait_said(fake, fake.general, "Done.")
        assert marker.read_text() == f"approved by {bob['id']}\n"


async def test_in_a_thread_the_question_and_the_answer_stay_in_the_thread(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake, marker = fake_discord, tmp_path / "marker"
    bob = fake.add_user("bob")
    touch(fake_openai, marker, "Done in the thread.")
    async with gateway(tmp_path, fake, fake_openai, users=[bob], auto_thread=True):
        await fake.user_says("touch the marker", chat="general", mention=True)
        await fake.wait_for(lambda: fake.threads, WAIT, what="the thread opened")
        [thread] = fake.threads
        question = await wait_question(fake, thread["id"])
        assert not [m for m in fake.channel_messages(fake.general) if m.get("components")]
        await fake.user_presses(question["id"], button(question, "deny"), user=bob)
        await wait_said(fake, thread["id"], "Only Alice can answer")
        await fake.user_presses(question["id"], button(question, "approve"))
        await wait_settled(fake, question, "✅ Approved by Alice")
        await wait_said(fake, thread["id"], "Done in the thread.")
        assert marker.exists()
        assert not [m for m in fake.channel_messages(fake.general) if m["author"]["id"] == fake.bot["id"]
                    and m["content"]]


async def test_no_answer_within_the_timeout_is_a_deny_and_a_late_press_hears_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake, marker = fake_discord, tmp_path / "marker"
    touch(fake_openai, marker, "Nobody answered, so I left it.")
    async with gateway(tmp_path, fake, fake_openai, tools={"approval_timeout": 1}) as gw:
        running: RunningDiscord = gw
        dm = (await fake.user_says("touch the marker"))["channel_id"]
        question = await wait_question(fake, dm)
        assert "1 s" in question["content"]
        await wait_settled(fake, question, "⌛ No answer within 1 s: denied")
        await wait_said(fake, dm, "Nobody answered, so I left it.")
        assert not marker.exists()
        assert "no answer within 1 s" in tool_results([r.body for r in fake_openai.chat_requests])[0]
        await fake.user_presses(question["id"], button(question, "approve"), stale=True)
        late = await wait_said(fake, dm, "Too late")
        assert "expired" in late["content"] and not marker.exists()
        assert waiting(running.gateway) == 0


async def test_a_streamed_answer_never_edits_over_the_question(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake, marker = fake_discord, tmp_path / "marker"
    answer = " ".join(f"word{i}" for i in range(40)) + " done."
    fake_openai.tokens_per_second = 200.0
    fake_openai.reply_tool_calls([{"name": "touch", "arguments": {"path": str(marker)}}],
                                 content="Let me touch it first.").reply(answer)
    streaming = {"min_chars": 5, "first_delay": 0.05, "edit_interval": 0.25, "tool_progress": True}
    async with run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, agent_maker=approving_agents(),
                                   config={**QUIET_AGENT, "streaming": streaming}):
        await fake.user_says("touch it, then tell me a story", chat="general", mention=True)
        question = await wait_question(fake, fake.general)
        await fake.user_presses(question["id"], button(question, "approve"))
        await wait_said(fake, fake.general, answer)
        edits = [s for s in fake.sent if s["method"] == "edit_message" and s["message_id"] == question["id"]]
        assert len(edits) == 1 and "✅ Approved by Alice" in edits[0]["text"]
        assert marker.exists()


async def test_always_in_a_channel_holds_for_the_askers_session_only(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake, marker = fake_discord, tmp_path / "marker"
    bob = fake.add_user("bob")
    touch(fake_openai, marker, "First time.")
    touch(fake_openai, marker, "Second time.")
    touch(fake_openai, marker, "Bob's time.")
    async with gateway(tmp_path, fake, fake_openai, users=[bob]):
        await fake.user_says("touch the marker", chat="general", mention=True)
        question = await wait_question(fake, fake.general)
        await fake.user_presses(question["id"], button(question, "always"))
        await wait_settled(fake, question, "♾ Approved by Alice")
        await wait_said(fake, fake.general, "First time.")
        await fake.user_says("and again", chat="general", mention=True)
        await wait_said(fake, fake.general, "Second time.")
        assert marker.read_text().splitlines()[1] == 'approved before with "always" in this session'
        # Bob has a session of his own in this channel: he is asked.
        await fake.user_says("touch it for me", chat="general", mention=True, user=bob)
        bobs = await fake.wait_for(lambda: [m for m in fake.channel_messages(fake.general) if m.get("components")],
                                   WAIT, what="Bob's question")
        assert "Bob" in bobs[0]["content"] and len(marker.read_text().splitlines()) == 2


async def test_a_stop_of_the_gateway_ends_a_waiting_question_at_once(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    # Once the gateway stops, nobody can answer (intake is closed): the drain must not wait for one.
    fake, marker = fake_discord, tmp_path / "marker"
    touch(fake_openai, marker, "The gateway restarts, so I left it.")
    loop = asyncio.get_running_loop()
    async with gateway(tmp_path, fake, fake_openai) as gw:
        running: RunningDiscord = gw
        dm = (await fake.user_says("touch the marker"))["channel_id"]
        question = await wait_question(fake, dm)
        started = loop.time()
        running.gateway.request_stop()
        await wait_settled(fake, question, "⏹ Cancelled (the gateway is restarting)")
        await wait_said(fake, dm, "The gateway restarts, so I left it.")
    assert loop.time() - started < 10  # well within gateway.drain_timeout (20 s)
    assert not marker.exists()
    [result] = tool_results([r.body for r in fake_openai.chat_requests])
    assert "the gateway is restarting" in result
