"""Scheduled jobs benchmark: what 10,000 stored jobs cost an idle daemon, and how late 200 jobs
that fall due in the same second reach the model.

Both legs run the real daemon (``python -m gateway.cli run``, this checkout on PYTHONPATH) on a
fresh ``$HERMES_HOME`` whose state.db is seeded before it starts, through ``storage.cron.insert``
in one transaction (the rows ``Jobs.create`` writes; the daemon loads them as it would its own).

* ``cron.idle_cpu_pct``: 10,000 jobs (a third each: a daily cron expression at a random minute,
  ``every <n>h``, a one-shot), every one next due at least two hours out. After ``/readyz`` and a
  settle of ``SETTLE`` s, the daemon's CPU time (utime + stime of /proc/<pid>/stat) over ``WINDOW``
  s of wall time, in percent of one core. Target <= 0.5 %. The same daemon with no jobs is
  measured first, for the floor (sweeper, state publisher, watchdog).
* ``cron.lateness_ms``: 200 one-shot jobs due at the same whole second T (``DUE_IN`` s after the
  daemon is ready), ``cron.max_concurrent: 200``, ``deliver: none``, and an instant model: an
  aiohttp server in this process that answers at once and notes ``time.time()`` when each
  request arrives. Lateness of a job = arrival of its model request - T (the scheduler's claim,
  the run's session, the question's commit and the model client in between). p50/p99/max of the
  200; target p99 <= 2,000 ms. ``BENCH_SCALE`` scales WINDOW (at least 10 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from bench._platform import stop
from bench.gateway import ROOT, free_port, http_get, pct, sample_proc
from storage import CronJobRow, StateStore, cron

SCALE = float(os.environ.get("BENCH_SCALE", "1"))
JOBS = 10_000
DUE_TOGETHER = 200
WINDOW = max(10.0, 60.0 * SCALE)
SETTLE = 5.0
DUE_IN = 5.0
#: what the daemon is given to start before the jobs fall due
STARTUP = 10.0
IDLE_TARGET_PCT = 0.5
LATENESS_TARGET_MS = 2000.0


def _job(i: int, *, kind: str, schedule: str, next_due: float, now: float, deliver: str = "origin") -> CronJobRow:
    return CronJobRow(
        id=f"{i:08x}", name=f"job {i}", prompt=f"job-{i}: summarise the day", schedule=schedule, kind=kind,
        deliver=deliver, toolsets=None, catch_up="once", owner_platform="api-server", owner_chat_id=f"chat-{i % 500}",
        owner_thread_id=None, owner_user_id=f"user-{i % 500}", owner_session_key=f"agent:main:api-server:dm:{i % 500}",
        owner_chat_type="dm", paused=False, next_due=next_due, run_requested=False, last_run_at=None,
        last_status=None, failures=0, created_at=now, updated_at=now)


def idle_jobs(now: float) -> list[CronJobRow]:
    rng = random.Random(22)
    out = []
    for i in range(JOBS):
        later = now + 7200 + rng.uniform(0, 86400)
        kind = ("cron", "every", "once")[i % 3]
        schedule = {"cron": f"{rng.randrange(60)} {rng.randrange(24)} * * *", "every": f"every {rng.randrange(2, 24)}h",
                    "once": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(later))}[kind]
        out.append(_job(i, kind=kind, schedule=schedule, next_due=later, now=now))
    return out


async def seed(home: Path, rows: list[CronJobRow]) -> None:
    await asyncio.to_thread(home.mkdir, parents=True, exist_ok=True)

    def op(conn: Any) -> None:
        for row in rows:
            cron.insert(conn, row)

    async with StateStore(home / "state.db") as store:
        await store.write(op)


class Daemon:
    """``hermes-gateway run`` on ``home`` with the HTTP API (for /readyz), the instant model and ``cron``."""

    def __init__(self, home: Path, model_url: str, cron_settings: dict[str, Any]) -> None:
        self.port = free_port()
        config = {
            "model": {"base_url": model_url, "default": "fake-model", "max_retries": 0},
            "platforms": {"api_server": {"host": "127.0.0.1", "port": self.port}},
            "agent": {"auto_title": False, "memory_nudge_interval": 0, "skill_nudge_interval": 0},
            "logging": {"format": "json", "level": os.environ.get("BENCH_CRON_LOG", "warning")},
            "cron": {"timezone": "UTC", **cron_settings},
        }
        (home / "config.yaml").write_text(yaml.safe_dump(config))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "API_SERVER", "GATEWAY_"))}
        env.update(HERMES_HOME=str(home), PYTHONPATH=str(ROOT))
        self._log = open(home / "gateway.log", "a")
        self.proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "run"], cwd=ROOT, env=env,
                                     stdout=self._log, stderr=subprocess.STDOUT)

    async def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the gateway exited with {self.proc.returncode}")
            with contextlib.suppress(OSError, ValueError):
                if (await http_get(self.port, "/readyz"))[0] == 200:
                    return
            await asyncio.sleep(0.05)
        raise RuntimeError("the gateway was not ready in time")

    def stop(self) -> None:
        stop(self.proc, 60)
        self._log.close()


async def start(home: Path, model_url: str, cron_settings: dict[str, Any]) -> Daemon:
    daemon = Daemon(home, model_url, cron_settings)
    try:
        await daemon.wait_ready()
    except BaseException:
        daemon.stop()
        raise
    return daemon


async def idle_cpu(tmp: Path, model_url: str, jobs: int) -> float:
    home = tmp / f"idle-{jobs}"
    await seed(home, idle_jobs(time.time())[:jobs])
    gw = await start(home, model_url, {})
    try:
        await asyncio.sleep(SETTLE)
        before, t0 = sample_proc(gw.proc.pid).cpu_s, time.perf_counter()
        await asyncio.sleep(WINDOW)
        after, t1 = sample_proc(gw.proc.pid).cpu_s, time.perf_counter()
    finally:
        await asyncio.to_thread(gw.stop)
    return (after - before) / (t1 - t0) * 100


class InstantModel:
    """An OpenAI-compatible endpoint that answers at once and notes when each job's request came."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def _chat(self, request: web.Request) -> web.Response:
        now = time.time()
        body = await request.json()
        text = str(body["messages"][-1].get("content") or "")
        self.arrived.setdefault(text.split(":", 1)[0], now)
        return web.json_response({
            "id": "c1", "object": "chat.completion", "created": int(now), "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}})

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{self.port}/v1"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


async def lateness(tmp: Path, model: InstantModel, model_url: str) -> list[float]:
    home = tmp / "lateness"
    # A whole second, far enough ahead for the daemon to be ready well before it.
    due = float(int(time.time() + STARTUP + DUE_IN))
    now = time.time()
    iso = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(due))
    await seed(home, [_job(i, kind="once", schedule=iso, next_due=due, now=now, deliver="none")
                      for i in range(DUE_TOGETHER)])
    gw = await start(home, model_url, {"max_concurrent": DUE_TOGETHER})
    try:
        if time.time() >= due:
            raise RuntimeError("the daemon took too long to start: the jobs were due before it was ready")
        deadline = due + 60
        while len(model.arrived) < DUE_TOGETHER and time.time() < deadline:
            await asyncio.sleep(0.1)
    finally:
        await asyncio.to_thread(gw.stop)  # in a thread: the model (on this loop) answers what is left
    return [(model.arrived[f"job-{i}"] - due) * 1000 for i in range(DUE_TOGETHER) if f"job-{i}" in model.arrived]


async def run_all(tmp: Path) -> int:
    model = InstantModel()
    url = await model.start()
    try:
        floor = await idle_cpu(tmp, url, 0)
        idle = await idle_cpu(tmp, url, JOBS)
        late = await lateness(tmp, model, url)
    finally:
        await model.stop()
    print(f"idle, {WINDOW:g} s window after {SETTLE:g} s settle: no jobs {floor:.3f} %, "
          f"{JOBS:,} jobs {idle:.3f} % of one core")
    print(f"lateness, {DUE_TOGETHER} jobs due in one second (max_concurrent {DUE_TOGETHER}), "
          f"{len(late)} reached the model: p50 {pct(late, 0.5):.1f} p99 {pct(late, 0.99):.1f} "
          f"max {max(late, default=float('nan')):.1f} ms")
    ok_idle = idle <= IDLE_TARGET_PCT
    ok_late = len(late) == DUE_TOGETHER and pct(late, 0.99) <= LATENESS_TARGET_MS
    print("targets:")
    print(f"  {'PASS' if ok_idle else 'MISS'}  cron.idle_cpu_pct {idle:.3f} <= {IDLE_TARGET_PCT:g}")
    print(f"  {'PASS' if ok_late else 'MISS'}  cron.lateness_ms {pct(late, 0.99):.1f} <= {LATENESS_TARGET_MS:g}")
    print(json.dumps({"cron.idle_cpu_pct": round(idle, 4), "cron.idle_cpu_pct_no_jobs": round(floor, 4),
                      "cron.lateness_ms_p99": round(pct(late, 0.99), 1)}))
    return 0


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-cron-"))
    try:
        return asyncio.run(run_all(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
