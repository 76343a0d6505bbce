"""What the platform benchmarks (``bench.telegram``, ``bench.discord``, ``bench.slack``) share.

They measure one thing the same way (bench/README.md, "Telegram"): the same paced load drives a
bare library bot and then the gateway against one platform emulator, and the report compares the
two. The load, the gateway leg and the report live here once, so the three figures stay
comparable; each module keeps only its platform's parts (the emulator wrapper with its token
clock, the baseline bot, the gateway's platform settings, its labels).

Not a benchmark itself: ``bench.__main__`` does not run it.
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
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

import yaml

from bench.gateway import ROOT, SCALE, ModelProcess, free_port, http_get, pct, poisson_arrivals, sample_proc

CHATS = 100
PER_CHAT = max(3, round(10 * SCALE))  # 1000 messages per leg at scale 1
RATE = 40.0  # msg/s over all chats
TIMEOUT_S = 60.0
OVERHEAD_P50_TARGET_MS = 10.0

_WORDS = "please tell me about the weather tomorrow and remind me to call mum after lunch thanks".split()


@dataclass(frozen=True)
class Platform:
    """A benchmark's names and labels: what the shared code prints and names differently, never the method."""

    name: str  # "telegram": metric prefix, config section, gateway log file
    token_prefix: str  # starts every message token; the module's clock pattern must match it
    env_prefixes: tuple[str, ...]  # the platform's own variables, kept away from the child processes
    chats: str  # header: "private chats", "DMs", ...
    fake: str  # header: which emulator generates the load
    baseline: str  # "ran raw (...)": what the baseline is
    baseline_kind: str  # "bot" or "app", in the raw CPU column
    tmp_prefix: str


F = TypeVar("F")


class TokenClock:
    """A message's clock: from its send to the fake accepting the answer that carries its token."""

    def __init__(self, token: re.Pattern[str], text_of: Callable[[dict[str, Any]], str]) -> None:
        self._token = token
        self._text_of = text_of  # what the platform's fake recorded as the sent text
        self._waiters: dict[str, asyncio.Future[float]] = {}

    def fake(self, fake_class: type[F]) -> F:
        """An instance of the platform's fake that stops clocks as it records what it was sent."""
        clock = self
        base: Any = fake_class

        class Timed(base):  # type: ignore[misc]
            def _record_sent(self, message: Any) -> Any:
                clock._stop(message)
                return super()._record_sent(message)

        fake: F = Timed()
        return fake

    def _stop(self, message: dict[str, Any]) -> None:
        now = time.perf_counter()
        m = self._token.search(self._text_of(message))
        fut = self._waiters.pop(m.group(1), None) if m is not None else None
        if fut is not None and not fut.done():
            fut.set_result(now)

    async def time(self, token: str, send: Awaitable[Any]) -> float:
        """Send (the awaitable queues the message in the fake); seconds until its answer arrived."""
        fut: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._waiters[token] = fut
        started = time.perf_counter()
        await send
        try:
            done = await asyncio.wait_for(fut, TIMEOUT_S)
        finally:
            self._waiters.pop(token, None)
        return done - started


class Emulator(Protocol):
    """What ``paced`` and ``run`` need from a module's emulator wrapper."""

    users: list[dict[str, Any]]

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def say(self, user: dict[str, Any], token: str, text: str) -> float:
        """Send ``text`` as ``user``; the seconds until the answer carrying ``token`` reached the fake."""
        ...


E = TypeVar("E", bound=Emulator)


@dataclass
class Leg:
    """One leg's measurements (``raw`` or ``gateway``), keyed by message token."""

    name: str
    e2e_ms: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cpu_s: float = 0.0
    model_ns: dict[str, int] = field(default_factory=dict)

    def cost_ms(self) -> list[float]:
        """End-to-end minus the model's handler time (messages the model saw)."""
        return [ms - self.model_ns[t] / 1e6 for t, ms in self.e2e_ms.items() if t in self.model_ns]


# ------------------------------------------------------------------ the load


