"""/retry, /undo and /btw on Telegram: the real daemon and python-telegram-bot against ``FakeTelegram``,
the scripted ``FakeOpenAI`` (which records every request: what the model is shown next is asserted on it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.commands.conversation import BUSY
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI
from tests.storage._userdata_fixture import wait_indexed

from ..conftest import rows, run_telegram_gateway

WAIT = 15.0


def bot_texts(fake: FakeTelegram) -> list[str]:
    chat = fake.user["id"]
    return [str(m.get("text", "")) for m in fake.history(chat) if m.get("from", {}).get("id") == fake.bot_id]


async def say(fake: FakeTelegram, text: str, expect: str) -> None:
    """Send ``text``; wait until the bot has shown ``expect`` (once more than before)."""
    before = bot_texts(fake).count(expect)
    await fake.user_says(text)
    await fake.wait_for(lambda: bot_texts(fake).count(expect) > before, WAIT, what=repr(expect))


def seen_by_model(request: Any) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in request.body["messages"] if m["role"] != "system"]


def stored(db: Path) -> list[tuple[str, str, bool]]:
    """Every message: (role, content, superseded)."""
    return [(r[0], r[1], bool(r[2])) for r in rows(
        db, "SELECT role, COALESCE(content, ''), EXISTS (SELECT 1 FROM gateway_superseded s WHERE s.message_id = m.id) "
            "FROM messages m ORDER BY id")]


_WORDS = "one OR two OR three OR four OR five OR echo"


async def fts_rows(db: Path) -> tuple[int, int]:
    """Index entries (word and substring index) of this test's messages, once the indexer caught up."""
    await wait_indexed(db)
    return (rows(db, "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?", _WORDS)[0][0],
            rows(db, "SELECT COUNT(*) FROM messages_fts_trigram WHERE messages_fts_trigram MATCH ?", _WORDS)[0][0])


