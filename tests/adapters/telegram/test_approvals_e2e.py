"""Approvals through the whole daemon on Telegram: a tool asks (``tests.adapters._approval_tool``),
FakeTelegram shows the question with three inline buttons, a person presses one (a callback_query),
and the tool runs or not; the question is edited into its outcome.

Who may answer (the asker, ``tools.approvers``), a second press, a press after the timeout, "always",
/stop while the question waits, and ``tools.approvals: deny`` / ``off``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.approvals import approval_data
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .._approval_tool import REASON, approving_agents, tool_results, touch, waiting
from ..conftest import RunningTelegram, run_telegram_gateway, stored_answers

WAIT = 20.0


def prompts(fake: FakeTelegram, chat_id: int) -> list[dict[str, Any]]:
    return [s for s in fake.sent if s["method"] == "sendMessage" and s["chat_id"] == chat_id and s.get("reply_markup")]


async def wait_prompt(fake: FakeTelegram, chat_id: int, n: int = 1) -> dict[str, Any]:
    """The ``n``-th approval question shown in ``chat_id`` (a sendMessage with buttons)."""
    def found() -> dict[str, Any] | None:
        shown = prompts(fake, chat_id)
        return shown[n - 1] if len(shown) >= n else None

    result: dict[str, Any] = await fake.wait_for(found, WAIT, what="an approval question")
    return result


def approval_id(prompt: dict[str, Any]) -> str:
    return str(prompt["reply_markup"]["inline_keyboard"][0][0]["callback_data"]).split(":")[2]


async def wait_said(fake: FakeTelegram, chat_id: int, part: str) -> dict[str, Any]:
    """The first message the bot sent in ``chat_id`` whose text holds ``part``."""
    def found() -> dict[str, Any] | None:
        return next((s for s in fake.sent if s["method"] == "sendMessage" and s["chat_id"] == chat_id
                     and part in s["rendered"]), None)

    result: dict[str, Any] = await fake.wait_for(found, WAIT, what=f"a message with {part!r}")
    return result


async def wait_settled(fake: FakeTelegram, chat_id: int, prompt: dict[str, Any], part: str) -> dict[str, Any]:
    """The question once edited to show ``part`` (its buttons gone)."""
    def settled() -> dict[str, Any] | None:
        shown = fake.message(chat_id, prompt["message_id"])
        return shown if shown is not None and part in shown["text"] else None

    result: dict[str, Any] = await fake.wait_for(settled, WAIT, what=f"the question edited to {part!r}")
    assert "reply_markup" not in result
    return result


def gateway(tmp_path: Path, fake: FakeTelegram, fake_openai: FakeOpenAI, *, tools: dict[str, Any] | None = None,
            group: bool = False, users: str | None = None) -> Any:
    return run_telegram_gateway(
        tmp_path / "h", fake, fake_openai.base_url, agent_maker=approving_agents(),
        config={"tools": tools or {}}, telegram={"require_mention": False} if group else None,
        env={"TELEGRAM_ALLOWED_USERS": users} if users else None)


async def test_the_asker_presses_approve_and_the_tool_runs(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, marker = fake_telegram, tmp_path / "marker"
    touch(fake_openai, marker, "Done: the marker is written.")
    async with gateway(tmp_path, fake, fake_openai) as gw:
        gw_: RunningTelegram = gw
        chat = fake.private_chat()["id"]
        await fake.user_says("touch the marker please")
        prompt = await wait_prompt(fake, chat)
        buttons = prompt["reply_markup"]["inline_keyboard"]
        pid = approval_id(prompt)
        assert [[b["text"] for b in row] for row in buttons] == [["✅ Approve", "♾ Always", "⛔ Deny"]]
        assert [b["callback_data"] for b in buttons[0]] == [approval_data(pid, c) for c in ("approve", "always", "deny")]
        assert f"touch {marker}" in prompt["rendered"] and REASON in prompt["rendered"]
        assert "Alice" in prompt["rendered"] and "300 s" in prompt["rendered"]
        assert not marker.exists()  # it waits for the answer
        await fake.user_presses((chat, prompt["message_id"]), approval_data(pid, "approve"))
        await wait_said(fake, chat, "Done: the marker is written.")
        await wait_settled(fake, chat, prompt, "✅ Approved by Alice")
        assert marker.read_text().startswith("approved by ")
        assert tool_results([r.body for r in fake_openai.chat_requests]) == [f"touched {marker}"]
        assert len(fake.buttons.answers) == 1  # the press was acknowledged
        # No reply of its own: the edited question says it.
        assert not [s for s in fake.sent if s["chat_id"] == chat and "Approved" in s["rendered"]
                    and s["method"] == "sendMessage"]
        assert (await stored_answers(gw_.db_path, 2))[-1] == ("Done: the marker is written.", "stop")


async def test_deny_keeps_the_tool_from_running_and_the_model_hears_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, marker = fake_telegram, tmp_path / "marker"
    touch(fake_openai, marker, "Understood, I did not touch it.")
    async with gateway(tmp_path, fake, fake_openai):
        chat = fake.private_chat()["id"]
        await fake.user_says("touch the marker")
        prompt = await wait_prompt(fake, chat)
        await fake.user_presses((chat, prompt["message_id"]), approval_data(approval_id(prompt), "deny"))
        await wait_said(fake, chat, "Understood, I did not touch it.")
        await wait_settled(fake, chat, prompt, "⛔ Denied by Alice")
        assert not marker.exists()
        [result] = tool_results([r.body for r in fake_openai.chat_requests])
        assert "Not done" in result and "did not approve" in result and "denied by" in result


async def test_only_the_asker_may_answer_and_a_second_press_is_already_answered(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, marker = fake_telegram, tmp_path / "marker"
    bob = fake.add_user("Bob")
    group = fake.group()
    touch(fake_openai, marker)
    async with gateway(tmp_path, fake, fake_openai, group=True, users=f"{fake.user['id']},{bob['id']}"):
        await fake.user_says("touch the marker", chat=group)
        prompt = await wait_prompt(fake, group["id"])
        data = approval_data(approval_id(prompt), "approve")
        await fake.user_presses((group, prompt["message_id"]), data, user=bob)
        refusal = await wait_said(fake, group["id"], "Only Alice can answer")
        assert "still waiting" in refusal["rendered"] and refusal["reply_to"] == prompt["message_id"]
        assert not marker.exists() and "reply_markup" in (fake.message(group, prompt["message_id"]) or {})
        # Alice types the answer (no id: the one question waiting here).
        await fake.user_says("/approve", chat=group)
        await wait_settled(fake, group["id"], prompt, "✅ Approved by Alice")
        await wait_said(fake, group["id"], "Done.")
        assert marker.exists()
        # A client that had not seen the edit presses again.
        await fake.user_presses((group, prompt["message_id"]), data, stale=True)
        late = await wait_said(fake, group["id"], "already answered")
        assert "Approved by Alice" in late["rendered"]
        assert len(marker.read_text().splitlines()) == 1


async def test_an_approver_from_config_may_answer_for_the_asker(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, marker = fake_telegram, tmp_path / "marker"
    bob = fake.add_user("Bob")
    group = fake.group()
    touch(fake_openai, marker)
    async with gateway(tmp_path, fake, fake_openai, group=True, users=f"{fake.user['id']},{bob['id']}",
                       tools={"approvers": [f"telegram:{bob['id']}"]}):
        await fake.user_says("touch the marker", chat=group)
        prompt = await wait_prompt(fake, group["id"])
        assert "approver" in prompt["rendered"]
        await fake.user_presses((group, prompt["message_id"]), approval_data(approval_id(prompt), "approve"), user=bob)
        await wait_settled(fake, group["id"], prompt, "✅ Approved by Bob")
        await wait_said(fake, group["id"], "Done.")
        assert marker.read_text() == f"approved by {bob['id']}\n"


async def test_no_answer_within_the_timeout_is_a_deny_and_a_late_press_hears_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, marker = fake_telegram, tmp_path / "marker"
    touch(fake_openai, marker, "Nobody answered, so I left it.")
    async with gateway(tmp_path, fake, fake_openai, tools={"approval_timeout": 1}) as gw:
        chat = fake.private_chat()["id"]
        await fake.user_says("touch the marker")
        prompt = await wait_prompt(fake, chat)
        assert "1 s" in prompt["rendered"]
        await wait_settled(fake, chat, prompt, "⌛ No answer within 1 s: denied")
        await wait_said(fake, chat, "Nobody answered, so I left it.")
        assert not marker.exists()
        assert "no answer within 1 s" in tool_results([r.body for r in fake_openai.chat_requests])[0]
        await fake.user_presses((chat, prompt["message_id"]), approval_data(approval_id(prompt), "approve"),
                                stale=True)
        late = await wait_said(fake, chat, "Too late")
        assert "expired" in late["rendered"] and not marker.exists()
        assert waiting(gw.gateway) == 0  # nothing left behind


async def test_always_is_not_asked_again_in_the_session(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, marker = fake_telegram, tmp_path / "marker"
    touch(fake_openai, marker, "First time.")
    touch(fake_openai, marker, "Second time.")
    async with gateway(tmp_path, fake, fake_openai):
        chat = fake.private_chat()["id"]
        await fake.user_says("touch the marker")
        prompt = await wait_prompt(fake, chat)
        await fake.user_presses((chat, prompt["message_id"]), approval_data(approval_id(prompt), "always"))
        await wait_settled(fake, chat, prompt, "♾ Approved by Alice")
        await wait_said(fake, chat, "First time.")
        await fake.user_says("and again")
        await wait_said(fake, chat, "Second time.")
        assert len(prompts(fake, chat)) == 1  # not asked the second time
        assert marker.read_text().splitlines()[1] == 'approved before with "always" in this session'


async def test_stop_while_the_question_waits_cancels_it(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, marker = fake_telegram, tmp_path / "marker"
    fake_openai.reply_tool_calls([{"name": "touch", "arguments": {"path": str(marker)}}])
    async with gateway(tmp_path, fake, fake_openai) as gw:
        chat = fake.private_chat()["id"]
        await fake.user_says("touch the marker")
        prompt = await wait_prompt(fake, chat)
        await fake.user_says("/status")  # immediate, like /approve: it does not wait behind the turn
        status = await wait_said(fake, chat, "Approvals waiting here")
        assert approval_id(prompt) in status["rendered"]
        await fake.user_says("/stop")
        await wait_settled(fake, chat, prompt, "⏹ Cancelled (the turn was stopped)")
        await wait_said(fake, chat, "Stopped")
        await fake.user_presses((chat, prompt["message_id"]), approval_data(approval_id(prompt), "approve"),
                                stale=True)
        await wait_said(fake, chat, "already answered (⏹ Cancelled")
        assert not marker.exists() and waiting(gw.gateway) == 0
        # The daemon keeps serving.
        fake_openai.reply("Still here.")
        await fake.user_says("hello?")
        await wait_said(fake, chat, "Still here.")


@pytest.mark.parametrize(("policy", "runs", "why"), [
    ("deny", False, "tools.approvals: deny"), ("off", True, "approvals are off"),
])
async def test_the_policy_deny_refuses_and_off_runs_without_asking(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, policy: str, runs: bool, why: str
) -> None:
    fake, marker = fake_telegram, tmp_path / "marker"
    touch(fake_openai, marker, "Finished.")
    async with gateway(tmp_path, fake, fake_openai, tools={"approvals": policy}):
        chat = fake.private_chat()["id"]
        await fake.user_says("touch the marker")
        await wait_said(fake, chat, "Finished.")
        assert prompts(fake, chat) == [] and marker.exists() is runs
        if runs:
            assert marker.read_text() == f"{why} (tools.approvals: off)\n"
        else:
            assert why in tool_results([r.body for r in fake_openai.chat_requests])[0]


async def test_always_survives_a_restart_of_the_daemon(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, marker = fake_telegram, tmp_path / "marker"
    touch(fake_openai, marker, "Before the restart.")
    touch(fake_openai, marker, "After the restart.")
    chat = fake.private_chat()["id"]
    async with gateway(tmp_path, fake, fake_openai):
        await fake.user_says("touch the marker")
        prompt = await wait_prompt(fake, chat)
        await fake.user_presses((chat, prompt["message_id"]), approval_data(approval_id(prompt), "always"))
        await wait_said(fake, chat, "Before the restart.")
    async with gateway(tmp_path, fake, fake_openai):
        await fake.user_says("once more")
        await wait_said(fake, chat, "After the restart.")
        assert len(prompts(fake, chat)) == 1
        assert len(marker.read_text().splitlines()) == 2


async def test_a_streamed_answer_never_edits_over_the_question(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, marker = fake_telegram, tmp_path / "marker"
    group = fake.group()
    answer = " ".join(f"word{i}" for i in range(40)) + " done."
    fake_openai.tokens_per_second = 200.0
    fake_openai.reply_tool_calls([{"name": "touch", "arguments": {"path": str(marker)}}],
                                 content="Let me touch it first.").reply(answer)
    async with run_telegram_gateway(
        tmp_path / "h", fake, fake_openai.base_url, agent_maker=approving_agents(),
        telegram={"require_mention": False},
        config={"streaming": {"min_chars": 5, "first_delay": 0.05, "edit_interval": 0.25, "tool_progress": True}},
    ):
        await fake.user_says("touch it, then tell me a story", chat=group)
        prompt = await wait_prompt(fake, group["id"])
        shown_before = [s["message_id"] for s in fake.sent if s["method"] == "sendMessage"
                        and s["chat_id"] == group["id"] and s is not prompt]
        assert shown_before and all(mid < prompt["message_id"] for mid in shown_before)  # it comes after them
        await fake.user_presses((group, prompt["message_id"]), approval_data(approval_id(prompt), "approve"))
        await fake.wait_for(lambda: any(answer == m.get("text") for m in fake.history(group)), WAIT,
                            what="the whole answer")
        edits_of_prompt = [s for s in fake.sent if s["method"] == "editMessageText"
                           and s["message_id"] == prompt["message_id"]]
        assert len(edits_of_prompt) == 1 and "✅ Approved by Alice" in edits_of_prompt[0]["rendered"]
        assert "Approved by Alice" in (fake.message(group, prompt["message_id"]) or {})["text"]
