"""Approvals through the whole daemon on Slack: a tool asks (``tests.adapters._approval_tool``),
FakeSlack shows the question as Block Kit with three buttons, a person presses one (a
``block_actions`` payload, over Socket Mode or, in HTTP mode, a signed form POST), and the tool runs
or not; the question is edited into its outcome, its buttons gone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.approvals import APPROVAL_CHOICES, ApprovalChoice, approval_data, parse_approval_data
from tests.emulators.fake_slack import BOT_USER, FakeSlack
from tests.fakes.openai_server import FakeOpenAI

from .._approval_tool import QUIET_AGENT, REASON, approving_agents, tool_results, touch, waiting
from .test_adapter import USER, RunningSlack, run_slack_gateway

WAIT = 20.0
DM = "D0DM0001"
CHANNEL = "C0CHAN001"
BOB = "U0BOB0001"


def gateway(tmp_path: Path, fake: FakeSlack, fake_openai: FakeOpenAI, *, tools: dict[str, Any] | None = None,
            mode: str = "socket") -> Any:
    return run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, mode=mode, agent_maker=approving_agents(),
                             env={"SLACK_ALLOWED_USERS": f"{USER},{BOB}"}, config={**QUIET_AGENT, "tools": tools or {}})


def bot_said(fake: FakeSlack, channel: str, part: str) -> list[dict[str, Any]]:
    """The bot's messages in ``channel`` (any thread) that show ``part`` now."""
    return [m for (c, _), m in sorted(fake.messages.items(), key=lambda kv: kv[0][1])
            if c == channel and m.get("user") == BOT_USER and part in m["text"]]


async def wait_said(fake: FakeSlack, channel: str, part: str, n: int = 1) -> dict[str, Any]:
    """The ``n``-th message of the bot in ``channel`` that shows ``part`` (edits count)."""
    def found() -> dict[str, Any] | None:
        said = bot_said(fake, channel, part)
        return said[n - 1] if len(said) >= n else None

    result: dict[str, Any] = await fake.wait_for(found, WAIT, what=f"a message with {part!r} in {channel}")
    return result


async def wait_question(fake: FakeSlack, channel: str) -> dict[str, Any]:
    """The approval question in ``channel`` as first shown (a message with an actions block), with its
    ``channel`` and ``approval_id``."""
    def found() -> dict[str, Any] | None:
        return next((m for (c, _), m in fake.messages.items() if c == channel and m.get("user") == BOT_USER
                     and any(b.get("type") == "actions" for b in m.get("blocks") or [])), None)

    shown: dict[str, Any] = await fake.wait_for(found, WAIT, what=f"an approval question in {channel}")
    [actions] = [b for b in shown["blocks"] if b["type"] == "actions"]
    parsed = parse_approval_data(actions["elements"][0]["value"])
    assert parsed is not None
    return {**shown, "channel": channel, "approval_id": parsed[0], "buttons": actions["elements"]}


async def press(fake: FakeSlack, question: dict[str, Any], choice: ApprovalChoice, *, user: str | None = None,
                stale: bool = False) -> dict[str, Any]:
    """A press on ``question``, acknowledged (the envelope's ack, or the HTTP 200)."""
    pressed = await fake.user_presses(question["channel"], question["ts"], f"hermes_approval_{choice}", user=user,
                                      stale=stale, value=approval_data(question["approval_id"], choice))
    if "envelope_id" in pressed:
        await fake.wait_ack(pressed["envelope_id"], 3.0)
    else:
        assert pressed["status"] == 200
    return pressed


async def wait_settled(fake: FakeSlack, question: dict[str, Any], part: str) -> dict[str, Any]:
    """The question once edited to show ``part``; no buttons are left on it."""
    def settled() -> dict[str, Any] | None:
        shown = fake.messages[(question["channel"], question["ts"])]
        return shown if part in shown["text"] else None

    result: dict[str, Any] = await fake.wait_for(settled, WAIT, what=f"the question edited to {part!r}")
    assert not [b for b in result["blocks"] if b["type"] == "actions"]
    assert part in result["blocks"][0]["text"]["text"]
    return result


