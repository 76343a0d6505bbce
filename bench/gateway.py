"""Gateway benchmark: chats through the api-server adapter against an instant model.

Three processes, all on 127.0.0.1:

* the gateway under test: ``python -m gateway.cli run`` with ``HERMES_HOME`` a
  fresh temp dir and a config.yaml that sets only the model endpoint and the
  HTTP port; everything else is the daemon default (``storage.synchronous``
  FULL, ``gateway.max_concurrent_turns`` 16, info logging, here to a file).
  Its RSS is VmRSS from /proc/<pid>/status, its CPU utime+stime from
  /proc/<pid>/stat;
* the model: ``tests.fakes.openai_server.FakeOpenAI`` (default echo responder,
  no delay) in a child process of its own, so its CPU is neither counted in
  the gateway's nor steals the load generator's event loop. It times its
  handler for every request (``perf_counter_ns`` from entry to the response
  object) and hands the times back over a pipe;
* this process: the load generator, a minimal keep-alive HTTP/1.1 client
  (one connection per chat; its own cost is tens of microseconds).

Added latency (gateway overhead) of a message = its end-to-end HTTP latency
at the client minus the fake's handler time for the model request that
message caused (matched by a unique token at the start of the message text).
Nothing else is subtracted: the client's own cost, loopback and the fake's
HTTP framing stay in (the ``floor`` phase shows how much that is).

Phases, in this order, against one gateway process:

1. load: 1000 chats x 10 messages, 100 chats in flight (100 users, each
   going through its 10 chats one after the other, sending the next message
   as soon as the reply comes): msg/s and gateway CPU per message. Run in two
   legs (the first tenth, then the rest), each followed by a quiet 0.5 s and
   an RSS reading: "after 1k" and "after 10k" messages. Latency here is
   queueing (100 in flight / throughput, Little's law), printed as load_*.
2. floor: the same client calling the fake directly (4 connections).
3. paced: 100 fresh chats with open connections, messages arriving as a
   Poisson process at min(50 msg/s, a quarter of the load-phase rate); a chat
   still waiting for its reply sends its next message when the reply comes.
   This gives the headline overhead p50/p99 "at 100 concurrent chats".
4. long: one chat, 200 messages back to back: the cost as history grows
   (the whole history is read and sent to the model on every turn).

``BENCH_SCALE`` (default 1) scales the message counts. See bench/README.md.

Platform modes: ``python -m bench.gateway telegram`` (or ``discord``,
``slack``) measures the same gateway through that platform's emulator
instead of the HTTP API, against the bare library bot on the same load:
``<platform>.overhead_p50_ms`` at 100 concurrent chats. Each mode lives in
its own module (``bench/telegram.py``, ...) on the shared harness in
``bench/_platform.py``, which reuses this module's model process and
process sampling; ``make bench`` runs them after this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCALE = float(os.environ.get("BENCH_SCALE", "1"))
SEED = 20240611

LOAD_WORKERS = 100  # chats in flight at once during the load phase
LOAD_PER_CHAT = 10
LOAD_CHATS = max(LOAD_WORKERS, round(1000 * SCALE))  # 1000 x 10 = 10 000 messages at scale 1
LOAD_FIRST_LEG = max(1, LOAD_CHATS // 10)  # chats before the "after 1k" RSS reading
RSS_EARLY = LOAD_FIRST_LEG * LOAD_PER_CHAT  # "after 1k"
RSS_LATE = LOAD_CHATS * LOAD_PER_CHAT  # "after 10k"
SETTLE_S = 0.5  # quiet time before an RSS reading
REQUEST_TIMEOUT_S = 120.0

PACED_CHATS = 100
PACED_PER_CHAT = max(3, round(15 * SCALE))  # 1500 messages at scale 1
PACED_RATE_MAX = 50.0  # msg/s over all chats, capped further to a quarter of the measured capacity

LONG_MESSAGES = max(20, round(200 * SCALE))  # one chat, back to back: cost vs history length

FLOOR_CALLS = max(200, round(1000 * SCALE))
FLOOR_CONNS = 4

OVERHEAD_P50_TARGET_MS = 5.0
RSS_GROWTH_TARGET = 1.10

_WORDS = (
    "please can you tell me about the weather tomorrow and remind me to call mum after lunch "
    "what is a good recipe for dinner with rice beans and peppers summarize this article in "
    "three bullet points fix the failing test in the build pipeline thanks that works great"
).split()


# ---------------------------------------------------------------- the model


def _fake_model_main() -> None:
    """Child process: a FakeOpenAI that times its handler per request.

    Prints its port, then answers stdin lines: ``dump`` -> one JSON line
    ``{token: handler_ns}`` (and forgets them); EOF -> exit.
    """
    from aiohttp import web

    from tests.fakes.openai_server import FakeOpenAI, RecordedRequest, echo_last_user_message

    class TimedFake(FakeOpenAI):
        def __init__(self) -> None:
            super().__init__(responder=self._respond)
            self.timings: dict[str, int] = {}
            self._token = ""

        def _respond(self, body: dict[str, Any]) -> str:
            text = echo_last_user_message(body)
            self._token = text[len("echo: ") :].split(" ", 1)[0]
            return text

        async def _record(self, request: web.Request) -> RecordedRequest:
            # Like the parent's, without keeping every request (bodies carry whole histories).
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            return RecordedRequest(request.method, request.path, request.headers, body)

        async def _chat(self, request: web.Request) -> web.StreamResponse:
            started = time.perf_counter_ns()
            response = await super()._chat(request)
            # No await between the responder and here: _token is this request's.
            self.timings[self._token] = time.perf_counter_ns() - started
            return response

    async def serve() -> None:
        fake = TimedFake()
        await fake.start()
        print(fake.port, flush=True)
        loop = asyncio.get_running_loop()
        try:
            while True:
                line = await loop.run_in_executor(None, sys.stdin.readline)
                if not line:
                    break
                if line.strip() == "dump":
                    print(json.dumps(fake.timings), flush=True)
                    fake.timings = {}
        finally:
            await fake.stop()

    asyncio.run(serve())


class ModelProcess:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.gateway", "_fake-model"],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.proc.kill()
            raise RuntimeError(f"the fake model did not start (said {line!r})")
        self.port = int(line)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def dump(self) -> dict[str, int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("dump\n")
        self.proc.stdin.flush()
        return dict(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        close_child(self.proc, timeout=10)


def close_child(proc: subprocess.Popen[str], *, timeout: float) -> None:
    """End a helper process that stops at the end of its stdin; kill it if it does not in ``timeout``."""
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# -------------------------------------------------------------- the gateway


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ProcSample:
    rss_mb: float
    hwm_mb: float
    cpu_s: float


def sample_proc(pid: int) -> ProcSample:
    rss = hwm = 0.0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) / 1024
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
    return ProcSample(rss, hwm, cpu)


class GatewayProcess:
    def __init__(self, home: Path, model_url: str) -> None:
        self.home = home
        self.port = free_port()
        home.mkdir(parents=True, exist_ok=True)
        config = {
            "model": {"base_url": model_url, "default": "fake-model", "max_retries": 0},
            "platforms": {"api_server": {"host": "127.0.0.1", "port": self.port}},
        }
        (home / "config.yaml").write_text(yaml.safe_dump(config))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "API_SERVER", "GATEWAY_"))}
        env.update(HERMES_HOME=str(home), PYTHONPATH=str(ROOT))
        self.log_path = home.parent / "gateway.log"
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway.cli", "run"],
            cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def wait_ready(self, timeout: float = 60.0) -> float:
        started = time.perf_counter()
        deadline = started + timeout
        while time.perf_counter() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the gateway exited with {self.proc.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(OSError, ValueError):
                status, _ = await http_get(self.port, "/readyz")  # ready to take requests
                if status == 200:
                    return time.perf_counter() - started
            await asyncio.sleep(0.05)
        raise RuntimeError(f"the gateway was not ready within {timeout:g} s:\n{self.log_tail()}")

    def sample(self) -> ProcSample:
        return sample_proc(self.pid)

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def log_tail(self, lines: int = 20) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def log_summary(self) -> tuple[int, dict[str, int], list[str]]:
        """(lines, count per level, the first few warning/error lines)."""
        levels: dict[str, int] = {}
        bad: list[str] = []
        total = 0
        with contextlib.suppress(OSError), open(self.log_path, errors="replace") as f:
            for line in f:
                total += 1
                try:
                    level = str(json.loads(line).get("level", "?"))
                except ValueError:
                    level = "unparsed"
                levels[level] = levels.get(level, 0) + 1
                if level not in ("info", "debug") and len(bad) < 5:
                    bad.append(line.strip()[:300])
        return total, levels, bad


# ------------------------------------------------------------------ client


async def http_get(port: int, path: str) -> tuple[int, bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        data = await reader.read()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


class Conn:
    """One keep-alive HTTP/1.1 connection; one request at a time."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()

    async def post(self, path: str, body: bytes) -> tuple[int, bytes, float]:
        """(status, body, seconds from the first byte written to the last byte read)."""
        assert self._reader is not None and self._writer is not None
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        started = time.perf_counter()
        self._writer.write(head + body)
        raw_head = await self._reader.readuntil(b"\r\n\r\n")
        length = -1
        for line in raw_head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length < 0:
            raise RuntimeError(f"response without Content-Length: {raw_head[:200]!r}")
        payload = await self._reader.readexactly(length)
        took = time.perf_counter() - started
        return int(raw_head.split(b" ", 2)[1]), payload, took


