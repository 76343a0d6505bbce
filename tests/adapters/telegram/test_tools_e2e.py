"""The real tools that act (``terminal``, ``write_file``) through the whole daemon on Telegram, as a
person sees them: FakeOpenAI asks for the call, the daemon builds the tools from config, a
command on the dangerous list (or a write outside the workspace) shows a question with buttons,
and the file on disk says whether it ran.

A harmless command is never asked; in a group the terminal and file writes are not offered (and a
call made anyway is refused); ``tools.approvals: deny`` / ``off``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.approvals import approval_data
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .._approval_tool import tool_results
from ..conftest import rows, run_telegram_gateway
from .test_approvals_e2e import approval_id, prompts, wait_prompt, wait_said, wait_settled

FLAG_REASON = "writes into $HERMES_HOME (the gateway's own files)"


def results(fake_openai: FakeOpenAI) -> list[str]:
    """The tool results of the latest turn (the last model request holds the session's earlier ones too)."""
    found = tool_results([r.body for r in fake_openai.chat_requests])
    last = fake_openai.chat_requests[-1].body["messages"]
    calls = [m for m in last if m["role"] == "assistant" and m.get("tool_calls")]
    return found[-len(calls[-1]["tool_calls"]):] if calls else found


def stored_tool_results(db: Path) -> list[str]:
    return [str(r[0]) for r in rows(db, "SELECT content FROM messages WHERE role = 'tool' ORDER BY id")]


def offered(body: dict[str, Any]) -> set[str]:
    """The tool names in a model request's ``tools`` array."""
    return {t["function"]["name"] for t in body.get("tools") or []}


def call(fake_openai: FakeOpenAI, name: str, answer: str, **arguments: Any) -> None:
    fake_openai.reply_tool_calls([{"name": name, "arguments": arguments}]).reply(answer)


def gateway(tmp_path: Path, fake: FakeTelegram, fake_openai: FakeOpenAI, *, tools: dict[str, Any] | None = None,
            group: bool = False) -> Any:
    return run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, config={"tools": tools or {}},
                                telegram={"require_mention": False} if group else None)


async def test_a_dangerous_command_is_asked_verbatim_and_runs_once_approved_not_when_denied(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    flag = home / "flag"
    command = f"echo ok > {flag}"
    call(fake_openai, "terminal", "Flag written.", command=command)
    call(fake_openai, "terminal", "I left it.", command=f"echo again >> {flag}")
    async with gateway(tmp_path, fake, fake_openai) as gw:
        chat = fake.private_chat()["id"]
        await fake.user_says("write the flag")
        prompt = await wait_prompt(fake, chat)
        assert command in prompt["rendered"] and FLAG_REASON in prompt["rendered"]
        assert [b["text"] for b in prompt["reply_markup"]["inline_keyboard"][0]] == [
            "✅ Approve", "♾ Always", "⛔ Deny"]
        assert not flag.exists()  # it waits
        await fake.user_presses((chat, prompt["message_id"]), approval_data(approval_id(prompt), "approve"))
        await wait_said(fake, chat, "Flag written.")
        await wait_settled(fake, chat, prompt, "✅ Approved by Alice")
        assert flag.read_text() == "ok\n"
        assert results(fake_openai) == ["exit code 0\n(no output)"]
        assert stored_tool_results(gw.db_path) == ["exit code 0\n(no output)"]  # what the model saw, kept

        await fake.user_says("append to it")
        second = await wait_prompt(fake, chat, 2)
        await fake.user_presses((chat, second["message_id"]), approval_data(approval_id(second), "deny"))
        await wait_said(fake, chat, "I left it.")
        await wait_settled(fake, chat, second, "⛔ Denied by Alice")
        assert flag.read_text() == "ok\n"  # did not run
        [denied] = results(fake_openai)
        assert denied.startswith("Error: Not done") and "did not approve" in denied
        assert stored_tool_results(gw.db_path)[-1] == denied


async def test_hermes_home_in_a_command_is_the_home_it_was_checked_against(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    # The daemon's own environment says another home (or none: "" would make it "/flag"); the
    # command was checked against this daemon's home and must write there.
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "other"))
    command = 'echo ok > "$HERMES_HOME/flag"'
    call(fake_openai, "terminal", "Written.", command=command)
    async with gateway(tmp_path, fake, fake_openai):
        chat = fake.private_chat()["id"]
        await fake.user_says("write the flag")
        prompt = await wait_prompt(fake, chat)
        assert command in prompt["rendered"] and FLAG_REASON in prompt["rendered"]
        await fake.user_presses((chat, prompt["message_id"]), approval_data(approval_id(prompt), "approve"))
        await wait_said(fake, chat, "Written.")
        assert results(fake_openai) == ["exit code 0\n(no output)"]
        assert (home / "flag").read_text() == "ok\n" and not (tmp_path / "other").exists()


