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
import contextlib
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

import yaml

from bench.gateway import ROOT, SCALE, ModelProcess, free_port, http_get, pct
from bench.telegram import CHATS, PER_CHAT, RATE, TIMEOUT_S, Leg, paced

OVERHEAD_P50_TARGET_MS = 10.0
SEED = 20261123
_TOKEN = re.compile(r"echo: (T\d+n\d+)")


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
        await handler.connect_async()
        print("ready", flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


class Emulator:
    """FakeSlack plus a per-token clock on outgoing answers; the interface ``bench.telegram.paced`` drives."""

    def __init__(self) -> None:
        from tests.emulators.fake_slack import FakeSlack

        class Timed(FakeSlack):
            waiters: ClassVar[dict[str, asyncio.Future[float]]] = {}

            def _record_sent(self, message: Any) -> Any:
                now = time.perf_counter()
                m = _TOKEN.search(str(message.get("text") or ""))
                if m is not None:
                    fut = self.waiters.pop(m.group(1), None)
                    if fut is not None and not fut.done():
                        fut.set_result(now)
                return super()._record_sent(message)

        self.fake = Timed()
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
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.fake.waiters[token] = fut
        started = time.perf_counter()
        await self.fake.user_says(text, chat=user["chat"], user=user["id"])
        try:
            done = await asyncio.wait_for(fut, TIMEOUT_S)
        finally:
            self.fake.waiters.pop(token, None)
        return done - started


def _env() -> dict[str, str]:
    prefixes = ("HERMES_", "API_SERVER", "GATEWAY_", "TELEGRAM_", "SLACK_", "DISCORD_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["PYTHONPATH"] = str(ROOT)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def _stop(proc: subprocess.Popen[Any], timeout: float) -> int:
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


async def run_baseline(emu: Emulator, rng: random.Random) -> Leg:
    from tests.emulators.fake_slack import APP_TOKEN, BOT_TOKEN

    proc = subprocess.Popen(  # noqa: ASYNC220 - start-up, outside the measured phase
        [sys.executable, "-m", "bench.slack", "_echo-app", emu.fake.api_base_url, BOT_TOKEN, APP_TOKEN],
        cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.to_thread(proc.stdout.readline)
        if line.strip() != "ready":
            raise RuntimeError(f"the echo app did not start (said {line!r})")
        await emu.connected(1)
        leg = Leg("raw")
        await paced(emu, leg, rng, proc.pid)  # type: ignore[arg-type]
        return leg
    finally:
        _stop(proc, 10)


async def run_gateway(emu: Emulator, model: ModelProcess, home: Path, rng: random.Random) -> tuple[Leg, int]:
    from tests.emulators.fake_slack import APP_TOKEN, BOT_TOKEN

    home.mkdir(parents=True)  # noqa: ASYNC240
    port = free_port()
    config = {
        "model": {"base_url": model.base_url, "default": "fake-model", "max_retries": 0},
        "platforms": {
            "api_server": {"host": "127.0.0.1", "port": port},
            "slack": {"api_base_url": emu.fake.api_base_url,
                      "thinking_placeholder": os.environ.get("BENCH_SLACK_PLACEHOLDER", "1") != "0"},
        },
        "auth": {"allow_all_users": True},
    }
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    env = _env() | {"HERMES_HOME": str(home), "SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}
    log = open(home.parent / "gateway-slack.log", "w")  # closed below
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "run"], cwd=ROOT, env=env,  # noqa: ASYNC220
                            stdout=log, stderr=subprocess.STDOUT)
    rc = -1
    try:
        deadline = time.perf_counter() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"the gateway exited with {proc.returncode}")
            with contextlib.suppress(OSError, ValueError, IndexError):
                status, _ = await http_get(port, "/readyz")  # ready: the platform is connected
                if status == 200:
                    break
            if time.perf_counter() > deadline:
                raise RuntimeError("the gateway did not become ready within 60 s")
            await asyncio.sleep(0.05)
        await emu.connected(2)
        await asyncio.to_thread(model.dump)  # forget start-up noise
        leg = Leg("gateway")
        await paced(emu, leg, rng, proc.pid)  # type: ignore[arg-type]
        leg.model_ns = await asyncio.to_thread(model.dump)
    finally:
        rc = _stop(proc, 60)
        log.close()
    return leg, rc


async def run_all(tmp: Path) -> int:
    print(
        f"Python {'.'.join(map(str, sys.version_info[:3]))}, {os.cpu_count()} CPUs, BENCH_SCALE={SCALE:g}; "
        f"{CHATS} DMs x {PER_CHAT} messages, Poisson arrivals at {RATE:g} msg/s, "
        "FakeSlack (Socket Mode) in the load generator, model = FakeOpenAI echo in its own process"
    )
    rng = random.Random(SEED)
    emu = Emulator()
    await emu.start()
    model = ModelProcess()
    try:
        raw = await run_baseline(emu, rng)
        print(f"  ran raw (bare slack-bolt echo app): {len(raw.e2e_ms)} msgs in {raw.seconds:.1f} s", flush=True)
        gw, rc = await run_gateway(emu, model, tmp / "home", rng)
        print(f"  ran gateway: {len(gw.e2e_ms)} msgs in {gw.seconds:.1f} s, exit code {rc}", flush=True)
    finally:
        model.close()
        await emu.stop()

    raw_e2e = list(raw.e2e_ms.values())
    cost = gw.cost_ms()
    raw_p50 = pct(raw_e2e, 0.5)
    over_p50 = pct(cost, 0.5) - raw_p50
    over_p99 = pct(cost, 0.99) - pct(raw_e2e, 0.99)
    errors = raw.errors + gw.errors + [f"gateway {t}: no model timing" for t in gw.e2e_ms if t not in gw.model_ns]
    print()
    print(f"  raw     e2e p50 {raw_p50:6.2f} p99 {pct(raw_e2e, 0.99):6.2f} ms | "
          f"app CPU {raw.cpu_s / max(len(raw_e2e), 1) * 1000:.2f} ms/msg")
    print(f"  gateway e2e p50 {pct(list(gw.e2e_ms.values()), 0.5):6.2f} "
          f"p99 {pct(list(gw.e2e_ms.values()), 0.99):6.2f} ms | minus model p50 {pct(cost, 0.5):6.2f} "
          f"p99 {pct(cost, 0.99):6.2f} ms | gateway CPU {gw.cpu_s / max(len(cost), 1) * 1000:.2f} ms/msg")
    for e in errors[:10]:
        print(f"  error: {e}")
    print()
    print(f"slack.raw_p50_ms={raw_p50:.2f}")
    print(f"slack.gateway_p50_ms={pct(cost, 0.5):.2f}")
    print(f"slack.overhead_p50_ms={over_p50:.2f}")
    print(f"slack.overhead_p99_ms={over_p99:.2f}")
    print(f"slack.cpu_ms_per_msg={gw.cpu_s / max(len(cost), 1) * 1000:.2f}")
    print()
    ok = over_p50 <= OVERHEAD_P50_TARGET_MS
    print("targets:")
    print(f"  {'PASS' if ok else 'MISS'}  overhead p50 <= {OVERHEAD_P50_TARGET_MS:g} ms over the emulator round trip "
          f"at {CHATS} concurrent chats: {over_p50:.2f} ms ({pct(cost, 0.5):.2f} - {raw_p50:.2f})")
    if errors or rc != 0 or not cost:
        print(f"slack benchmark invalid: {len(errors)} errors, gateway exit code {rc}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-slack-"))
    try:
        return asyncio.run(run_all(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["_echo-app"]:
        _echo_app_main(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(main())
