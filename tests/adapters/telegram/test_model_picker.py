"""/model's menu on Telegram through the whole daemon: an inline keyboard (one model a row, the one
in force marked), a press (a callback_query) switching the session, the menu edited into the
outcome, and the next turn reaching the model server with the new model. A press from someone else,
or on a menu a newer one replaced, is refused and changes nothing."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from adapters.choices import choice_data
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from ..conftest import run_telegram_gateway
from .test_approvals_e2e import wait_prompt, wait_said, wait_settled

MODELS = {"allowed": ["fake-model", {"name": "big-model", "label": "Big one"}, "tiny-model"]}


def menu_id(prompt: dict[str, Any]) -> str:
    return str(prompt["reply_markup"]["inline_keyboard"][0][0]["callback_data"]).split(":")[2]


def gateway(tmp_path: Path, fake: FakeTelegram, fake_openai: FakeOpenAI, *, users: str | None = None) -> Any:
    return run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url, config={"models": MODELS},
                                telegram={"require_mention": False},
                                env={"TELEGRAM_ALLOWED_USERS": users} if users else None)


async def test_the_keyboard_switches_this_sessions_model(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    async with gateway(tmp_path, fake, fake_openai) as running:
        chat = fake.private_chat()["id"]
        await fake.user_says("/model")
        prompt = await wait_prompt(fake, chat)
        rows = prompt["reply_markup"]["inline_keyboard"]
        assert [[b["text"] for b in row] for row in rows] == [["✓ fake-model"], ["Big one"], ["tiny-model"]]
        mid = menu_id(prompt)
        assert [row[0]["callback_data"] for row in rows] == [choice_data("model", mid, i) for i in range(3)]
        assert "Model: fake-model" in prompt["rendered"]
        await fake.user_presses((chat, prompt["message_id"]), choice_data("model", mid, 1))
        await wait_settled(fake, chat, prompt, "This session now uses Big one (was fake-model)")
        assert len(fake.buttons.answers) == 1
        # The answer streams (Telegram drafts); its usage comes in the stream's last chunk.
        fake_openai.reply("a streamed answer", usage={"prompt_tokens": 321, "completion_tokens": 3,
                                                      "total_tokens": 324,
                                                      "prompt_tokens_details": {"cached_tokens": 300}})
        await fake.user_says("hello there")
        await wait_said(fake, chat, "a streamed answer")
        [request] = fake_openai.chat_requests
        assert request.body["model"] == "big-model" and request.body["stream"] is True
        await fake.user_says("/usage")
        report = await wait_said(fake, chat, "Model calls:")
        assert "Model calls: 1" in report["rendered"] and "Prompt tokens: 321 (cached: 300)" in report["rendered"]
        with contextlib.closing(sqlite3.connect(running.db_path)) as conn:
            assert conn.execute("SELECT input_tokens, output_tokens, cache_read_tokens, api_call_count, model "
                                "FROM sessions").fetchall() == [(321, 3, 300, 1, "big-model")]


async def test_another_persons_press_and_a_replaced_menu_are_refused(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    bob = fake.add_user("Bob")
    group = fake.group()
    async with gateway(tmp_path, fake, fake_openai, users=f"{fake.user['id']},{bob['id']}"):
        await fake.user_says("/model", chat=group)
        first = await wait_prompt(fake, group["id"])
        await fake.user_presses((group, first["message_id"]), choice_data("model", menu_id(first), 2), user=bob)
        refusal = await wait_said(fake, group["id"], "This model menu is Alice")
        assert refusal["reply_to"] == first["message_id"]
        assert "reply_markup" in (fake.message(group, first["message_id"]) or {})
        await fake.user_says("/model", chat=group)
        second = await wait_prompt(fake, group["id"], 2)
        await fake.user_presses((group, first["message_id"]), choice_data("model", menu_id(first), 2))
        await wait_said(fake, group["id"], "no longer current")
        await fake.user_presses((group, second["message_id"]), choice_data("model", menu_id(second), 2))
        await wait_settled(fake, group["id"], second, "now uses tiny-model")
        # A press arriving again for the answered menu changes nothing either.
        await fake.user_presses((group, second["message_id"]), choice_data("model", menu_id(second), 1), stale=True)
        await fake.wait_for(lambda: len([s for s in fake.sent if s["method"] == "sendMessage"
                                         and "no longer current" in s["rendered"]]) == 2 or None, 20.0,
                            what="the second refusal")
        await fake.user_says("and now?", chat=group)
        await wait_said(fake, group["id"], "echo: and now?")
        assert [r.body["model"] for r in fake_openai.chat_requests] == ["tiny-model"]
