"""/export-my-data and /forget-me through the whole daemon on Telegram (FakeTelegram, the scripted
model): alice and bob talk in their DMs and in a shared group; alice takes her data out (a JSON file
in her DM, asked in the group), then has it deleted with the button (bob's press is refused); no
row of hers is left, FTS tables included, and bob's rows are as they were. Also: a confirmation
with nothing pending, /forget-me while her turn runs, a DM the bot cannot reach."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from adapters.approvals import approval_data
from storage import FORGOTTEN_MARKER
from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI
from tests.storage._userdata_fixture import fts_hits, rows_naming, wait_indexed

from ..conftest import RunningTelegram, run_telegram_gateway, stored_answers
from .test_approvals_e2e import approval_id, wait_prompt, wait_said, wait_settled

ALICE_WORD, BOB_WORD = "zorbalicious", "quaxbobbly"


def gateway(tmp_path: Path, fake: FakeTelegram, fake_openai: FakeOpenAI, users: str) -> Any:
    # One shared session per group: a group's transcript holds both people's messages.
    return run_telegram_gateway(tmp_path / "h", fake, fake_openai.base_url,
                                config={"gateway": {"group_sessions_per_user": False, "typing_delay": 0}},
                                telegram={"require_mention": False}, env={"TELEGRAM_ALLOWED_USERS": users})


def _db(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path))
    conn.row_factory = sqlite3.Row
    return conn


def _messages(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute("SELECT id, session_id, role, content FROM messages ORDER BY id")]


async def _history(gw: RunningTelegram, fake: FakeTelegram, fake_openai: FakeOpenAI, bob: dict[str, Any],
                   group: dict[str, Any]) -> None:
    said = 0
    for text, chat, user in ((f"{ALICE_WORD} in my DM", None, None), (f"{ALICE_WORD} to the group", group, None),
                             (f"{BOB_WORD} to the group", group, bob),
                             (f"{BOB_WORD} in my DM", fake.private_chat(bob), bob)):
        said += 1
        fake_openai.reply(f"answer {said}")
        await fake.user_says(text, chat=chat, user=user)
        await stored_answers(gw.db_path, said)
        await wait_said(fake, (chat or fake.private_chat())["id"], f"answer {said}")


async def test_export_then_forget_with_the_button_leaves_nothing_of_hers(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    bob, group = fake.add_user("Bob"), fake.group()
    alice_id, alice_dm = str(fake.user["id"]), fake.private_chat()["id"]
    async with gateway(tmp_path, fake, fake_openai, f"{alice_id},{bob['id']}") as gw:
        await _history(gw, fake, fake_openai, bob, group)
        with _db(gw.db_path) as conn:
            before = _messages(conn)
            bob_before = [m for m in before if BOB_WORD in (m[3] or "") or m[1] in {
                r[0] for r in conn.execute("SELECT session_id FROM gateway_session_index WHERE user_id = ?",
                                           (str(bob["id"]),))}]

        # Asked in the group, the file goes to her DM.
        await fake.user_says("/export-my-data", chat=group)
        await wait_said(fake, group["id"], "I sent your data to you in a direct message")
        [doc] = [s for s in fake.sent if s["method"] == "sendDocument" and s["chat_id"] == alice_dm]
        export = json.loads(next(u.data for u in fake.uploads.files.values() if u.filename and u.filename.endswith(".json")))
        assert export["sender"] == {"platform": "telegram", "user_id": alice_id}
        by_shared = {s["shared"]: s for s in export["sessions"]}
        assert [m["content"] for m in by_shared[False]["messages"]] == [f"{ALICE_WORD} in my DM", "answer 1"]
        assert [m["content"] for m in by_shared[True]["messages"]] == [f"{ALICE_WORD} to the group"]
        assert all(m["timestamp"].endswith("+00:00") for s in export["sessions"] for m in s["messages"])
        assert BOB_WORD not in json.dumps(export)
        assert export["memory"] is None  # not an owner: the profile is not hers

        # Nothing pending: a typed confirmation is refused clearly.
        await fake.user_says("/forget-me confirm")
        await wait_said(fake, alice_dm, "No deletion of your data is waiting")

        await fake.user_says("/forget-me", chat=group)
        prompt = await wait_prompt(fake, group["id"])
        assert [b["text"] for b in prompt["reply_markup"]["inline_keyboard"][0]] == ["🗑 Delete my data", "Cancel"]
        assert "1 conversation(s) of yours" in prompt["rendered"] and "1 shared one(s)" in prompt["rendered"]
        data = approval_data(approval_id(prompt), "approve")
        await fake.user_presses((group, prompt["message_id"]), data, user=bob)
        await wait_said(fake, group["id"], "Only the person who asked to delete their data")
        await wait_indexed(gw.db_path)
        with _db(gw.db_path) as conn:
            assert _messages(conn) == before  # bob's press deleted nothing
            assert fts_hits(conn, ALICE_WORD) > 0  # indexed before the forget: its removal below is real
        await fake.user_presses((group, prompt["message_id"]), data)
        await wait_settled(fake, group["id"], prompt, "Deleting your data")
        report = await wait_said(fake, group["id"], "Your data is deleted")
        assert "sessions deleted: 1" in report["rendered"]
        assert "messages replaced by a marker in shared sessions: 1" in report["rendered"]

        await wait_indexed(gw.db_path)
        with _db(gw.db_path) as conn:
            assert fts_hits(conn, ALICE_WORD) == 0
            assert rows_naming(conn, ALICE_WORD, inside=True) == []
            assert rows_naming(conn, alice_id) == []
            # Nor inside any text (a delivery key, a ledger row, who asked for the forget).
            assert rows_naming(conn, alice_id, inside=True) == []
            after = _messages(conn)
            assert [m for m in after if m in bob_before] == bob_before  # bob's rows as they were
            assert fts_hits(conn, BOB_WORD) == 4
            shared = [m for m in after if m[1] == next(b for b in bob_before if BOB_WORD in (b[3] or "")
                                                       and "group" in b[3])[1]]
            assert [m[3] for m in shared] == [FORGOTTEN_MARKER, "answer 2", f"{BOB_WORD} to the group", "answer 3"]
            assert [tuple(r) for r in conn.execute("SELECT state, user_id FROM gateway_forget_requests")] == [("done", None)]
            assert conn.execute("SELECT COUNT(*) FROM gateway_outbound WHERE chat_id = ?",
                                (str(alice_dm),)).fetchone()[0] == 0  # the export's delivery record too
        assert doc["chat_id"] == alice_dm
        # The export's file left the media store.
        assert not [p for p in (gw.home / "media").rglob("*") if p.is_file() and p.stat().st_size > 200]


async def test_refusals_turn_running_and_unreachable_dm(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake = fake_telegram
    group = fake.group()
    alice_dm = fake.private_chat()["id"]
    async with gateway(tmp_path, fake, fake_openai, str(fake.user["id"])) as gw:
        hold = fake_openai.hold_when(lambda body: "slow question" in json.dumps(body))
        fake_openai.reply("slow answer")
        await fake.user_says("slow question")
        await hold.arrived.wait()
        await fake.user_says("/forget-me", chat=group)
        await wait_said(fake, group["id"], "A reply is being written right now in a conversation of yours")
        hold.release.set()
        await wait_said(fake, alice_dm, "slow answer")
        await stored_answers(gw.db_path, 1)

        # A DM the bot cannot write to: the group is told, clearly.
        fake.block_bot(alice_dm)
        await fake.user_says("/export-my-data", chat=group)
        await wait_said(fake, group["id"], "I could not send the file to your direct messages")
        fake.unblock_bot(alice_dm)

        # Cancel by typing: nothing deleted.
        await fake.user_says("/forget-me")
        prompt = await wait_prompt(fake, alice_dm)
        assert "Delete all your data here?" in prompt["rendered"]
        await fake.user_says("/forget-me cancel")
        await wait_settled(fake, alice_dm, prompt, "Cancelled: nothing was deleted")
        await wait_indexed(gw.db_path)
        with _db(gw.db_path) as conn:
            assert fts_hits(conn, "slow") == 4

        # Confirmed while a turn of hers runs: refused, the question keeps waiting, its button works after.
        await fake.user_says("/forget-me")
        prompt = await wait_prompt(fake, alice_dm, 2)
        hold = fake_openai.hold_when(lambda body: "second slow one" in json.dumps(body))
        fake_openai.reply("second slow answer")
        await fake.user_says("second slow one", chat=group)
        await hold.arrived.wait()
        data = approval_data(approval_id(prompt), "approve")
        await fake.user_presses((alice_dm, prompt["message_id"]), data)
        await wait_said(fake, alice_dm, "A reply is being written right now in a conversation of yours")
        hold.release.set()
        await wait_said(fake, group["id"], "second slow answer")
        await stored_answers(gw.db_path, 2)
        await fake.user_presses((alice_dm, prompt["message_id"]), data)
        await wait_said(fake, alice_dm, "Your data is deleted")
        await wait_indexed(gw.db_path)
        with _db(gw.db_path) as conn:
            # Her DM is gone; in the (shared) group her words are a marker, the answer stays.
            assert [r[3] for r in _messages(conn)] == [FORGOTTEN_MARKER, "second slow answer"]
            assert fts_hits(conn, "question") == 0 and fts_hits(conn, "one") == 0
