"""Telegram benchmark: the gateway's added latency per message, over the emulator's own round trip.

Four parties, all on 127.0.0.1:

* the emulator: ``tests.emulators.fake_telegram.FakeTelegram`` in *this*
  process, which is also the load generator. A message's clock starts when
  the update is queued in the fake (a parked ``getUpdates`` is answered at
  once) and stops when the fake accepts the ``sendMessage`` that carries the
  answer (matched by a unique token in the text);
* the model: ``FakeOpenAI`` (echo, zero delay) in its own process, timing its
  handler per request (``bench.gateway.ModelProcess``);
* the gateway under test: ``python -m gateway.cli run`` as a subprocess with
  only Telegram enabled (polling, daemon defaults otherwise, pointed at the
  fake by ``platforms.telegram.base_url``);
* the baseline: a bare python-telegram-bot echo bot in its own process
  (``getUpdates`` long poll -> ``sendMessage("echo: " + text)`` per update, the
  same connection pool size as our adapter). It is what "the emulator round
  trip" costs with the real client library and no gateway at all.

Both are driven by the same paced load, one after the other: ``CHATS``
private chats (one user each), messages arriving as a Poisson process at
``RATE`` msg/s over all chats; a chat still waiting for its answer sends its
next message when the answer comes.

Per message, gateway cost = end-to-end minus the fake model's handler time
for that message. ``telegram.overhead_p50_ms`` = p50(gateway cost) minus
p50(baseline end-to-end): what the gateway adds on top of the emulator round
trip (routing, session index, state.db commits, the typing action, the
model call's client side, MarkdownV2 rendering). Target: <= 10 ms.

``BENCH_SCALE`` scales the number of messages per chat.
"""

from __future__ import annotations

import asyncio
import random
import re
import sys
from pathlib import Path
from typing import Any

from bench import _platform
from bench._platform import CHATS, Leg
from bench.gateway import ModelProcess

SEED = 20261122

_TOKEN = re.compile(r"echo: (T\d+n\d+)")

PLATFORM = _platform.Platform(
    name="telegram",
    token_prefix="T",
    env_prefixes=("TELEGRAM_",),
    chats="private chats",
    fake="FakeTelegram",
    baseline="bare PTB echo bot",
    baseline_kind="bot",
    tmp_prefix="hermes-bench-tg-",
)


# ------------------------------------------------------------ the baseline bot


def _echo_bot_main(base_url: str, token: str) -> None:
    """Child process: the thinnest correct bot on PTB's ``Bot``: poll, echo, repeat."""
    from telegram import Bot
    from telegram.request import HTTPXRequest

    async def serve() -> None:
        bot = Bot(
            token,
            base_url=base_url,
            request=HTTPXRequest(connection_pool_size=128),
            get_updates_request=HTTPXRequest(connection_pool_size=2),
        )
        pending: set[asyncio.Task[Any]] = set()
        async with bot:
            offset = 0
            print("ready", flush=True)
            while True:
                updates = await bot.get_updates(offset=offset, timeout=10, allowed_updates=["message"])
                for update in updates:
                    offset = update.update_id + 1
                    if update.message is None or update.message.text is None:
                        continue
                    task = asyncio.create_task(
                        bot.send_message(update.message.chat_id, f"echo: {update.message.text}")
                    )
                    pending.add(task)
                    task.add_done_callback(pending.discard)

    asyncio.run(serve())


# ------------------------------------------------------------- the emulator


class Emulator:
    """FakeTelegram plus a per-token clock on outgoing answers."""

    def __init__(self) -> None:
        from tests.emulators.fake_telegram import FakeTelegram

        # MarkdownV2 escapes the token's punctuation: read the rendered text, unescaped.
        self.clock = _platform.TokenClock(
            _TOKEN, lambda m: str(m.get("rendered") or m.get("text") or "").replace("\\", "")
        )
        self.fake = self.clock.fake(FakeTelegram)
        self.users: list[dict[str, Any]] = []

    async def start(self) -> None:
        await self.fake.start()
        for i in range(CHATS):
            self.users.append(self.fake.add_user(first_name=f"User{i}"))

    async def stop(self) -> None:
        await self.fake.stop()

    async def say(self, user: dict[str, Any], token: str, text: str) -> float:
        """Queue the message; the seconds until its answer reached the fake."""
        return await self.clock.time(token, self.fake.user_says(text, user=user))


# ------------------------------------------------------------------ the legs


async def run_baseline(emu: Emulator, rng: random.Random) -> Leg:
    """The bare PTB bot under the load, once its first ``getUpdates`` is parked at the fake."""
    return await _platform.run_baseline(
        PLATFORM, emu, rng, [sys.executable, "-m", "bench.telegram", "_echo-bot", emu.fake.base_url, emu.fake.token],
        connected=lambda: emu.fake.wait_connected(10),
    )


async def run_gateway(emu: Emulator, model: ModelProcess, home: Path, rng: random.Random) -> tuple[Leg, int]:
    """The gateway with only Telegram (polling), pointed at the fake's bot API and file URLs."""
    return await _platform.run_gateway(
        PLATFORM, emu, model, home, rng,
        settings={"base_url": emu.fake.base_url, "base_file_url": emu.fake.base_file_url},
        secrets={"TELEGRAM_BOT_TOKEN": emu.fake.token},
    )


async def run_all(tmp: Path) -> int:
    return await _platform.run(PLATFORM, Emulator, tmp, SEED, run_baseline, run_gateway)


def main() -> int:
    return _platform.main(PLATFORM, run_all)


if __name__ == "__main__":
    if sys.argv[1:2] == ["_echo-bot"]:
        _echo_bot_main(sys.argv[2], sys.argv[3])
    else:
        sys.exit(main())