async def test_always_runs_the_same_command_again_at_once_and_a_harmless_one_is_never_asked(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    flag = home / "flag"
    command = f"echo ok >> {flag}"
    call(fake_openai, "terminal", "First.", command=command)
    call(fake_openai, "terminal", "Second.", command=command)
    call(fake_openai, "terminal", "Said hi.", command="echo hi")
    async with gateway(tmp_path, fake, fake_openai):
        chat = fake.private_chat()["id"]
        await fake.user_says("write the flag")
        prompt = await wait_prompt(fake, chat)
        await fake.user_presses((chat, prompt["message_id"]), approval_data(approval_id(prompt), "always"))
        await wait_settled(fake, chat, prompt, "♾ Approved by Alice")
        await wait_said(fake, chat, "First.")
        await fake.user_says("once more")
        await wait_said(fake, chat, "Second.")
        assert flag.read_text() == "ok\nok\n" and len(prompts(fake, chat)) == 1
        await fake.user_says("say hi")
        await wait_said(fake, chat, "Said hi.")
        assert results(fake_openai) == ["exit code 0\noutput (3 bytes):\nhi\n"]
        assert len(prompts(fake, chat)) == 1  # never asked


@pytest.mark.parametrize("press", ["approve", "deny"])
async def test_write_file_outside_the_workspace_asks(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, press: str
) -> None:
    fake = fake_telegram
    target = tmp_path / "elsewhere" / "note.txt"
    call(fake_openai, "write_file", "Answered.", path=str(target), content="hello\n")
    async with gateway(tmp_path, fake, fake_openai):
        chat = fake.private_chat()["id"]
        await fake.user_says("write the note")
        prompt = await wait_prompt(fake, chat)
        assert str(target) in prompt["rendered"] and "outside" in prompt["rendered"]
        assert not target.exists()
        await fake.user_presses((chat, prompt["message_id"]), approval_data(approval_id(prompt), press))
        await wait_said(fake, chat, "Answered.")
        [result] = results(fake_openai)
        if press == "approve":
            assert target.read_text() == "hello\n" and '"success": true' in result
        else:
            assert not target.exists() and "did not approve" in result


async def test_in_a_group_the_terminal_and_file_writes_are_not_offered_and_a_call_anyway_is_refused(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    group = fake.group()
    marker = tmp_path / "h" / "workspace" / "group.txt"
    fake_openai.reply_tool_calls([
        {"id": "t1", "name": "terminal", "arguments": {"command": "echo hi > group.txt"}},
        {"id": "w1", "name": "write_file", "arguments": {"path": "group.txt", "content": "x"}},
    ]).reply("Could not.")
    async with gateway(tmp_path, fake, fake_openai, group=True):
        await fake.user_says("run something", chat=group)
        await wait_said(fake, group["id"], "Could not.")
        first = fake_openai.chat_requests[0].body
        assert {"terminal", "write_file", "patch"}.isdisjoint(offered(first))
        assert {"read_file", "search_files", "web_fetch"} <= offered(first)
        terminal, write = results(fake_openai)
        for result, tool in ((terminal, "terminal"), (write, "write_file")):
            assert result.startswith("Error:") and tool in result and "group" in result, result
        assert not marker.exists() and prompts(fake, group["id"]) == []


async def test_tools_groups_terminal_offers_the_terminal_in_a_group(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    group = fake.group()
    call(fake_openai, "terminal", "Said it.", command="echo hi")
    async with gateway(tmp_path, fake, fake_openai, group=True, tools={"groups": {"terminal": True}}):
        await fake.user_says("say hi", chat=group)
        await wait_said(fake, group["id"], "Said it.")
        first = offered(fake_openai.chat_requests[0].body)
        assert "terminal" in first and "write_file" not in first
        assert results(fake_openai) == ["exit code 0\noutput (3 bytes):\nhi\n"]


@pytest.mark.parametrize(("policy", "runs"), [("deny", False), ("off", True)])
async def test_the_policy_deny_refuses_a_dangerous_command_and_off_runs_it_without_asking(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, policy: str, runs: bool
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    flag = home / "flag"
    call(fake_openai, "terminal", "Finished.", command=f"echo ok > {flag}")
    async with gateway(tmp_path, fake, fake_openai, tools={"approvals": policy}):
        chat = fake.private_chat()["id"]
        await fake.user_says("write the flag")
        await wait_said(fake, chat, "Finished.")
        assert prompts(fake, chat) == [] and flag.exists() is runs
        [result] = results(fake_openai)
        if runs:
            assert result == "exit code 0\n(no output)"
        else:
            assert result.startswith("Error: Not done") and "tools.approvals: deny" in result


@pytest.mark.parametrize("words", ["*bold* _it_ [x](y) <b>&amp;", "a`b ``` c\\\\d ~strike~ ||spoiler||"])
async def test_the_question_shows_a_command_full_of_markup_verbatim(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, words: str
) -> None:
    fake, flag = fake_telegram, tmp_path / "h" / "flag"
    command = f"printf '%s\\n' '{words}' > {flag}"
    call(fake_openai, "terminal", "Printed.", command=command)
    async with gateway(tmp_path, fake, fake_openai):
        chat = fake.private_chat()["id"]
        await fake.user_says("print it")
        prompt = await wait_prompt(fake, chat)
        assert command in prompt["rendered"], prompt["rendered"]
        await fake.user_presses((chat, prompt["message_id"]), approval_data(approval_id(prompt), "approve"))
        await wait_said(fake, chat, "Printed.")
        assert flag.read_text() == f"{words}\n"
        settled = await wait_settled(fake, chat, prompt, "✅ Approved by Alice")
        assert command in settled["text"], settled["text"]


async def test_a_command_longer_than_a_telegram_message_is_still_asked(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, flag = fake_telegram, tmp_path / "h" / "flag"
    command = f"echo {'a' * 6000} > {flag}"
    call(fake_openai, "terminal", "Long one done.", command=command)
    async with gateway(tmp_path, fake, fake_openai, tools={"approval_timeout": 10}):
        chat = fake.private_chat()["id"]
        await fake.user_says("print it")
        prompt = await wait_prompt(fake, chat)
        assert f"echo {'a' * 100}" in prompt["rendered"] and FLAG_REASON in prompt["rendered"]
        await fake.user_presses((chat, prompt["message_id"]), approval_data(approval_id(prompt), "approve"))
        await wait_said(fake, chat, "Long one done.")
        assert flag.read_text() == "a" * 6000 + "\n"


async def test_always_covers_that_command_only_and_only_in_this_session(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, flag = fake_telegram, tmp_path / "h" / "flag"
    command = f"echo ok >> {flag}"
    call(fake_openai, "terminal", "First.", command=command)
    call(fake_openai, "terminal", "Other.", command=f"echo other >> {flag}")
    call(fake_openai, "terminal", "New session.", command=command)
    async with gateway(tmp_path, fake, fake_openai):
        chat = fake.private_chat()["id"]
        await fake.user_says("write the flag")
        prompt = await wait_prompt(fake, chat)
        await fake.user_presses((chat, prompt["message_id"]), approval_data(approval_id(prompt), "always"))
        await wait_said(fake, chat, "First.")
        await fake.user_says("another one")
        other = await wait_prompt(fake, chat, 2)  # a different command is asked
        await fake.user_presses((chat, other["message_id"]), approval_data(approval_id(other), "deny"))
        await wait_said(fake, chat, "Other.")
        await fake.user_says("/new")
        await wait_said(fake, chat, "New session started")
        await fake.user_says("write the flag again")
        third = await wait_prompt(fake, chat, 3)  # a new session asks again
        assert command in third["rendered"]
        await fake.user_presses((chat, third["message_id"]), approval_data(approval_id(third), "approve"))
        await wait_said(fake, chat, "New session.")
        assert flag.read_text() == "ok\nok\n"
