"""A streamed answer through the whole daemon: the fake model writes slowly, FakeTelegram shows it.

What a person sees (drafts in a private chat, a message edited in place in a group) and what is
stored (the final text, once) are checked together; the stream's own mechanics against the
emulator are in test_stream.py.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from ..conftest import RunningTelegram, assistant_rows, run_telegram_gateway, stored_answers

WAIT = 30.0
INTERVAL = 0.25
#: quick but real pacing: the first text after 10 characters, then an edit at most every 0.25 s
STREAMING = {"streaming": {"min_chars": 10, "first_delay": 0.2, "edit_interval": INTERVAL}}
ANSWER = " ".join(f"word{i}" for i in range(60)) + " done."



def visible_calls(fake: FakeTelegram, chat_id: int,
                  shown: frozenset[str] = frozenset({"sendmessage", "editmessagetext", "sendmessagedraft"})
                  ) -> list[float]:
    """When each call of ``shown`` that showed or changed text in ``chat_id`` reached the fake."""
    return [c.time for c in fake.calls
            if c.method.lower() in shown and c.params.get("chat_id") == chat_id and c.status == 200]


async def slow_answer(fake_openai: FakeOpenAI, text: str = ANSWER, rate: float = 40.0) -> None:
    fake_openai.tokens_per_second = rate
    fake_openai.reply(text)


async def test_a_private_chat_sees_the_answer_grow_as_drafts_then_gets_exactly_the_stored_text(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    await slow_answer(fake_openai)
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, config=STREAMING) as gw:
        await fake.user_says("tell me a long story")
        sent = await fake.wait_sent(1, timeout=WAIT)
        chat = fake.private_chat()["id"]
        drafts = fake.draft_states(chat)
        assert len(drafts) >= 3, drafts
        assert all(b.startswith(a) for a, b in itertools.pairwise(drafts))  # the preview only grows
        assert sent[-1]["method"] == "sendMessage" and sent[-1]["rendered"] == ANSWER
        assert await stored_answers(gw.db_path) == [(ANSWER, "stop")]
        # The drafts keep the pace; the answer is a new message, which need not wait for it.
        calls = visible_calls(fake, chat, frozenset({"sendmessagedraft"}))
        assert all(b - a >= INTERVAL - 0.02 for a, b in itertools.pairwise(calls))


async def test_a_group_sees_one_message_edited_in_place_within_the_pace(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    group = fake.group()
    await slow_answer(fake_openai)
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, config=STREAMING,
                                    telegram={"require_mention": False}) as gw:
        await fake.user_says("tell the group a story", chat=group)
        await wait_for_text(fake, group["id"], ANSWER)
        history = [m for m in fake.history(group) if m.get("from", {}).get("id") == fake.bot_id]
        assert [m["text"] for m in history] == [ANSWER]  # one message, which now shows the whole answer
        edits = [s for s in fake.sent if s["method"] == "editMessageText" and s["chat_id"] == group["id"]]
        assert len(edits) >= 3
        assert await stored_answers(gw.db_path) == [(ANSWER, "stop")]
        calls = visible_calls(fake, group["id"])
        # the previews keep the pace; the final edit may follow the last one at once (the chat's
        # budget allows two back to back, one per interval on average)
        assert all(b - a >= INTERVAL - 0.02 for a, b in itertools.pairwise(calls[:-1]))
        assert all(z - x >= INTERVAL - 0.02 for x, z in zip(calls, calls[2:], strict=False))


async def test_a_429_on_an_edit_slows_the_stream_and_loses_nothing(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    group = fake.group()
    await slow_answer(fake_openai)
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, config=STREAMING,
                                    telegram={"require_mention": False}) as gw:
        fake.rate_limit_chat(group, retry_after=1, times=2, methods=("editMessageText",))
        await fake.user_says("a story despite the flood", chat=group)
        await wait_for_text(fake, group["id"], ANSWER)
        refused = [c for c in fake.calls if c.method == "editMessageText" and c.status == 429]
        assert len(refused) >= 1
        history = [m["text"] for m in fake.history(group) if m.get("from", {}).get("id") == fake.bot_id]
        assert history == [ANSWER]
        assert await stored_answers(gw.db_path) == [(ANSWER, "stop")]


async def test_stop_mid_stream_leaves_the_partial_text_visible_and_stored_marked_stopped(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    group = fake.group()
    await slow_answer(fake_openai, " ".join(f"slow{i}" for i in range(400)), rate=20.0)
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, config=STREAMING,
                                    telegram={"require_mention": False}) as gw:
        await fake.user_says("a very long story", chat=group)
        await fake.wait_for(lambda: len([s for s in fake.sent if s["method"] == "editMessageText"]) >= 2,
                            WAIT, what="the answer streaming")
        await fake.user_says("/stop", chat=group)
        await fake.wait_for(lambda: any(str(m.get("text", "")).endswith("⚡ Stopped.")
                                        for m in fake.history(group)), WAIT, what="the stopped answer")
        stored = await wait_rows(gw, lambda rows: any(r[1] == "stopped" for r in rows))
        partial = next(content for content, reason in stored if reason == "stopped")
        assert partial.startswith("slow0 slow1") and not partial.endswith("slow399")
        shown = next(m["text"] for m in fake.history(group) if str(m.get("text", "")).endswith("⚡ Stopped."))
        assert shown == f"{partial.rstrip()}\n\n⚡ Stopped."


async def test_a_model_server_that_ignores_stream_still_answers_whole(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    fake_openai.ignore_stream = True
    fake_openai.reply(ANSWER)
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, config=STREAMING) as gw:
        await fake.user_says("no streaming here")
        sent = await fake.wait_sent(1, timeout=WAIT)
        assert [s["rendered"] for s in sent] == [ANSWER]
        assert fake.draft_states(fake.private_chat()["id"]) == []
        assert fake_openai.chat_requests[0].body["stream"] is True  # asked, and answered whole
        assert await stored_answers(gw.db_path) == [(ANSWER, "stop")]


async def test_streaming_switched_off_for_telegram_sends_the_answer_whole(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    await slow_answer(fake_openai)
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, config=STREAMING,
                                    telegram={"streaming": False}):
        await fake.user_says("all at once please")
        sent = await fake.wait_sent(1, timeout=WAIT)
        assert [s["rendered"] for s in sent] == [ANSWER]
        assert fake.draft_states(fake.private_chat()["id"]) == []
        assert not fake_openai.chat_requests[0].body.get("stream")


async def test_tool_progress_shows_while_a_tool_runs_and_is_replaced_by_the_answer(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    fake_openai.reply_tool_calls([{"name": "memory", "arguments": {"action": "read", "target": "memory"}}],
                                 content="Let me check my notes first.")
    fake_openai.delay(1.0)  # the tool's line stays up a moment before the answer starts
    await slow_answer(fake_openai)
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                    config=STREAMING, telegram={"tool_progress": True}) as gw:
        await fake.user_says("what do you remember?")
        sent = await fake.wait_sent(1, timeout=WAIT)
        drafts = fake.draft_states(fake.private_chat()["id"])
        assert any("running memory" in d for d in drafts), drafts
        assert sent[-1]["rendered"] == ANSWER
        rows = assistant_rows(gw.db_path)
        assert rows[-1] == (ANSWER, "stop")


# ------------------------------------------------------------------ helpers


async def wait_for_text(fake: FakeTelegram, chat_id: int, text: str) -> None:
    def shows() -> bool:
        return any(m.get("text") == text for m in fake.history(chat_id))

    await fake.wait_for(shows, WAIT, what=f"{text[:20]!r}... shown in {chat_id}")


async def wait_rows(gw: RunningTelegram, ready: Any) -> list[tuple[str, str | None]]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while True:
        rows = assistant_rows(gw.db_path)
        if ready(rows) or loop.time() > deadline:
            return rows
        await asyncio.sleep(0.05)
