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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from bench.gateway import ROOT, SCALE, ModelProcess, free_port, http_get, pct, sample_proc

CHATS = 100
PER_CHAT = max(3, round(10 * SCALE))  # 1000 messages per leg at scale 1
RATE = 40.0  # msg/s over all chats
TIMEOUT_S = 60.0
OVERHEAD_P50_TARGET_MS = 10.0
SEED = 20261123

_WORDS = "please tell me about the weather tomorrow and remind me to call mum after lunch thanks".split()
_TOKEN = re.compile(r"echo: (D\d+n\d+)")


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


@dataclass
class Leg:
    name: str
    e2e_ms: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cpu_s: float = 0.0
    model_ns: dict[str, int] = field(default_factory=dict)

    def cost_ms(self) -> list[float]:
        return [ms - self.model_ns[t] / 1e6 for t, ms in self.e2e_ms.items() if t in self.model_ns]


class Emulator:
    """FakeDiscord plus a per-token clock on outgoing answers."""

    def __init__(self) -> None:
        from tests.emulators.fake_discord import FakeDiscord

        class Timed(FakeDiscord):
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
        for i in range(CHATS):
            user = self.fake.add_user(f"user{i}")
            self.fake.dm_channel(user)
            self.users.append(user)

    async def say(self, user: dict[str, Any], token: str, text: str) -> float:
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.fake.waiters[token] = fut
        started = time.perf_counter()
        await self.fake.user_says(text, user=user)
        try:
            done = await asyncio.wait_for(fut, TIMEOUT_S)
        finally:
            self.fake.waiters.pop(token, None)
        return done - started


async def paced(emu: Emulator, leg: Leg, rng: random.Random, pid: int) -> None:
    owners = [c for c in range(CHATS) for _ in range(PER_CHAT)]
    rng.shuffle(owners)
    at: list[list[float]] = [[] for _ in range(CHATS)]
    t = 0.0
    for owner in owners:
        t += rng.expovariate(RATE)
        at[owner].append(t)
    cpu0 = sample_proc(pid).cpu_s
    started = time.perf_counter()

    async def chat(c: int) -> None:
        for i, due in enumerate(at[c]):
            await asyncio.sleep(max(0.0, due - (time.perf_counter() - started)))
            token = f"D{c:03d}n{i:04d}"
            text = f"{token} " + " ".join(rng.choices(_WORDS, k=rng.randint(5, 20)))
            try:
                leg.e2e_ms[token] = await emu.say(emu.users[c], token, text) * 1000
            except TimeoutError:
                leg.errors.append(f"{leg.name} {token}: no answer within {TIMEOUT_S:g} s")

    await asyncio.gather(*(chat(c) for c in range(CHATS)))
    leg.seconds = time.perf_counter() - started
    leg.cpu_s = sample_proc(pid).cpu_s - cpu0


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "API_SERVER", "GATEWAY_", "DISCORD_"))}
    env["PYTHONPATH"] = str(ROOT)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def _stop(proc: subprocess.Popen[Any]) -> int:
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


async def run_baseline(emu: Emulator, rng: random.Random) -> Leg:
    fake = emu.fake
    proc = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, not awaited
        [sys.executable, "-m", "bench.discord", "_echo-bot", fake.base_url, fake.gateway_url, fake.token],
        cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
        if line.strip() != "ready":
            raise RuntimeError(f"the echo bot did not start (said {line!r})")
        leg = Leg("raw")
        await paced(emu, leg, rng, proc.pid)
        return leg
    finally:
        _stop(proc)