def message_text(rng: random.Random, token: str) -> str:
    return token + " " + " ".join(rng.choices(_WORDS, k=rng.randint(6, 30)))


def chat_body(text: str, user: str) -> bytes:
    return json.dumps({"model": "fake-model", "messages": [{"role": "user", "content": text}], "user": user}).encode()


@dataclass
class Sample:
    token: str
    e2e_s: float


@dataclass
class PhaseResult:
    name: str
    samples: list[Sample] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cpu_s: float = 0.0
    model_ns: dict[str, int] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.samples)

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0

    def e2e_ms(self) -> list[float]:
        return [s.e2e_s * 1000 for s in self.samples]

    def model_ms(self) -> list[float]:
        return [self.model_ns[s.token] / 1e6 for s in self.samples if s.token in self.model_ns]

    def overhead_ms(self) -> list[float]:
        """Per message, in completion order: e2e minus the fake's time on its model request."""
        return [s.e2e_s * 1000 - self.model_ns[s.token] / 1e6 for s in self.samples if s.token in self.model_ns]

    def unmatched(self) -> list[str]:
        return [f"{self.name}: no model timing for {s.token}" for s in self.samples if s.token not in self.model_ns]


async def run_chat(
    port: int,
    user: str,
    texts: Sequence[tuple[str, str]],
    result: PhaseResult,
    *,
    think: Callable[[], float] | None = None,
) -> None:
    conn = Conn(port)
    await conn.open()
    try:
        for token, text in texts:
            if think is not None:
                await asyncio.sleep(think())
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT_S):
                    status, payload, took = await conn.post("/v1/chat/completions", chat_body(text, user))
            except (OSError, asyncio.IncompleteReadError, RuntimeError) as exc:  # TimeoutError is an OSError
                result.errors.append(f"{user} {token}: {type(exc).__name__}: {exc}")
                await conn.close()
                conn = Conn(port)
                await conn.open()
                continue
            if status != 200:
                result.errors.append(f"{user} {token}: HTTP {status} {payload[:200]!r}")
                continue
            answer = json.loads(payload)["choices"][0]["message"]["content"]
            if answer != f"echo: {text}":
                result.errors.append(f"{user} {token}: unexpected answer {answer[:100]!r}")
                continue
            result.samples.append(Sample(token, took))
    finally:
        await conn.close()


