"""An approval question in the terminal chat (a real ``hermes-gateway chat`` subprocess): the question
is printed, and ``/approve`` or ``/deny`` typed while it waits answers it; a line typed meanwhile
that is no answer is sent after the answer."""

from __future__ import annotations

from pathlib import Path

from tests.adapters._approval_tool import approving_agents
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.cli.test_cli_chat import chat
from tests.gateway.conftest import run_gateway


async def test_the_question_is_printed_and_a_typed_approve_answers_it(
    gateway_home: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    fake_openai.reply_tool_calls([{"name": "touch", "arguments": {"path": str(marker)}}]).reply("Done, touched.")
    fake_openai.reply("echo after")
    async with run_gateway(gateway_home, fake_openai.base_url, agent_maker=approving_agents()):
        done = await chat(gateway_home, "touch the marker\nmeanwhile\n/approve\n")
        assert done.code == 0, done
        out = done.out
        assert f"touch {marker}" in out and "Reply /approve" in out
        assert out.index("Reply /approve") < out.index("✅ Approved by") < out.index("Done, touched.")
        assert out.index("Done, touched.") < out.index("echo after")  # the line typed meanwhile, after
        assert marker.exists()


async def test_a_typed_deny_keeps_the_tool_from_running(
    gateway_home: Path, fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    fake_openai.reply_tool_calls([{"name": "touch", "arguments": {"path": str(marker)}}]).reply("Left alone.")
    async with run_gateway(gateway_home, fake_openai.base_url, agent_maker=approving_agents()):
        done = await chat(gateway_home, "touch the marker\n/deny\n")
        assert done.code == 0, done
        assert "⛔ Denied by" in done.out and "Left alone." in done.out
        assert not marker.exists()
