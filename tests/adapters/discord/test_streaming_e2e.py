"""A streamed answer through the whole daemon on Discord: one message, posted, then edited as the slow
fake model writes, ending with exactly the stored text."""

from __future__ import annotations

import itertools
from pathlib import Path

from tests.emulators.fake_discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI

from ..conftest import stored_answers
from .test_adapter import run_discord_gateway

WAIT = 30.0
STREAMING = {"streaming": {"min_chars": 10, "first_delay": 0.2, "edit_interval": 0.3}}
ANSWER = " ".join(f"word{i}" for i in range(60)) + " done."



async def test_a_slow_answer_is_posted_then_edited_and_ends_as_the_stored_text(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.tokens_per_second = 30
    fake_openai.reply(ANSWER)
    async with FakeDiscord() as fake, run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                                           config=STREAMING) as gw:
        await fake.user_says("tell me a story")
        await fake.wait_for(lambda: any(m["method"] == "edit_message" and m["text"] == ANSWER for m in fake.sent),
                            WAIT, what="the whole answer shown")
        channel = fake.sent[0]["chat_id"]
        bot = [m for m in fake.channel_messages(channel) if m["author"]["id"] == fake.bot["id"]]
        assert [m["content"] for m in bot] == [ANSWER]
        shown = [m["text"] for m in fake.sent if m["message_id"] == bot[0]["id"] or m["method"] == "create_message"]
        assert len(shown) >= 3, shown
        assert all(b.startswith(a) for a, b in itertools.pairwise(shown))
        assert await stored_answers(gw.home / "state.db") == [(ANSWER, "stop")]
