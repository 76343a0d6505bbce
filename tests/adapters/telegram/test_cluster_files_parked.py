"""On PostgreSQL, a message with files that reaches a node before anybody serves its chat is
parked under the chat's lane, as a text message is: ``kill -9`` of that node while its turn runs
loses nothing. The node comes back (the same node id, a new process), takes the chat over when
the dead process's lease runs out, and answers the message from its stored question, once.

One real daemon process on a real PostgreSQL server, FakeTelegram polling."""

from __future__ import annotations

import asyncio
import io
import subprocess
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from PIL import Image

from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .._telegram_process import telegram_daemon, until
from ._cluster import answers, pollers, wait_cluster


def png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (0, 128, 255)).save(out, "PNG")
    return out.getvalue()


async def test_a_photo_at_a_node_not_yet_serving_its_chat_survives_kill_9(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram, pg_url: str
) -> None:
    fake, home, chat = fake_telegram, tmp_path / "n1", fake_telegram.user["id"]
    hold = fake_openai.hold_when(lambda body: "what is this" in str(body["messages"][-1]))

    def node() -> AbstractAsyncContextManager[subprocess.Popen[bytes]]:
        return telegram_daemon(home, fake, fake_openai, telegram={"streaming": False}, storage={"url": pg_url},
                               logging={"level": "info"},
                               cluster={"node_id": "n1", "failover_s": 3})

    async with node() as proc:
        await wait_cluster(home, "the node polling", lambda v: len(pollers(v)) == 1)
        await until(fake.connected, "the node to poll", proc)
        photo = await fake.user_sends(fake.photo(png()), caption="what is this")
        await until(hold.arrived.is_set, "the photo's turn at the model", proc)
        await until(lambda: fake.acked_offset > photo["update_id"], "the update confirmed to Telegram", proc)
        proc.kill()
        await asyncio.to_thread(proc.wait, 30)
    hold.release.set()
    async with node() as proc:
        await until(lambda: any(t.startswith("echo: what is this") for t in answers(fake, chat)),
                    "the photo answered after the restart", proc)
        await fake.user_says("and now?")
        await until(lambda: "echo: and now?" in answers(fake, chat), "the next message answered", proc)
    said = [text.split("\n")[0] for text in answers(fake, chat) if text.startswith("echo: ")]
    assert said == ["echo: what is this", "echo: and now?"], said  # once each, in order