async def run_gateway(emu: Emulator, model: ModelProcess, home: Path, rng: random.Random) -> tuple[Leg, int]:
    home.mkdir(parents=True)  # noqa: ASYNC240 - once, before the measurement
    port = free_port()
    config = {
        "model": {"base_url": model.base_url, "default": "fake-model", "max_retries": 0},
        "platforms": {
            "api_server": {"host": "127.0.0.1", "port": port},
            "discord": {"base_url": emu.fake.base_url, "gateway_url": emu.fake.gateway_url},
        },
        "auth": {"allow_all_users": True},
    }
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    env = _env() | {"HERMES_HOME": str(home), "DISCORD_BOT_TOKEN": emu.fake.token}
    log = open(home.parent / "gateway-discord.log", "w")  # closed below
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "run"], cwd=ROOT, env=env,  # noqa: ASYNC220
                            stdout=log, stderr=subprocess.STDOUT)
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
        await asyncio.to_thread(model.dump)  # forget start-up noise
        leg = Leg("gateway")
        await paced(emu, leg, rng, proc.pid)
        leg.model_ns = await asyncio.to_thread(model.dump)
    finally:
        rc = _stop(proc)
        log.close()
    return leg, rc


async def run_all(tmp: Path) -> int:
    print(
        f"Python {'.'.join(map(str, sys.version_info[:3]))}, {os.cpu_count()} CPUs, BENCH_SCALE={SCALE:g}; "
        f"{CHATS} DM chats x {PER_CHAT} messages, Poisson arrivals at {RATE:g} msg/s, "
        "FakeDiscord in the load generator, model = FakeOpenAI echo in its own process"
    )
    rng = random.Random(SEED)
    emu = Emulator()
    await emu.start()
    model = ModelProcess()
    try:
        raw = await run_baseline(emu, rng)
        print(f"  ran raw (bare discord.py echo bot): {len(raw.e2e_ms)} msgs in {raw.seconds:.1f} s", flush=True)
        gw, rc = await run_gateway(emu, model, tmp / "home", rng)
        print(f"  ran gateway: {len(gw.e2e_ms)} msgs in {gw.seconds:.1f} s, exit code {rc}", flush=True)
    finally:
        model.close()
        await emu.fake.stop()

    raw_e2e = list(raw.e2e_ms.values())
    cost = gw.cost_ms()
    raw_p50 = pct(raw_e2e, 0.5)
    over_p50 = pct(cost, 0.5) - raw_p50
    over_p99 = pct(cost, 0.99) - pct(raw_e2e, 0.99)
    errors = raw.errors + gw.errors + [f"gateway {t}: no model timing" for t in gw.e2e_ms if t not in gw.model_ns]
    gw_e2e = list(gw.e2e_ms.values())
    print()
    print(f"  raw     e2e p50 {raw_p50:6.2f} p99 {pct(raw_e2e, 0.99):6.2f} ms | "
          f"bot CPU {raw.cpu_s / max(len(raw_e2e), 1) * 1000:.2f} ms/msg")
    print(f"  gateway e2e p50 {pct(gw_e2e, 0.5):6.2f} p99 {pct(gw_e2e, 0.99):6.2f} ms"
          f" | minus model p50 {pct(cost, 0.5):6.2f} p99 {pct(cost, 0.99):6.2f} ms | "
          f"gateway CPU {gw.cpu_s / max(len(cost), 1) * 1000:.2f} ms/msg")
    for e in errors[:10]:
        print(f"  error: {e}")
    print()
    print(f"discord.raw_p50_ms={raw_p50:.2f}")
    print(f"discord.gateway_p50_ms={pct(cost, 0.5):.2f}")
    print(f"discord.overhead_p50_ms={over_p50:.2f}")
    print(f"discord.overhead_p99_ms={over_p99:.2f}")
    print(f"discord.cpu_ms_per_msg={gw.cpu_s / max(len(cost), 1) * 1000:.2f}")
    print()
    ok = over_p50 <= OVERHEAD_P50_TARGET_MS
    print("targets:")
    print(f"  {'PASS' if ok else 'MISS'}  overhead p50 <= {OVERHEAD_P50_TARGET_MS:g} ms over the emulator round trip "
          f"at {CHATS} concurrent chats: {over_p50:.2f} ms ({pct(cost, 0.5):.2f} - {raw_p50:.2f})")
    if errors or rc != 0 or not cost:
        print(f"discord benchmark invalid: {len(errors)} errors, gateway exit code {rc}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-dc-"))
    try:
        return asyncio.run(run_all(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["_echo-bot"]:
        _echo_bot_main(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(main())
