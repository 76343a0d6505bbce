"""Discord benchmark: the gateway's added latency per message, over the emulator's own round trip.

The same method as ``bench/telegram.py`` (see bench/README.md, "Discord"):

* the emulator: ``tests.emulators.fake_discord.FakeDiscord`` in *this* process, which is also the
  load generator. A message's clock starts when its MESSAGE_CREATE is written to the gateway
  websocket and stops when the fake accepts the ``POST /channels/{id}/messages`` that carries the
  answer (matched by a unique token in the text);
* the model: ``FakeOpenAI`` (echo, zero delay) in its own process (``bench.gateway.ModelProcess``);
* the gateway under test: ``python -m gateway.cli run`` as a subprocess with only Discord enabled
  (daemon defaults otherwise), pointed at the fake by ``platforms.discord.base_url``/``gateway_url``;
* the baseline: a bare discord.py echo bot in its own process (``on_message`` ->
  ``channel.send("echo: " + content)``): the emulator round trip with the real client library and
  no gateway.

Both are driven by the same paced load, one after the other: ``CHATS`` DM channels (one user each),
messages arriving as a Poisson process at ``RATE`` msg/s over all chats; a chat still waiting for its
answer sends its next message when the answer comes. ``discord.overhead_p50_ms`` = p50(gateway
end-to-end minus the model's handler time) minus p50(baseline end-to-end). Target: <= 10 ms.
"""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path
from typing import Any

from bench import _platform
from bench._platform import CHATS, Leg
from bench.gateway import ModelProcess

SEED = 20261123

_TOKEN = re.compile(r"echo: (D\d+n\d+)")

PLATFORM = _platform.Platform(
    name="discord",
    token_prefix="D",
    env_prefixes=("DISCORD_",),
    chats="DM chats",
    fake="FakeDiscord",
    baseline="bare discord.py echo bot",
    baseline_kind="bot",
    tmp_prefix="hermes-bench-dc-",
)


def _echo_bot_main(base_url: str, gateway_url: str, token: str) -> None:
    """Child process: the thinnest correct discord.py bot: echo every human message."""
    import discord
    import yarl
    from discord.gateway import DiscordWebSocket

    discord.http.Route.BASE = base_url
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url)
    intents = discord.Intents.default()
    intents.message_content = True
    client = discord.Client(intents=intents, guild_ready_timeout=0.05)

    @client.event
    async def on_ready() -> None:
        print("ready", flush=True)

    @client.event
    async def on_message(message: discord.Message) -> None:
        if not message.author.bot:
            await message.channel.send(f"echo: {message.content}")

    client.run(token, log_handler=None)


class Emulator:
    """FakeDiscord plus a per-token clock on outgoing answers."""

    def __init__(self) -> None:
        from tests.emulators.fake_discord import FakeDiscord

        self.clock = _platform.TokenClock(_TOKEN, lambda m: str(m.get("text") or ""))
        self.fake = self.clock.fake(FakeDiscord)
        self.users: list[dict[str, Any]] = []

    async def start(self) -> None:
        await self.fake.start()
        for i in range(CHATS):
            user = self.fake.add_user(f"user{i}")
            self.fake.dm_channel(user)
            self.users.append(user)

    async def stop(self) -> None:
        await self.fake.stop()

    async def say(self, user: dict[str, Any], token: str, text: str) -> float:
        return await self.clock.time(token, self.fake.user_says(text, user=user))


async def run_baseline(emu: Emulator, rng: random.Random) -> Leg:
    """The bare discord.py bot under the load; it says "ready" only once its gateway session is up."""
    fake = emu.fake
    return await _platform.run_baseline(
        PLATFORM, emu, rng,
        [sys.executable, "-m", "bench.discord", "_echo-bot", fake.base_url, fake.gateway_url, fake.token],
        ready_timeout=60, stop_timeout=60,
    )


async def run_gateway(emu: Emulator, model: ModelProcess, home: Path, rng: random.Random) -> tuple[Leg, int]:
    """The gateway with only Discord, pointed at the fake's REST and websocket URLs."""
    return await _platform.run_gateway(
        PLATFORM, emu, model, home, rng,
        settings={"base_url": emu.fake.base_url, "gateway_url": emu.fake.gateway_url},
        secrets={"DISCORD_BOT_TOKEN": emu.fake.token},
    )


async def run_all(tmp: Path) -> int:
    return await _platform.run(PLATFORM, Emulator, tmp, SEED, run_baseline, run_gateway)


def main() -> int:
    return _platform.main(PLATFORM, run_all)


if __name__ == "__main__":
    if sys.argv[1:2] == ["_echo-bot"]:
        _echo_bot_main(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(main())
