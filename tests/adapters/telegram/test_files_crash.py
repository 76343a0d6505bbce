"""kill -9 while an answer's files go out, then a restart: every file reaches the chat exactly once.

The daemon is a real process (``hermes-gateway run``) against FakeTelegram and the fake model in this
process. The agent sends three files, which go as three calls (a document, a photo, a document: Telegram
puts neither in an album with the other). FakeTelegram takes the first and holds the second before
taking it; the daemon is killed while it waits. The ledger row says one file was taken
(``gateway_outbound.files_sent``, which became 0 once the answer's text was out), so after the restart
only the other two files go: no file twice, and the text not again.

The window that remains: a file Telegram has fully taken whose answer the daemon never noted (killed
between the two). That file goes again after a restart (``sendDocument``/``sendPhoto`` have no key
Telegram could dedupe a retry by); the second test shows it.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import subprocess
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from PIL import Image

from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .._telegram_process import WAIT, telegram_daemon, until
from ..conftest import rows

ANSWER = "Here are your three files."
CSV = b"a,b\n1,2\n"
TXT = b"the third file\n"


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (0, 128, 255)).save(out, "PNG")
    return out.getvalue()


def daemon(home: Path, fake: FakeTelegram, model: FakeOpenAI) -> AbstractAsyncContextManager[subprocess.Popen[bytes]]:
    return telegram_daemon(home, fake, model, telegram={"streaming": False})


def ledger(db: Path) -> list[tuple[str, int, int]]:
    """Each reply's status, how many files it carries, and how many of them Telegram took."""
    return [(status, len(json.loads(files or "[]")), sent)
            for status, files, sent in rows(db, "SELECT status, files, files_sent FROM gateway_outbound ORDER BY id")]


def uploads(fake: FakeTelegram) -> list[tuple[str, bytes]]:
    """(method, bytes) of every file the bot sent, in order."""
    return [(m["method"], u.data) for m in fake.sent if m.get("files") for u in m["files"]]


def bot_texts(fake: FakeTelegram) -> list[str]:
    return [str(m.get("rendered") or m["text"]) for m in fake.sent if m["method"] == "sendMessage"]


async def killed_during_the_second_file(fake: FakeTelegram, model: FakeOpenAI, home: Path, *, taken: bool) -> bytes:
    """The agent sends three files; the daemon is killed while Telegram holds the second call, which it then
    takes (``taken``) or not; the daemon restarts and recovers. Returns the photo's bytes."""
    image = png()
    model.reply_tool_calls([
        {"name": "send_file", "arguments": {"content": CSV.decode(), "name": "a.csv"}},
        {"name": "send_file", "arguments": {"content_base64": base64.b64encode(image).decode(), "name": "b.png"}},
        {"name": "send_file", "arguments": {"content": TXT.decode(), "name": "c.txt"}},
    ]).reply(ANSWER)
    held = fake.uploads.hold("sendPhoto")
    async with daemon(home, fake, model) as proc:
        await until(lambda: fake.connected(), "the daemon to poll", proc)
        await fake.user_says("send me three files")
        await until(held.arrived.is_set, "the second file's upload", proc)
        # The first file was taken and noted before the second went up.
        await until(lambda: ledger(home / "state.db") == [("pending", 3, 1)], "the first file noted", proc)
        proc.kill()
        assert await asyncio.to_thread(proc.wait, 30) == -9
    if taken:
        held.release()
        await fake.wait_for(lambda: len(uploads(fake)) == 2, WAIT, what="the held photo taken")
    else:
        held.drop()
    assert bot_texts(fake) == [ANSWER]
    assert uploads(fake) == [("sendDocument", CSV)] + ([("sendPhoto", image)] if taken else [])
    requests_before = len(model.chat_requests)
    async with daemon(home, fake, model) as proc:
        await until(lambda: ledger(home / "state.db") == [("recovered", 3, 3)], "the row to be closed", proc)
    # The question was not asked again.
    assert len(model.chat_requests) == requests_before
    return image


async def test_files_cut_off_by_a_kill_go_out_exactly_once_after_the_restart(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    fake, home = fake_telegram, tmp_path / "h"
    # The daemon died with its upload unfinished: Telegram made nothing of it.
    image = await killed_during_the_second_file(fake, fake_openai, home, taken=False)
    assert uploads(fake) == [("sendDocument", CSV), ("sendPhoto", image), ("sendDocument", TXT)]
    assert bot_texts(fake) == [ANSWER]
    names = [u.filename for m in fake.sent if m["method"] == "sendDocument" for u in m["files"]]
    assert names == ["a.csv", "c.txt"]
    # The text was noted as out before the files went: after the restart, only the files that had not.
    assert [m["method"] for m in fake.sent] == ["sendMessage", "sendDocument", "sendPhoto", "sendDocument"]

    async with daemon(home, fake, fake_openai) as proc:  # once: a second restart sends nothing again
        await until(lambda: fake.connected(), "the daemon to poll again", proc)
        # Recovery runs as the adapter connects, ahead of the next question's answer.
        await fake.user_says("thanks")
        await until(lambda: len(bot_texts(fake)) == 2, "the next answer", proc)
    assert bot_texts(fake)[1] == "echo: thanks"
    assert len(uploads(fake)) == 3
    assert ledger(home / "state.db")[0] == ("recovered", 3, 3)


async def test_a_file_telegram_took_after_the_daemon_died_goes_again(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram
) -> None:
    """The window the ledger leaves: the whole request had reached Telegram, which made the message after
    the daemon died, so ``files_sent`` never counted it. At least once, not exactly once, for that file."""
    fake, home = fake_telegram, tmp_path / "h"
    image = await killed_during_the_second_file(fake, fake_openai, home, taken=True)
    assert uploads(fake) == [("sendDocument", CSV), ("sendPhoto", image), ("sendPhoto", image), ("sendDocument", TXT)]
