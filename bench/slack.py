"""Slack benchmark: the gateway's added latency per message, over the emulator's own round trip.

The method of ``bench.telegram`` (same paced load: ``CHATS`` DMs, Poisson arrivals at ``RATE``
msg/s; same clock; same cost = end-to-end minus the fake model's handler time), with Slack parts:

* the emulator: ``tests.emulators.fake_slack.FakeSlack`` in this process (the load generator);
  a message's clock starts when its ``events_api`` envelope is written to the Socket Mode socket
  and stops when the fake accepts the ``chat.postMessage`` / ``chat.update`` that carries the answer;
* the gateway under test: ``python -m gateway.cli run``, only Slack enabled, Socket Mode,
  daemon defaults (so including the "thinking" placeholder, which is edited into the answer;
  ``BENCH_SLACK_PLACEHOLDER=0`` measures without it);
* the baseline: a bare slack-bolt ``AsyncApp`` echo app on ``AsyncSocketModeHandler`` in its
  own process (``say("echo: " + text, thread_ts=ts)``): the emulator round trip with the real
  client library and no gateway.

``slack.overhead_p50_ms`` = p50(gateway cost) - p50(baseline end-to-end). Target: <= 10 ms.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import sys
from pathlib import Path
from typing import Any

from bench import _platform
from bench._platform import CHATS, Leg
from bench.gateway import ModelProcess

SEED = 20261123
_TOKEN = re.compile(r"echo: (T\d+n\d+)")

PLATFORM = _platform.Platform(
    name="slack",
    token_prefix="T",
    env_prefixes=("TELEGRAM_", "SLACK_", "DISCORD_"),
    chats="DMs",
    fake="FakeSlack (Socket Mode)",
    baseline="bare slack-bolt echo app",
    baseline_kind="app",
    tmp_prefix="hermes-bench-slack-",
)


def _echo_app_main(api_base_url: str, bot_token: str, app_token: str) -> None:
    """Child process: the thinnest correct Bolt app: every DM is echoed in its thread."""
    from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
    from slack_bolt.async_app import AsyncApp
    from slack_sdk.web.async_client import AsyncWebClient

    async def serve() -> None:
        app = AsyncApp(client=AsyncWebClient(token=bot_token, base_url=api_base_url), signing_secret="unused")

        @app.event("message")
        async def echo(event: dict[str, Any], say: Any) -> None:
            await say(text=f"echo: {event.get('text')}", thread_ts=event["ts"])

        handler = AsyncSocketModeHandler(app, app_token=app_token)
        await handler.connect_async()  # type: ignore[no-untyped-call]  # slack-bolt leaves it unannotated
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


class Emulator:
    """FakeSlack plus a per-token clock on outgoing answers; the interface ``bench._platform.paced`` drives."""

    def __init__(self) -> None:
        from tests.emulators.fake_slack import FakeSlack

        self.clock = _platform.TokenClock(_TOKEN, lambda m: str(m.get("text") or ""))
        self.fake = self.clock.fake(FakeSlack)
        self.users: list[dict[str, Any]] = []

    async def start(self) -> None:
        await self.fake.start()
        self.users = [{"id": f"U{i:05d}", "chat": f"D{i:05d}"} for i in range(CHATS)]

    async def stop(self) -> None:
        await self.fake.stop()

    async def connected(self, sockets: int) -> None:
        await self.fake.wait_for(lambda: len(self.fake.open_sockets) == 1 and len(self.fake.sockets) >= sockets,
                                 60, what="the Socket Mode client")

    async def say(self, user: dict[str, Any], token: str, text: str) -> float:
        return await self.clock.time(token, self.fake.user_says(text, chat=user["chat"], user=user["id"]))


async def run_baseline(emu: Emulator, rng: random.Random) -> Leg:
    """The bare Bolt app under the load, once its Socket Mode connection is open at the fake."""
    from tests.emulators.fake_slack import APP_TOKEN, BOT_TOKEN

    return await _platform.run_baseline(
        PLATFORM, emu, rng,
        [sys.executable, "-m", "bench.slack", "_echo-app", emu.fake.api_base_url, BOT_TOKEN, APP_TOKEN],
        what="echo app", connected=lambda: emu.connected(1),
    )


async def run_gateway(emu: Emulator, model: ModelProcess, home: Path, rng: random.Random) -> tuple[Leg, int]:
    """The gateway with only Slack (Socket Mode); the load waits for its socket as well as /readyz."""
    from tests.emulators.fake_slack import APP_TOKEN, BOT_TOKEN

    return await _platform.run_gateway(
        PLATFORM, emu, model, home, rng,
        settings={"api_base_url": emu.fake.api_base_url,
                  "thinking_placeholder": os.environ.get("BENCH_SLACK_PLACEHOLDER", "1") != "0"},
        secrets={"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN},
        connected=lambda: emu.connected(2),
    )


async def run_all(tmp: Path) -> int:
    return await _platform.run(PLATFORM, Emulator, tmp, SEED, run_baseline, run_gateway)


def main() -> int:
    return _platform.main(PLATFORM, run_all)


if __name__ == "__main__":
    if sys.argv[1:2] == ["_echo-app"]:
        _echo_app_main(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(main())