def plan(rng: random.Random, phase: str, chats: int, per_chat: int) -> list[tuple[str, list[tuple[str, str]]]]:
    out = []
    for c in range(chats):
        user = f"bench-{phase}-{c:03d}"
        texts = []
        for i in range(per_chat):
            token = f"{phase}.{c:03d}.{i:04d}"
            texts.append((token, message_text(rng, token)))
        out.append((user, texts))
    return out


async def load_phase(
    gw: GatewayProcess, model: ModelProcess, rng: random.Random
) -> tuple[PhaseResult, dict[int, ProcSample]]:
    """LOAD_WORKERS users at once, each going through its chats one after another,
    every message sent as soon as the previous reply came (a closed loop).

    Two legs (the first tenth of the chats, then the rest) with a quiet
    SETTLE_S after each, so both RSS readings are taken the same way.
    """
    result = PhaseResult("load")
    readings: dict[int, ProcSample] = {}
    chats = plan(rng, "L", LOAD_CHATS, LOAD_PER_CHAT)
    for leg in (chats[:LOAD_FIRST_LEG], chats[LOAD_FIRST_LEG:]):
        workers = min(LOAD_WORKERS, len(leg))

        async def worker(mine: list[tuple[str, list[tuple[str, str]]]]) -> None:
            for user, texts in mine:
                await run_chat(gw.port, user, texts, result)

        cpu0, started = gw.sample().cpu_s, time.perf_counter()
        await asyncio.gather(*(worker(leg[w::workers]) for w in range(workers)))
        result.seconds += time.perf_counter() - started
        result.cpu_s += gw.sample().cpu_s - cpu0
        await asyncio.sleep(SETTLE_S)
        readings[len(result.samples)] = gw.sample()
    result.model_ns = await asyncio.to_thread(model.dump)
    return result, readings