async def paced(emu: Emulator, leg: Leg, rng: random.Random, pid: int, token_prefix: str) -> None:
    """Drive ``CHATS`` chats with Poisson arrivals at ``RATE``; a busy chat sends when its answer comes.

    Both legs take this same load, so their difference is what the gateway adds. ``pid``'s CPU
    time over the run goes into ``leg.cpu_s``.
    """
    at = poisson_arrivals(rng, CHATS, PER_CHAT, RATE)
    cpu0 = sample_proc(pid).cpu_s
    started = time.perf_counter()

    async def chat(c: int) -> None:
        user = emu.users[c]
        for i, due in enumerate(at[c]):
            await asyncio.sleep(max(0.0, due - (time.perf_counter() - started)))
            token = f"{token_prefix}{c:03d}n{i:04d}"
            text = f"{token} " + " ".join(rng.choices(_WORDS, k=rng.randint(5, 20)))
            try:
                leg.e2e_ms[token] = await emu.say(user, token, text) * 1000
            except TimeoutError:
                leg.errors.append(f"{leg.name} {token}: no answer within {TIMEOUT_S:g} s")

    await asyncio.gather(*(chat(c) for c in range(CHATS)))
    leg.seconds = time.perf_counter() - started
    leg.cpu_s = sample_proc(pid).cpu_s - cpu0


# ------------------------------------------------------------------ processes


def child_env(platform: Platform) -> dict[str, str]:
    """This environment without the gateway's and the platform's variables, so only the config counts."""
    prefixes = ("HERMES_", "API_SERVER", "GATEWAY_", *platform.env_prefixes)
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["PYTHONPATH"] = str(ROOT)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env


def stop(proc: subprocess.Popen[Any], timeout: float) -> int:
    """Terminate ``proc`` (kill it if it outlasts ``timeout``); its exit code."""
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


async def run_baseline(
    platform: Platform,
    emu: E,
    rng: random.Random,
    argv: list[str],
    *,
    what: str = "echo bot",
    ready_timeout: float | None = None,
    connected: Callable[[], Awaitable[object]] | None = None,
    stop_timeout: float = 10.0,
) -> Leg:
    """The ``raw`` leg: start the bare bot ``argv``, wait for its "ready" line, then run the load.

    ``connected``, if given, waits until the fake sees the bot connected, so that no message of
    the load is queued before the bot can take it.
    """
    proc = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, started before the measurement
        argv, cwd=ROOT, env=child_env(platform), stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), ready_timeout)
        if line.strip() != "ready":
            raise RuntimeError(f"the {what} did not start (said {line!r})")
        if connected is not None:
            await connected()
        leg = Leg("raw")
        await paced(emu, leg, rng, proc.pid, platform.token_prefix)
        return leg
    finally:
        stop(proc, stop_timeout)


async def run_gateway(
    platform: Platform,
    emu: E,
    model: ModelProcess,
    home: Path,
    rng: random.Random,
    *,
    settings: dict[str, Any],
    secrets: dict[str, str],
    connected: Callable[[], Awaitable[object]] | None = None,
) -> tuple[Leg, int]:
    """The ``gateway`` leg: ``gateway.cli run`` with only this platform; the leg and the exit code.

    ``settings`` is the gateway's ``platforms.<name>`` section (pointing it at the fake),
    ``secrets`` the token variables. The load starts once /readyz says the platform is connected
    (and ``connected``, if given, agrees), after the model's start-up requests are dropped.
    """
    home.mkdir(parents=True)  # noqa: ASYNC240 - once, before the measurement
    port = free_port()
    config = {
        "model": {"base_url": model.base_url, "default": "fake-model", "max_retries": 0},
        "platforms": {
            "api_server": {"host": "127.0.0.1", "port": port},
            platform.name: settings,
        },
        "auth": {"allow_all_users": True},
    }
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    env = child_env(platform) | {"HERMES_HOME": str(home), **secrets}
    log = open(home.parent / f"gateway-{platform.name}.log", "w")  # closed below
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
        if connected is not None:
            await connected()
        await asyncio.to_thread(model.dump)  # forget start-up noise
        leg = Leg("gateway")
        await paced(emu, leg, rng, proc.pid, platform.token_prefix)
        leg.model_ns = await asyncio.to_thread(model.dump)
    finally:
        rc = stop(proc, 60)
        log.close()
    return leg, rc


# --------------------------------------------------------------------- report