async def test_in_a_dm_the_asker_approves_and_the_tool_runs(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake, marker = fake_slack, tmp_path / "marker"
    touch(fake_openai, marker, "Done: the marker is written.")
    async with gateway(tmp_path, fake, fake_openai) as gw:
        running: RunningSlack = gw
        await fake.user_says("touch the marker please", chat=DM)
        question = await wait_question(fake, DM)
        assert [(b["text"]["text"], b.get("style")) for b in question["buttons"]] == [
            (label, style) for (_, label), style in zip(APPROVAL_CHOICES, ("primary", None, "danger"), strict=True)]
        shown = question["blocks"][0]["text"]["text"]
        assert f"touch {marker}" in shown and REASON in shown and "300 s" in shown
        assert f"/approve {question['approval_id']}" in question["text"]  # the fallback names the commands
        assert not marker.exists() and waiting(running.gateway) == 1
        await press(fake, question, "approve")
        await wait_settled(fake, question, "✅ Approved by")
        await wait_said(fake, DM, "Done: the marker is written.")
        assert marker.read_text() == f"approved by {USER}\n"
        assert tool_results([r.body for r in fake_openai.chat_requests]) == [f"touched {marker}"]
        # No reply of its own: the edited question says it.
        assert [m["ts"] for m in bot_said(fake, DM, "Approved")] == [question["ts"]]
        assert waiting(running.gateway) == 0


async def test_deny_keeps_the_tool_from_running_and_the_model_hears_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake, marker = fake_slack, tmp_path / "marker"
    touch(fake_openai, marker, "Understood, I did not touch it.")
    async with gateway(tmp_path, fake, fake_openai):
        await fake.user_says("touch the marker", chat=DM)
        question = await wait_question(fake, DM)
        await press(fake, question, "deny")
        await wait_settled(fake, question, "⛔ Denied by")
        await wait_said(fake, DM, "Understood, I did not touch it.")
        assert not marker.exists()
        [result] = tool_results([r.body for r in fake_openai.chat_requests])
        assert "Not done" in result and "did not approve" in result and "denied by" in result


async def test_in_a_channel_thread_another_user_is_refused_then_the_asker_approves_and_a_second_press_is_late(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake, marker = fake_slack, tmp_path / "marker"
    touch(fake_openai, marker)
    async with gateway(tmp_path, fake, fake_openai) as gw:
        running: RunningSlack = gw
        asked = await fake.user_says("touch the marker", chat=CHANNEL, mention=True)
        thread = asked["event"]["ts"]
        question = await wait_question(fake, CHANNEL)
        assert question["thread_ts"] == thread  # in the thread of the message that asked
        await press(fake, question, "approve", user=BOB)
        refusal = await wait_said(fake, CHANNEL, "can answer this approval")
        assert "still waiting" in refusal["text"] and refusal.get("thread_ts") == thread
        assert any(b["type"] == "actions" for b in fake.messages[(CHANNEL, question["ts"])]["blocks"])
        assert not marker.exists() and waiting(running.gateway) == 1
        await press(fake, question, "approve")
        settled = await wait_settled(fake, question, "✅ Approved by")
        await wait_said(fake, CHANNEL, "Done.")
        assert marker.read_text() == f"approved by {USER}\n"
        # A client that had not seen the edit presses again; Bob too.
        await press(fake, question, "deny", stale=True)
        late = await wait_said(fake, CHANNEL, "already answered")
        assert settled["text"].splitlines()[-1] in late["text"] and late.get("thread_ts") == thread
        await press(fake, question, "approve", user=BOB, stale=True)
        await wait_said(fake, CHANNEL, "already answered", n=2)
        assert len(marker.read_text().splitlines()) == 1 and waiting(running.gateway) == 0


async def test_no_answer_within_the_timeout_is_a_deny_and_a_late_press_hears_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake, marker = fake_slack, tmp_path / "marker"
    touch(fake_openai, marker, "Nobody answered, so I left it.")
    async with gateway(tmp_path, fake, fake_openai, tools={"approval_timeout": 1}) as gw:
        running: RunningSlack = gw
        await fake.user_says("touch the marker", chat=DM)
        question = await wait_question(fake, DM)
        assert "1 s" in question["blocks"][0]["text"]["text"]
        await wait_settled(fake, question, "⌛ No answer within 1 s: denied")
        await wait_said(fake, DM, "Nobody answered, so I left it.")
        assert not marker.exists()
        assert "no answer within 1 s" in tool_results([r.body for r in fake_openai.chat_requests])[0]
        await press(fake, question, "approve", stale=True)
        late = await wait_said(fake, DM, "Too late")
        assert "expired" in late["text"] and not marker.exists()
        assert waiting(running.gateway) == 0


async def test_in_http_mode_a_signed_press_answers_the_question(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake, marker = fake_slack, tmp_path / "marker"
    touch(fake_openai, marker, "Done over HTTP.")
    async with gateway(tmp_path, fake, fake_openai, mode="http") as gw:
        running: RunningSlack = gw
        asked = await fake.user_says("touch the marker", chat=CHANNEL, mention=True)
        question = await wait_question(fake, CHANNEL)
        assert question["thread_ts"] == asked["event"]["ts"]
        bobs = await press(fake, question, "approve", user=BOB)
        assert "envelope_id" not in bobs
        await wait_said(fake, CHANNEL, "can answer this approval")
        # A forged press (a wrong signature) is refused and changes nothing.
        forged = await fake.user_presses(CHANNEL, question["ts"], "hermes_approval_approve", secret="wrong")
        assert forged["status"] == 401 and waiting(running.gateway) == 1
        await press(fake, question, "approve")
        await wait_settled(fake, question, "✅ Approved by")
        await wait_said(fake, CHANNEL, "Done over HTTP.")
        assert marker.read_text() == f"approved by {USER}\n"


async def test_a_streamed_answer_never_edits_over_the_question(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake, marker = fake_slack, tmp_path / "marker"
    answer = " ".join(f"word{i}" for i in range(40)) + " done."
    fake_openai.tokens_per_second = 200.0
    fake_openai.reply_tool_calls([{"name": "touch", "arguments": {"path": str(marker)}}],
                                 content="Let me touch it first.").reply(answer)
    streaming = {"min_chars": 5, "first_delay": 0.05, "edit_interval": 0.25, "tool_progress": True}
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, agent_maker=approving_agents(),
                                 config={**QUIET_AGENT, "streaming": streaming}):
        await fake.user_says("touch it, then tell me a story", chat=CHANNEL, mention=True)
        question = await wait_question(fake, CHANNEL)
        await press(fake, question, "approve")
        await wait_said(fake, CHANNEL, answer)
        assert fake.versions(CHANNEL, question["ts"])[-1].endswith("✅ Approved by user-u0user001")
        assert len(fake.versions(CHANNEL, question["ts"])) == 2  # asked, then settled: nothing else
        assert marker.exists()


async def test_the_slash_command_with_the_id_answers_a_question_in_a_thread(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake, marker = fake_slack, tmp_path / "marker"
    touch(fake_openai, marker, "Denied, so untouched.")
    async with gateway(tmp_path, fake, fake_openai) as gw:
        running: RunningSlack = gw
        await fake.user_says("touch the marker", chat=CHANNEL, mention=True)
        question = await wait_question(fake, CHANNEL)
        # A slash command carries no thread: the id finds the question all the same.
        await fake.slash_command("/deny", question["approval_id"], chat=CHANNEL, user=BOB)
        await wait_said(fake, CHANNEL, "can answer this approval")
        await fake.slash_command("/deny", question["approval_id"], chat=CHANNEL)
        await wait_settled(fake, question, "⛔ Denied by")
        await wait_said(fake, CHANNEL, "Denied, so untouched.")
        assert not marker.exists() and waiting(running.gateway) == 0


async def test_a_slash_approve_without_the_id_finds_the_askers_question_in_a_thread(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    # Slack sends a slash command without its thread: the question waits in one all the same.
    fake, marker = fake_slack, tmp_path / "marker"
    touch(fake_openai, marker)
    async with gateway(tmp_path, fake, fake_openai):
        await fake.user_says("touch the marker", chat=CHANNEL, mention=True)
        question = await wait_question(fake, CHANNEL)
        await fake.slash_command("/approve", chat=CHANNEL, user=BOB)  # not Bob's question
        await wait_said(fake, CHANNEL, "The approvals waiting in this chat's threads are not yours to answer.")
        await fake.slash_command("/approve", chat=CHANNEL)
        await wait_settled(fake, question, "✅ Approved by")
        await wait_said(fake, CHANNEL, "Done.")
        assert marker.read_text() == f"approved by {USER}\n"