async def floor_phase(model: ModelProcess, rng: random.Random) -> PhaseResult:
    """Direct calls to the fake with a gateway-like body (system + 10 history messages)."""
    result = PhaseResult("floor")
    history: list[dict[str, str]] = []
    for i in range(10):
        text = message_text(rng, f"h{i}")
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": f"echo: {text}"}]

    async def one(k: int) -> None:
        conn = Conn(model.port)
        await conn.open()
        try:
            for i in range(k, FLOOR_CALLS, FLOOR_CONNS):
                token = f"F.{i:05d}"
                body = {"model": "fake-model", "messages": [
                    {"role": "system", "content": "You are Hermes. " * 20}, *history,
                    {"role": "user", "content": message_text(rng, token)}]}
                status, _, took = await conn.post("/v1/chat/completions", json.dumps(body).encode())
                if status == 200:
                    result.samples.append(Sample(token, took))
                else:
                    result.errors.append(f"floor {token}: HTTP {status}")
                await asyncio.sleep(rng.uniform(0.0, 0.004))
        finally:
            await conn.close()

    started = time.perf_counter()
    await asyncio.gather(*(one(k) for k in range(FLOOR_CONNS)))
    result.seconds = time.perf_counter() - started
    result.model_ns = await asyncio.to_thread(model.dump)
    return result


def poisson_arrivals(rng: random.Random, chats: int, per_chat: int, rate: float) -> list[list[float]]:
    """Per chat, the seconds from the start at which its messages arrive: one Poisson process
    at ``rate`` over all chats, each arrival given to a chat at random (``per_chat`` each)."""
    owners = [c for c in range(chats) for _ in range(per_chat)]
    rng.shuffle(owners)
    at: list[list[float]] = [[] for _ in range(chats)]
    t = 0.0
    for owner in owners:
        t += rng.expovariate(rate)
        at[owner].append(t)
    return at


async def paced_phase(gw: GatewayProcess, model: ModelProcess, rng: random.Random, rate: float) -> PhaseResult:
    """Open-loop Poisson arrivals at ``rate`` over all chats; a chat still waiting
    for its previous reply sends the next message as soon as that reply comes."""
    result = PhaseResult("paced")
    chats = plan(rng, "P", PACED_CHATS, PACED_PER_CHAT)
    at = poisson_arrivals(rng, PACED_CHATS, PACED_PER_CHAT, rate)
    cpu0 = gw.sample().cpu_s
    started = time.perf_counter()

    def schedule(times: list[float]) -> Callable[[], float]:
        it = iter(times)
        return lambda: max(0.0, next(it) - (time.perf_counter() - started))

    await asyncio.gather(*(
        run_chat(gw.port, user, texts, result, think=schedule(at[c])) for c, (user, texts) in enumerate(chats)
    ))
    result.seconds = time.perf_counter() - started
    result.cpu_s = gw.sample().cpu_s - cpu0
    result.model_ns = await asyncio.to_thread(model.dump)
    return result