def report(platform: Platform, raw: Leg, gw: Leg, rc: int) -> int:
    """Print both legs, the ``<name>.*`` figures and the target; 1 if the run is invalid."""
    name = platform.name
    raw_e2e = list(raw.e2e_ms.values())
    gw_e2e = list(gw.e2e_ms.values())
    cost = gw.cost_ms()
    raw_p50 = pct(raw_e2e, 0.5)
    over_p50 = pct(cost, 0.5) - raw_p50
    over_p99 = pct(cost, 0.99) - pct(raw_e2e, 0.99)
    errors = raw.errors + gw.errors + [f"gateway {t}: no model timing" for t in gw.e2e_ms if t not in gw.model_ns]
    print()
    print(f"  raw     e2e p50 {raw_p50:6.2f} p99 {pct(raw_e2e, 0.99):6.2f} ms | "
          f"{platform.baseline_kind} CPU {raw.cpu_s / max(len(raw_e2e), 1) * 1000:.2f} ms/msg")
    print(f"  gateway e2e p50 {pct(gw_e2e, 0.5):6.2f} p99 {pct(gw_e2e, 0.99):6.2f} ms"
          f" | minus model p50 {pct(cost, 0.5):6.2f} p99 {pct(cost, 0.99):6.2f} ms | "
          f"gateway CPU {gw.cpu_s / max(len(cost), 1) * 1000:.2f} ms/msg")
    for e in errors[:10]:
        print(f"  error: {e}")
    print()
    print(f"{name}.raw_p50_ms={raw_p50:.2f}")
    print(f"{name}.gateway_p50_ms={pct(cost, 0.5):.2f}")
    print(f"{name}.overhead_p50_ms={over_p50:.2f}")
    print(f"{name}.overhead_p99_ms={over_p99:.2f}")
    print(f"{name}.cpu_ms_per_msg={gw.cpu_s / max(len(cost), 1) * 1000:.2f}")
    print()
    ok = over_p50 <= OVERHEAD_P50_TARGET_MS
    print("targets:")
    print(f"  {'PASS' if ok else 'MISS'}  overhead p50 <= {OVERHEAD_P50_TARGET_MS:g} ms over the emulator round trip "
          f"at {CHATS} concurrent chats: {over_p50:.2f} ms ({pct(cost, 0.5):.2f} - {raw_p50:.2f})")
    if errors or rc != 0 or not cost:
        print(f"{name} benchmark invalid: {len(errors)} errors, gateway exit code {rc}", file=sys.stderr)
        return 1
    return 0


async def run(
    platform: Platform,
    make_emulator: Callable[[], E],
    tmp: Path,
    seed: int,
    baseline: Callable[[E, random.Random], Awaitable[Leg]],
    gateway: Callable[[E, ModelProcess, Path, random.Random], Awaitable[tuple[Leg, int]]],
) -> int:
    """The whole benchmark: the raw leg, then the gateway leg on the same fake and model, then the report."""
    print(
        f"Python {'.'.join(map(str, sys.version_info[:3]))}, {os.cpu_count()} CPUs, BENCH_SCALE={SCALE:g}; "
        f"{CHATS} {platform.chats} x {PER_CHAT} messages, Poisson arrivals at {RATE:g} msg/s, "
        f"{platform.fake} in the load generator, model = FakeOpenAI echo in its own process"
    )
    rng = random.Random(seed)
    emu = make_emulator()
    await emu.start()
    model = ModelProcess()
    try:
        raw = await baseline(emu, rng)
        print(f"  ran raw ({platform.baseline}): {len(raw.e2e_ms)} msgs in {raw.seconds:.1f} s", flush=True)
        gw, rc = await gateway(emu, model, tmp / "home", rng)
        print(f"  ran gateway: {len(gw.e2e_ms)} msgs in {gw.seconds:.1f} s, exit code {rc}", flush=True)
    finally:
        model.close()
        await emu.stop()
    return report(platform, raw, gw, rc)


def main(platform: Platform, run_all: Callable[[Path], Coroutine[Any, Any, int]]) -> int:
    """Run ``run_all`` in a fresh temp dir (the gateway's home and log), removed afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix=platform.tmp_prefix))
    try:
        return asyncio.run(run_all(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
