"""A streamed answer through the whole daemon on Slack: with Slack's streaming methods in a channel's
thread, by post-and-edit in a DM, each ending with exactly the stored text."""

from __future__ import annotations

import itertools
from pathlib import Path

from adapters._split import join_chunks
from tests.emulators.fake_slack import FakeSlack
from tests.fakes.openai_server import FakeOpenAI

from ..conftest import assistant_rows, stored_answers
from .test_adapter import run_slack_gateway

WAIT = 30.0
CHANNEL = "C0CHAN001"
DM = "D0DM0001"
STREAMING = {"streaming": {"min_chars": 10, "first_delay": 0.2, "edit_interval": 0.3}}
ANSWER = " ".join(f"word{i}" for i in range(60)) + " done."



def bot_messages(fake: FakeSlack, channel: str) -> list[tuple[str, str]]:
    """(ts, text) of what the bot shows in ``channel`` now."""
    return [(ts, m["text"]) for (c, ts), m in fake.messages.items() if c == channel and m.get("bot_id")]


async def answered(fake: FakeSlack, channel: str) -> None:
    await fake.wait_for(lambda: [t for _, t in bot_messages(fake, channel)] == [ANSWER], WAIT,
                        what="the whole answer, alone")


async def test_a_channel_thread_streams_with_slacks_methods(tmp_path: Path, fake_openai: FakeOpenAI,
                                                            fake_slack: FakeSlack) -> None:
    fake = fake_slack
    fake_openai.tokens_per_second = 30
    fake_openai.reply(ANSWER)
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, config=STREAMING) as gw:
        await fake.user_says("tell the channel a story", chat=CHANNEL, mention=True)
        await answered(fake, CHANNEL)
        [(ts, _)] = bot_messages(fake, CHANNEL)
        shown = fake.versions(CHANNEL, ts)
        assert len(shown) >= 3 and shown[-1] == ANSWER
        assert all(b.startswith(a) for a, b in itertools.pairwise(shown))
        assert fake.calls_to("chat.startStream") and fake.calls_to("chat.stopStream")
        assert await stored_answers(gw.home / "state.db") == [(ANSWER, "stop")]


async def test_a_dm_is_posted_then_edited(tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack) -> None:
    fake = fake_slack
    fake_openai.tokens_per_second = 30
    fake_openai.reply(ANSWER)
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, config=STREAMING) as gw:
        await fake.user_says("tell me a story", chat=DM)
        await answered(fake, DM)
        [(ts, _)] = bot_messages(fake, DM)
        shown = fake.versions(DM, ts)
        assert len(shown) >= 3 and shown[-1] == ANSWER
        assert fake.calls_to("chat.update")
        assert await stored_answers(gw.home / "state.db") == [(ANSWER, "stop")]


async def test_a_long_streamed_answer_continues_in_new_messages_and_loses_nothing(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    words = " ".join(f"w{i}&x" for i in range(2500))
    fake_openai.tokens_per_second = 2000
    fake_openai.reply(words)
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, config=STREAMING) as gw:
        await fake.user_says("long please", chat=CHANNEL, mention=True)
        await fake.wait_for(lambda: assistant_rows(gw.home / "state.db") != [], WAIT, what="the answer stored")
        chunks = gw.adapter.split(words)

        def whole() -> bool:
            shown = [t.replace("&amp;", "&") for _, t in sorted(bot_messages(fake, CHANNEL))]
            return join_chunks(shown) == words

        await fake.wait_for(whole, WAIT, what="every part of the answer shown")
        assert len(bot_messages(fake, CHANNEL)) == len(chunks)
        assert not any(m.get("streaming") for m in fake.messages.values())


async def test_a_quick_answers_final_form_follows_its_preview_without_waiting_the_pace(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    """The chat's budget lets an answer's final edit follow its only preview at once: with a 20 s
    edit interval, a fixed gap between edits would hold the answer (and the chat) for 20 s."""
    fake = fake_slack
    short = "word1 word2 word3 word4 word5 word6 done."
    fake_openai.tokens_per_second = 30
    fake_openai.reply(short)
    config = {"streaming": {"min_chars": 10, "first_delay": 0, "edit_interval": 20.0}}
    async with run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, config=config):
        await fake.user_says("quick one", chat=DM)
        await fake.wait_for(lambda: [t for _, t in bot_messages(fake, DM)] == [short], 10,
                            what="the final form well before the 20 s pace")
        [(ts, _)] = bot_messages(fake, DM)
        shown = fake.versions(DM, ts)
        assert len(shown) >= 2 and shown[0] != short  # a preview went out first, then the final edit