async def long_phase(gw: GatewayProcess, model: ModelProcess, rng: random.Random) -> PhaseResult:
    """One chat, one message after the other: the per-message cost as its history grows."""
    result = PhaseResult("long")
    [(user, texts)] = plan(rng, "H", 1, LONG_MESSAGES)
    started = time.perf_counter()
    await run_chat(gw.port, user, texts, result)
    result.seconds = time.perf_counter() - started
    result.model_ns = await asyncio.to_thread(model.dump)
    return result


# ------------------------------------------------------------------ report


def pct(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def describe(r: PhaseResult) -> str:
    e2e, model, over = r.e2e_ms(), r.model_ms(), r.overhead_ms()
    return (
        f"{r.name:<6} {r.count:>6} msgs in {r.seconds:6.1f} s = {r.rate:7.1f} msg/s | "
        f"e2e p50 {pct(e2e, 0.5):7.2f} p99 {pct(e2e, 0.99):7.2f} ms | "
        f"model p50 {pct(model, 0.5):5.2f} ms | overhead p50 {pct(over, 0.5):7.2f} p99 {pct(over, 0.99):7.2f} ms"
    )


async def run_all(tmp: Path) -> int:
    from gateway.config import GatewayConfig, StorageConfig

    rng = random.Random(SEED)
    defaults_storage, defaults_gateway = StorageConfig(), GatewayConfig()
    print(
        f"Python {'.'.join(map(str, sys.version_info[:3]))}, {os.cpu_count()} CPUs, BENCH_SCALE={SCALE:g}; "
        f"gateway = `python -m gateway.cli run` (subprocess), daemon defaults: "
        f"storage.synchronous={defaults_storage.synchronous}, "
        f"max_concurrent_turns={defaults_gateway.max_concurrent_turns}, logging info -> file"
    )
    print("model = FakeOpenAI echo, zero delay, own process; load generator = this process", flush=True)
    model = ModelProcess()
    gw: GatewayProcess | None = None
    try:
        gw = GatewayProcess(tmp / "home", model.base_url)
        ready_s = await gw.wait_ready()
        await asyncio.sleep(SETTLE_S)
        start = gw.sample()
        await asyncio.sleep(2.0)
        idle_cpu_pct = (gw.sample().cpu_s - start.cpu_s) / 2.0 * 100
        print(f"gateway ready in {ready_s:.2f} s, RSS {start.rss_mb:.1f} MB, idle CPU {idle_cpu_pct:.1f}%", flush=True)

        load, marks = await load_phase(gw, model, rng)
        after_load = gw.sample()
        print(f"  ran load: {LOAD_CHATS} chats x {LOAD_PER_CHAT} messages, {LOAD_WORKERS} at a time, "
              f"{load.seconds:.1f} s", flush=True)
        floor = await floor_phase(model, rng)
        print(f"  ran floor: {FLOOR_CALLS} direct calls to the fake, {floor.seconds:.1f} s", flush=True)
        rate = min(PACED_RATE_MAX, load.rate / 4)
        paced = await paced_phase(gw, model, rng, rate)
        print(
            f"  ran paced: {PACED_CHATS} chats x {PACED_PER_CHAT} messages at ~{rate:.0f} msg/s "
            f"({rate / load.rate:.0%} of the load-phase rate), {paced.seconds:.1f} s",
            flush=True,
        )
        long = await long_phase(gw, model, rng)
        print(f"  ran long: 1 chat x {LONG_MESSAGES} messages back to back, {long.seconds:.1f} s", flush=True)
        await asyncio.sleep(SETTLE_S)
        end = gw.sample()
        db_mb = (tmp / "home" / "state.db").stat().st_size / 1e6
        wal_mb = (tmp / "home" / "state.db-wal").stat().st_size / 1e6
        rc = gw.stop()
        lines, levels, bad = gw.log_summary()
    finally:
        if gw is not None and gw.proc.poll() is None:
            gw.stop()
        model.close()

    print()
    for r in (load, paced, long, floor):
        print("  " + describe(r))
    total = load.count + paced.count + long.count
    print(
        f"  gateway CPU: load {load.cpu_s / max(load.count, 1) * 1000:.2f} ms/msg, "
        f"paced {paced.cpu_s / max(paced.count, 1) * 1000:.2f} ms/msg; "
        f"RSS peak (VmHWM) {end.hwm_mb:.1f} MB; state.db {db_mb:.1f} MB + wal {wal_mb:.1f} MB; exit code {rc}; "
        f"log {lines} lines {levels}"
    )
    for line in bad:
        print(f"  log: {line}")
    tenth = max(1, long.count // 10)
    long_over = long.overhead_ms()
    long_first, long_last = pct(long_over[:tenth], 0.5), pct(long_over[-tenth:], 0.5)
    print(
        f"  long chat: overhead p50 {long_first:.2f} ms over its first {tenth} messages, "
        f"{long_last:.2f} ms over its last {tenth} (history up to {2 * long.count} rows sent to the model)"
    )
    errors = [e for r in (load, paced, long, floor) for e in (*r.errors, *r.unmatched())]
    for e in errors[:10]:
        print(f"  error: {e}")
    if errors:
        print(f"  {len(errors)} errors")

    early, late = marks.get(RSS_EARLY), marks.get(RSS_LATE)
    over = paced.overhead_ms()
    p50, p99 = pct(over, 0.5), pct(over, 0.99)
    load_over = load.overhead_ms()
    growth = late.rss_mb / early.rss_mb if early and late else float("nan")
    print()
    print(f"gateway.msgs_per_s={load.rate:.1f}")
    print(f"gateway.overhead_p50_ms={p50:.2f}")
    print(f"gateway.overhead_p99_ms={p99:.2f}")
    print(f"gateway.load_overhead_p50_ms={pct(load_over, 0.5):.2f}")
    print(f"gateway.load_overhead_p99_ms={pct(load_over, 0.99):.2f}")
    print(f"gateway.long_chat_first_p50_ms={long_first:.2f}")
    print(f"gateway.long_chat_last_p50_ms={long_last:.2f}")
    print(f"gateway.floor_p50_ms={pct(floor.overhead_ms(), 0.5):.2f}")
    print(f"gateway.cpu_ms_per_msg={load.cpu_s / max(load.count, 1) * 1000:.2f}")
    print(f"gateway.rss_start_mb={start.rss_mb:.1f}")
    if early and late:
        print(f"gateway.rss_after_1k_mb={early.rss_mb:.1f}")
        print(f"gateway.rss_after_10k_mb={late.rss_mb:.1f}")
    print(f"gateway.rss_growth_1k_10k={growth:.3f}")
    print(f"gateway.rss_after_load_mb={after_load.rss_mb:.1f}")
    print(f"gateway.rss_mb={end.rss_mb:.1f}")
    print()
    targets = [
        (
            f"RSS flat within 10% between {RSS_EARLY} and {RSS_LATE} messages",
            f"{early.rss_mb if early else float('nan'):.1f} -> {late.rss_mb if late else float('nan'):.1f} MB "
            f"= x{growth:.3f}",
            growth <= RSS_GROWTH_TARGET,
        ),
        (
            f"overhead p50 <= {OVERHEAD_P50_TARGET_MS:g} ms at {PACED_CHATS} concurrent chats",
            f"{p50:.2f} ms (p99 {p99:.2f} ms, {paced.count} msgs at {paced.rate:.0f} msg/s)",
            p50 <= OVERHEAD_P50_TARGET_MS,
        ),
    ]
    print("targets:")
    for name, measured, ok in targets:
        print(f"  {_verdict(ok)}  {name}: {measured}")
    if errors or rc != 0 or total == 0:
        print(f"gateway benchmark invalid: {len(errors)} failed requests, gateway exit code {rc}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-gw-"))
    try:
        return asyncio.run(run_all(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


PLATFORM_MODES = ("telegram", "discord", "slack")


if __name__ == "__main__":
    if sys.argv[1:2] == ["_fake-model"]:
        _fake_model_main()
    elif sys.argv[1:2] and sys.argv[1] in PLATFORM_MODES:
        import importlib

        sys.exit(importlib.import_module(f"bench.{sys.argv[1]}").main())
    elif sys.argv[1:]:
        sys.exit(f"usage: python -m bench.gateway [{'|'.join(PLATFORM_MODES)}]")
    else:
        sys.exit(main())