async def test_retry_replaces_the_answer_and_the_model_never_sees_the_old_one(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        fake_openai.reply("a bad answer")
        await say(fake, "what is 2+2?", "a bad answer")
        fake_openai.reply("four")
        await say(fake, "/retry", "four")
        retry_request = fake_openai.chat_requests[-1]
        assert seen_by_model(retry_request) == [("user", "what is 2+2?")]
        fake_openai.reply("you are welcome")
        await say(fake, "thanks", "you are welcome")
        assert seen_by_model(fake_openai.chat_requests[-1]) == [
            ("user", "what is 2+2?"), ("assistant", "four"), ("user", "thanks")]
        # the old answer is kept, marked, and was never sent again
        assert stored(gw.db_path) == [("user", "what is 2+2?", False), ("assistant", "a bad answer", True),
                                      ("assistant", "four", False), ("user", "thanks", False),
                                      ("assistant", "you are welcome", False)]
        assert bot_texts(fake).count("a bad answer") == 1
        # and the agent's session_search finds it no more
        assert await gw.gateway.services.store.search_messages("bad") == []  # type: ignore[union-attr]
        assert await gw.gateway.services.store.search_messages("four")  # type: ignore[union-attr]


async def test_a_retry_whose_model_fails_leaves_the_old_answer_standing(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        fake_openai.reply("the only answer")
        await say(fake, "hello", "the only answer")
        fake_openai.fail(400)
        before = len(bot_texts(fake))
        await fake.user_says("/retry")
        await fake.wait_for(lambda: len(bot_texts(fake)) > before, WAIT, what="the failure notice")
        assert "⚠️" in bot_texts(fake)[-1]
        await say(fake, "again", "echo: again")
        assert seen_by_model(fake_openai.chat_requests[-1]) == [
            ("user", "hello"), ("assistant", "the only answer"), ("user", "again")]
        assert [s for _, _, s in stored(gw.db_path)] == [False, False, False, False]


async def test_retry_and_undo_refuse_what_they_cannot_do(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        await say(fake, "/retry", "Nothing to retry: this chat has no conversation yet.")
        await say(fake, "/undo", "Nothing to undo: this chat has no conversation yet.")
        await say(fake, "/btw", "Usage: /btw <question> — a side question about this conversation, "
                                "answered without adding to it.")
        await say(fake, "/btw what now?", "There is no conversation here yet to ask about: just send your question.")
        fake_openai.fail(400)
        before = len(bot_texts(fake))
        await fake.user_says("unanswered")
        await fake.wait_for(lambda: len(bot_texts(fake)) > before, WAIT, what="the failure notice")
        await say(fake, "/retry", "Your last message has no answer yet, so there is nothing to retry. "
                                  "Send it again instead.")
        for bad in ("abc", "0", "-1", "1.5", "٣"):
            await say(fake, f"/undo {bad}", "Usage: /undo [n] — takes back your last n messages and their "
                                            "answers (n is a whole number, 1 or more; 1 when left out).")
        assert stored(gw.db_path) == [("user", "unanswered", False)]
        # while a turn runs, neither touches the history
        hold = fake_openai.hold_when(lambda body: "slow one" in str(body.get("messages")))
        await fake.user_says("slow one")
        await hold.arrived.wait()
        await say(fake, "/retry", BUSY.format(name="retry"))
        await say(fake, "/undo", BUSY.format(name="undo"))
        hold.release.set()
        await fake.wait_for(lambda: "echo: slow one" in bot_texts(fake), WAIT, what="the slow answer")
        assert [r for r, _, _ in stored(gw.db_path)] == ["user", "user", "assistant"]


async def test_undo_removes_exchanges_with_their_search_rows_and_the_model_sees_the_rest(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        db = gw.db_path
        for word in ("one", "two", "three", "four"):
            await say(fake, word, f"echo: {word}")
        assert await fts_rows(db) == (8, 8)
        await say(fake, "/undo", "↩️ Removed the last exchange (2 messages in all).")
        await say(fake, "/undo 2", "↩️ Removed the last 2 exchanges (4 messages in all).")
        assert [c for _, c, _ in stored(db)] == ["one", "echo: one"]
        assert await fts_rows(db) == (2, 2)
        assert rows(db, "SELECT message_count FROM sessions") == [(2,)]
        await say(fake, "five", "echo: five")
        assert seen_by_model(fake_openai.chat_requests[-1]) == [
            ("user", "one"), ("assistant", "echo: one"), ("user", "five")]
        await say(fake, "/undo 1000", "↩️ There were only 2 exchanges here: removed all of them (4 messages). "
                                      "This conversation is empty now.")
        assert stored(db) == [] and await fts_rows(db) == (0, 0)
        await say(fake, "/undo", "Nothing to undo: this conversation has no message of yours yet.")
        await say(fake, "/retry", "Nothing to retry: this conversation has no message of yours yet.")


async def test_undo_takes_a_retried_exchange_with_its_superseded_answer(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        await say(fake, "keep", "echo: keep")
        fake_openai.reply("first try")
        await say(fake, "drop", "first try")
        fake_openai.reply("second try")
        await say(fake, "/retry", "second try")
        await say(fake, "/undo", "↩️ Removed the last exchange (3 messages in all).")
        assert stored(gw.db_path) == [("user", "keep", False), ("assistant", "echo: keep", False)]
        assert rows(gw.db_path, "SELECT COUNT(*) FROM gateway_superseded") == [(0,)]


async def test_btw_answers_on_the_conversation_and_adds_nothing_to_it(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    fake = fake_telegram
    async with run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url) as gw:
        fake_openai.reply("Paris")
        await say(fake, "capital of France?", "Paris")
        before = stored(gw.db_path)
        fake_openai.reply("You asked about France.")
        await say(fake, "/btw what did I ask?", "💬 (by the way) You asked about France.")
        side = fake_openai.chat_requests[-1]
        assert seen_by_model(side) == [("user", "capital of France?"), ("assistant", "Paris"),
                                       ("user", "what did I ask?")]
        assert "tools" not in side.body
        assert stored(gw.db_path) == before
        await say(fake, "and Spain?", "echo: and Spain?")
        assert seen_by_model(fake_openai.chat_requests[-1]) == [
            ("user", "capital of France?"), ("assistant", "Paris"), ("user", "and Spain?")]


async def api(gw: Any, text: str) -> str:
    body = {"model": "fake-model", "messages": [{"role": "user", "content": text}], "user": "alice"}
    resp = await gw.http.post("/v1/chat/completions", json=body)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["choices"][0]["message"]["content"])


async def test_the_http_api_retries_undoes_and_asks_by_the_way(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    async with run_telegram_gateway(tmp_path / "h", fake_telegram, fake_openai.base_url) as gw:
        fake_openai.reply("meh")
        assert await api(gw, "a poem") == "meh"
        fake_openai.reply("roses are red")
        assert await api(gw, "/retry") == "roses are red"
        assert seen_by_model(fake_openai.chat_requests[-1]) == [("user", "a poem")]
        fake_openai.reply("it was about roses")
        assert await api(gw, "/btw what was it about?") == "💬 (by the way) it was about roses"
        assert (await api(gw, "/bg later")).startswith("api-server only answers requests")
        assert await api(gw, "/undo") == "↩️ Removed the last exchange (3 messages in all)."
        assert stored(gw.db_path) == []
