"""HTTP flood benchmark: /healthz and a chat load while thousands of idle connections are held open.

Four processes on 127.0.0.1, on ``bench/gateway.py``'s harness: the gateway under test
(``python -m gateway.cli run`` with daemon defaults: ``keepalive_timeout`` 15 s, ``max_connections``
half its open-file limit), the echo ``FakeOpenAI``, the flood client, and this process (chat load,
probe, sampler). This process raises its soft open-file limit to the hard limit before starting
the gateway, which inherits it; the flood client does the same for itself.

* The flood: ``FLOOD`` TCP connections, half silent, half with half a header. Once all are open,
  the clock starts (t = 0). The gateway closes each after ``keepalive_timeout``; the flood client
  opens it again at once, as a client trying to starve the daemon would.
* The chat load, from t = 0 for ``RUN_SECONDS``: ``CHATS`` chats through ``/v1/chat/completions``,
  one keep-alive connection each, messages arriving as a Poisson process at ``CHAT_RATE`` msg/s
  over all chats; every answer must be the echo of its question ("the chat load loses nothing").
* The probe: ``GET /healthz`` on a fresh connection every ``PROBE_INTERVAL_S`` (as a container
  health check does), timed from connect to the last byte.
* The sampler: the gateway's open descriptors (``/proc/<pid>/fd``) every 100 ms, in a thread.

Two windows: *held*, until the first flood connection was opened ``keepalive_timeout`` ago (minus
half a second): all ``FLOOD`` connections are open throughout; *recycle*, the rest, in which the
gateway closes the whole flood at once and it reconnects.

Figures: ``http.flood_healthz_p99_ms`` (held window; target <= 50 ms, with no chat message lost in
the whole run), ``http.flood_recycle_healthz_p99_ms`` (no target), and ``http.flood_fds_max`` (the
peak over the whole run; target at least 20% below the gateway's limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.gateway import (
    ROOT,
    SCALE,
    GatewayProcess,
    ModelProcess,
    PhaseResult,
    close_child,
    http_get,
    pct,
    plan,
    poisson_arrivals,
    run_chat,
)

SEED = 20240917
FLOOD = int(os.environ.get("BENCH_HTTP_FLOOD", "5000"))
RUN_SECONDS = max(20.0, 30.0 * SCALE)  # beyond the 15 s keep-alive: the flood is closed and re-opened
CHATS = 50
CHAT_RATE = 40.0  # msg/s over all chats
PROBE_INTERVAL_S = 0.05
FD_SAMPLE_S = 0.1
HALF_HEADER = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"

HEALTHZ_P99_TARGET_MS = 50.0
FD_HEADROOM_TARGET = 0.20


def load_average() -> str:
    with contextlib.suppress(OSError):
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return "?"


def raise_fd_limit() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def gateway_fd_limit(pid: int) -> int | None:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft = line[len("Max open files"):].split()[0]
            return int(soft) if soft.isdigit() else None
    return None


@dataclass
class Flood:
    port: int
    size: int
    reopened: int = 0
    failed_connects: int = 0
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def held(self) -> int:
        return len(self._writers)

    async def _hold(self, half: bool) -> None:
        """One flood slot: connect, maybe send half a header, wait for the server to close, again."""
        first = True
        while not self._stop.is_set():
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                self.failed_connects += 1
                await asyncio.sleep(0.1)
                continue
            if not first:
                self.reopened += 1
            first = False
            self._writers.add(writer)
            try:
                if half:
                    writer.write(HALF_HEADER)
                stop = asyncio.create_task(self._stop.wait())
                closed = asyncio.create_task(reader.read())
                await asyncio.wait({stop, closed}, return_when=asyncio.FIRST_COMPLETED)
                stop.cancel()
                closed.cancel()
            except OSError:
                pass
            finally:
                self._writers.discard(writer)
                writer.close()

    async def start(self) -> list[asyncio.Task[None]]:
        tasks = []
        for i in range(self.size):
            tasks.append(asyncio.create_task(self._hold(half=bool(i % 2))))
            if i % 250 == 249:
                await asyncio.sleep(0.01)  # let each batch connect (the accept queue is finite)
        while self.held < self.size and not self._stop.is_set():
            await asyncio.sleep(0.05)
        return tasks

    def stop(self) -> None:
        self._stop.set()


def _flood_main(port: int, size: int) -> None:
    """Child process: hold the flood; print ``held <n>`` once it is up, then answer stdin lines:
    ``stats`` -> one JSON line; EOF -> close everything and exit."""

    async def serve() -> None:
        raise_fd_limit()
        flood = Flood(port, size)
        first_at = time.time()
        tasks = await flood.start()
        print(f"held {flood.held} {first_at}", flush=True)
        loop = asyncio.get_running_loop()
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            print(json.dumps({"held": flood.held, "reopened": flood.reopened, "failed": flood.failed_connects}),
                  flush=True)
        flood.stop()
        await asyncio.gather(*tasks)

    asyncio.run(serve())


class FloodProcess:
    """The flood in a process of its own: its 5,000 sockets and tasks neither share this process's
    event loop (which times /healthz) nor its descriptors."""

    def __init__(self, port: int, size: int) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.http", "_flood", str(port), str(size)],
                                     cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def wait_held(self) -> tuple[int, float]:
        """(connections held, epoch seconds when the first was opened)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("held "):
            raise RuntimeError(f"the flood did not start (said {line!r})")
        _, held, first_at = line.split()
        return int(held), float(first_at)

    def stats(self) -> dict[str, int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return dict(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        close_child(self.proc, timeout=60)


class FdSampler:
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                self.samples.append(len(os.listdir(f"/proc/{self.pid}/fd")))
            self._stop.wait(FD_SAMPLE_S)

    def __enter__(self) -> FdSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def probe_healthz(port: int, until: float, samples: list[tuple[float, float]], failures: list[str]) -> None:
    """Every PROBE_INTERVAL_S: (epoch seconds at the start, ms to the answer) of a /healthz."""
    while time.perf_counter() < until:
        started, at = time.perf_counter(), time.time()
        try:
            status, _ = await asyncio.wait_for(http_get(port, "/healthz"), 10)
        except (OSError, ValueError, IndexError) as exc:  # TimeoutError is an OSError
            failures.append(f"{type(exc).__name__}: {exc}")
        else:
            if status == 200:
                samples.append((at, (time.perf_counter() - started) * 1000))
            else:
                failures.append(f"HTTP {status}")
        await asyncio.sleep(max(0.0, PROBE_INTERVAL_S - (time.perf_counter() - started)))


def _gateway_keepalive() -> float:
    from adapters.api_server import ApiServerSettings

    return ApiServerSettings().keepalive_timeout


async def run_all(tmp: Path) -> int:
    own_limit = raise_fd_limit()
    if own_limit < 1000:
        print(f"this process may open {own_limit} files; the gateway needs more for the flood", file=sys.stderr)
        return 1
    keepalive = _gateway_keepalive()
    print(f"Python {'.'.join(map(str, sys.version_info[:3]))}, {os.cpu_count()} CPUs, BENCH_SCALE={SCALE:g}; "
          f"flood {FLOOD} idle connections, chat load {CHATS} chats at ~{CHAT_RATE:g} msg/s for {RUN_SECONDS:g} s, "
          f"/healthz every {PROBE_INTERVAL_S * 1000:g} ms on a fresh connection; gateway keepalive_timeout "
          f"{keepalive:g} s; load average {load_average()}", flush=True)
    rng = random.Random(SEED)
    model = ModelProcess()
    gw: GatewayProcess | None = None
    flood: FloodProcess | None = None
    probes: list[tuple[float, float]] = []
    probe_failures: list[str] = []
    chat = PhaseResult("chat")
    per_chat = max(1, round(CHAT_RATE * RUN_SECONDS / CHATS * 0.9))
    try:
        gw = GatewayProcess(tmp / "home", model.base_url)
        await gw.wait_ready()
        limit = gateway_fd_limit(gw.pid)
        with FdSampler(gw.pid) as fds:
            idle_fds = len(os.listdir(f"/proc/{gw.pid}/fd"))
            flood = FloodProcess(gw.port, FLOOD)
            held, first_at = await asyncio.to_thread(flood.wait_held)
            held_until = first_at + keepalive - 0.5
            _, ready_body = await http_get(gw.port, "/readyz")
            print(f"  flood held: {held} connections, all open {time.time() - first_at:.1f} s after the first; "
                  f"/readyz: {ready_body[:320].decode(errors='replace')}", flush=True)
            started, started_at = time.perf_counter(), time.time()
            chats = plan(rng, "F", CHATS, per_chat)
            at = poisson_arrivals(rng, CHATS, per_chat, CHAT_RATE)

            def schedule(times: list[float]) -> Callable[[], float]:
                it = iter(times)
                return lambda: max(0.0, next(it) - (time.perf_counter() - started))

            probe = asyncio.create_task(probe_healthz(gw.port, started + RUN_SECONDS, probes, probe_failures))
            await asyncio.gather(*(run_chat(gw.port, user, texts, chat, think=schedule(at[c]))
                                   for c, (user, texts) in enumerate(chats)))
            chat.seconds = time.perf_counter() - started
            await probe
            flood_stats = await asyncio.to_thread(flood.stats)
            await asyncio.to_thread(flood.close)
        proc = gw.sample()
        rc = gw.stop()
        lines, levels, bad = gw.log_summary()
    finally:
        if flood is not None and flood.proc.poll() is None:
            flood.close()
        if gw is not None and gw.proc.poll() is None:
            gw.stop()
        model.close()

    peak = max(fds.samples) if fds.samples else 0
    lost = CHATS * per_chat - chat.count
    in_held = [ms for t, ms in probes if t < held_until]
    in_recycle = [ms for t, ms in probes if t >= held_until]
    p50, p99 = pct(in_held, 0.5), pct(in_held, 0.99)
    recycle_p99 = pct(in_recycle, 0.99)
    print()
    print(f"  chat: {chat.count}/{CHATS * per_chat} answered in {chat.seconds:.1f} s ({chat.rate:.1f} msg/s), "
          f"e2e p50 {pct(chat.e2e_ms(), 0.5):.1f} ms p99 {pct(chat.e2e_ms(), 0.99):.1f} ms")
    print(f"  /healthz, held window (first {held_until - started_at:.1f} s): {len(in_held)} answered, "
          f"p50 {p50:.2f} ms, p99 {p99:.2f} ms, max {max(in_held, default=0):.2f} ms")
    print(f"  /healthz, recycle window: {len(in_recycle)} answered, p50 {pct(in_recycle, 0.5):.2f} ms, "
          f"p99 {recycle_p99:.2f} ms, max {max(in_recycle, default=0):.2f} ms; {len(probe_failures)} probes failed")
    print(f"  flood: {FLOOD} held, {flood_stats['held']} at the end, {flood_stats['reopened']} re-opened after the "
          f"gateway closed them, {flood_stats['failed']} connects failed")
    print(f"  gateway fds: {idle_fds} idle, peak {peak} of {limit} ({peak / limit:.0%} of the limit)" if limit else
          f"  gateway fds: {idle_fds} idle, peak {peak}, no limit")
    print(f"  gateway RSS peak (VmHWM) {proc.hwm_mb:.0f} MB, CPU {proc.cpu_s:.1f} s; exit code {rc}; "
          f"log {lines} lines {levels}; load average {load_average()}")
    for line in bad:
        print(f"  log: {line}")
    for e in (chat.errors + probe_failures)[:10]:
        print(f"  error: {e}")
    print()
    print(f"http.flood_healthz_p50_ms={p50:.2f}")
    print(f"http.flood_healthz_p99_ms={p99:.2f}")
    print(f"http.flood_recycle_healthz_p99_ms={recycle_p99:.2f}")
    print(f"http.flood_chat_lost={lost}")
    print(f"http.flood_fds_max={peak}")
    print(f"http.flood_fd_limit={limit}")
    print()
    fd_ok = limit is None or peak <= (1 - FD_HEADROOM_TARGET) * limit
    healthz_ok = p99 <= HEALTHZ_P99_TARGET_MS and not probe_failures and lost == 0
    print("targets:")
    print(f"  {'PASS' if healthz_ok else 'MISS'}  /healthz p99 <= {HEALTHZ_P99_TARGET_MS:g} ms with {FLOOD} idle "
          f"connections held, chat load loses nothing: {p99:.2f} ms, {lost} lost, {len(probe_failures)} probes failed")
    print(f"  {'PASS' if fd_ok else 'MISS'}  peak fds at least {FD_HEADROOM_TARGET:.0%} below the limit: "
          f"{peak} of {limit}")
    if rc != 0 or not in_held:
        print(f"http benchmark invalid: gateway exit code {rc}, {len(in_held)} probes in the held window",
              file=sys.stderr)
        return 1
    return 0


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-http-"))
    try:
        return asyncio.run(run_all(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["_flood"]:
        _flood_main(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(main())
