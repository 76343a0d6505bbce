"""The real daemon, in-process, with the real python-telegram-bot talking to ``FakeTelegram``.

``run_telegram_gateway`` follows ``tests.gateway.conftest.run_gateway``: it writes
``config.yaml`` and ``.env`` into a fresh home, loads them with ``load_config``
and runs ``Gateway.run()`` — the same start-up path as ``hermes-gateway run`` —
then waits until the Telegram adapter is connected (or has failed).
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from adapters.telegram import TelegramAdapter
from core.llm import ModelClient
from gateway.config import load_config
from gateway.daemon.runner import Gateway
from gateway.routing.turns import AgentMaker
from tests.emulators.fake_telegram import FakeTelegram
from tests.gateway.conftest import free_port, write_config

START_TIMEOUT = 15.0


def rows(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    """``sql`` on state.db, read-only (the daemon may be writing it)."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def assistant_rows(db: Path) -> list[tuple[str, str | None]]:
    """Every stored assistant message: (content, finish_reason), in order."""
    return [(r[0], r[1]) for r in rows(db, "SELECT content, finish_reason FROM messages WHERE role = 'assistant' "
                                           "ORDER BY id")]


async def stored_answers(db: Path, count: int = 1, timeout: float = 30.0) -> list[tuple[str, str | None]]:
    """The assistant rows once ``count`` exist (or whatever is there at ``timeout``).

    A streamed answer can show its last word before the model's call has ended and the answer
    is committed, so a test that has just seen the whole text waits here for the row.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = assistant_rows(db)
        if len(found) >= count or loop.time() > deadline:
            return found
        await asyncio.sleep(0.05)


@dataclass
class RunningTelegram:
    gateway: Gateway
    home: Path
    fake: FakeTelegram
    http: httpx.AsyncClient
    port: int

    @property
    def adapter(self) -> TelegramAdapter:
        assert self.gateway.services is not None
        adapter = self.gateway.services.adapters["telegram"]
        assert isinstance(adapter, TelegramAdapter)
        return adapter

    @property
    def db_path(self) -> Path:
        return self.home / "state.db"

    def state(self) -> str | None:
        st = self.gateway.adapter_states.get("telegram")
        return st.state if st else None

    async def wait_state(self, *states: str, timeout: float = 15.0) -> str:
        async def reached() -> str:
            while (s := self.state()) not in states:
                await asyncio.sleep(0.02)
            assert s is not None
            return s

        return await asyncio.wait_for(reached(), timeout)

    async def health(self) -> dict[str, Any]:
        """/healthz's body (the runner's adapter states) with /readyz's verdict as ``ready_status``.

        /healthz itself is liveness (200 while the loop answers), so whether the
        daemon is fit to serve is /readyz's status code."""
        body: dict[str, Any] = (await self.http.get("/healthz")).json()
        body["ready_status"] = (await self.http.get("/readyz")).status_code
        return body


def telegram_config(fake: FakeTelegram, **overrides: Any) -> dict[str, Any]:
    """``platforms.telegram`` pointing at the fake, with quick but safe test timings."""
    return {
        "base_url": fake.base_url,
        "base_file_url": fake.base_file_url,
        "poll_timeout": 5,
        "watchdog_grace": 3.0,
        "conflict_backoff": 0.05,
        **overrides,
    }


def daemon_config(model_url: str | None, port: int, platform: str, section: dict[str, Any],
                  defaults: dict[str, dict[str, Any]] | None = None,
                  overrides: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """config.yaml for one platform beside the HTTP API: quick test timings, ``defaults`` of the
    platform's tests, then a test's own ``overrides`` merged section by section."""
    cfg: dict[str, Any] = {
        "model": {"base_url": model_url, "default": "fake-model", "max_retries": 0, "timeout": 30},
        "platforms": {"api_server": {"port": port}, platform: section},
        "storage": {"synchronous": "NORMAL"},
        "logging": {"format": "json", "level": "warning"},
    }
    for extra in (defaults or {}, overrides or {}):
        for name, values in extra.items():
            cfg.setdefault(name, {}).update(values)
    return cfg


@asynccontextmanager
async def serve_gateway(home: Path, cfg: dict[str, Any], env: dict[str, str], adapter: str,
                        wait_for: tuple[str, ...], *,
                        agent_maker: Callable[[ModelClient], AgentMaker] | None = None,
                        ) -> AsyncIterator[tuple[Gateway, httpx.AsyncClient]]:
    """The daemon's real start-up path (config.yaml + .env -> ``load_config`` -> ``Gateway.run``),
    in-process, until ``adapter`` reaches one of ``wait_for`` (or the run ends); stopped after.
    ``agent_maker``: the daemon's agents (a test's own tools: ``DefaultAgents(client, registry=...)``)."""
    write_config(home, cfg, env)
    gw = (Gateway(load_config(home, environ={})) if agent_maker is None
          else Gateway(load_config(home, environ={}), agent_maker=agent_maker))
    task = asyncio.create_task(gw.run())

    def started() -> bool:
        st = gw.adapter_states.get(adapter)
        return task.done() or (gw.http_port is not None and st is not None and st.state in wait_for)

    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT
    while not started():
        if loop.time() > deadline:
            gw.request_stop()
            await asyncio.wait_for(task, 30)
            raise AssertionError(f"the {adapter} adapter did not reach {wait_for}: {gw.adapter_states}")
        await asyncio.sleep(0.01)
    if task.done():
        task.result()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as http:
        try:
            yield gw, http
        finally:
            gw.request_stop()
            await asyncio.wait_for(task, 30)


@asynccontextmanager
async def run_telegram_gateway(
    home: Path,
    fake: FakeTelegram,
    model_url: str | None,
    *,
    telegram: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    config: dict[str, Any] | None = None,
    port: int | None = None,
    wait_for: tuple[str, ...] = ("connected",),
    agent_maker: Callable[[ModelClient], AgentMaker] | None = None,
) -> AsyncIterator[RunningTelegram]:
    port = port or free_port()
    cfg = daemon_config(model_url, port, "telegram", telegram_config(fake, **(telegram or {})), {
        # Background model calls (titles, reviews) would race the scripted replies; tests that want them opt in.
        "agent": {"auto_title": False, "memory_nudge_interval": 0, "skill_nudge_interval": 0},
        # Typing from the first moment, so tests of quick answers see it too (the delay has its own test).
        "gateway": {"typing_delay": 0},
    }, config)
    full_env = {"TELEGRAM_BOT_TOKEN": fake.token, "TELEGRAM_ALLOWED_USERS": str(fake.user["id"]), **(env or {})}
    async with serve_gateway(home, cfg, full_env, "telegram", wait_for, agent_maker=agent_maker) as (gw, http):
        yield RunningTelegram(gw, home, fake, http, port)
