"""/reasoning on Slack: the real daemon and slack-bolt against ``FakeSlack``; the model's reasoning
comes before its answer as a quoted block under a heading (Slack cannot fold a message)."""

from __future__ import annotations

from pathlib import Path

from tests.emulators.fake_slack import FakeSlack
from tests.fakes.openai_server import FakeOpenAI

from .test_adapter import WAIT, rows, run_slack_gateway
from .test_commands import DM, QUIET_AGENT, posted, said, shown


async def test_reasoning_on_comes_as_a_quote_before_the_answer(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, config=QUIET_AGENT,
                                 slack={"streaming": False}) as gw:
        assert await said(fake, "hello") == "echo: hello"
        assert (await said(fake, "/reasoning on")).startswith("💭 Reasoning on")
        fake_openai.reply("It is 4.", reasoning_content="Two and two.\nSo four.")
        before = len(posted(fake, DM, None))
        await fake.user_says("2+2?", chat=DM)
        await fake.wait_for(lambda: len(posted(fake, DM, None)) >= before + 2, WAIT, what="reasoning and answer")
        thought, answer = (shown(m["text"]) for m in posted(fake, DM, None)[before:before + 2])
        assert thought == "💭 Reasoning\n> Two and two.\n> So four."
        assert answer == "It is 4."
    assert rows(gw.db_path, "SELECT reasoning_content FROM messages WHERE content = 'It is 4.'") == [
        ("Two and two.\nSo four.",)]
