from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from gateway.config import load_config
from gateway.daemon.runner import Gateway
from tests.gateway._chat_adapter import ChatAdapter


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Running:
    gateway: Gateway
    home: Path
    chat: ChatAdapter
    http: httpx.AsyncClient

    @property
    def db_path(self) -> Path:
        return self.home / "state.db"

    async def ask(self, text: str, user: str = "alice", **extra: Any) -> httpx.Response:
        body = {"model": "fake-model", "messages": [{"role": "user", "content": text}], "user": user, **extra}
        return await self.http.post("/v1/chat/completions", json=body)


def write_config(home: Path, config: dict[str, Any], env: dict[str, str] | None = None) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    if env:
        (home / ".env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))


@asynccontextmanager
async def run_gateway(
    home: Path,
    base_url: str | None,
    *,
    config: dict[str, Any] | None = None,
    env: dict[str, str] | None = None,
    chat: ChatAdapter | None = None,
    memory_flush: Any = None,
    agent_maker: Any = None,
    cron_clock: Any = None,
) -> AsyncIterator[Running]:
    cfg: dict[str, Any] = {
        "model": {"base_url": base_url, "default": "fake-model", "max_retries": 0, "timeout": 30},
        "platforms": {"api_server": {"port": free_port()}},
        "storage": {"synchronous": "NORMAL"},
        "logging": {"format": "json", "level": "warning"},
        # Background model calls (titles, reviews) would race the scripted replies; tests that want them opt in.
        "agent": {"auto_title": False, "memory_nudge_interval": 0, "skill_nudge_interval": 0},
    }
    if base_url is None:
        del cfg["model"]
    for section, values in (config or {}).items():
        cfg.setdefault(section, {}).update(values)
    write_config(home, cfg, env)
    loaded = load_config(home, environ={})
    chat = chat or ChatAdapter()
    gw = Gateway(loaded, extra_adapters={chat.platform: chat}, memory_flush=memory_flush, cron_clock=cron_clock,
                 **({"agent_maker": agent_maker} if agent_maker is not None else {}))
    task = asyncio.create_task(gw.run())
    for _ in range(500):
        if (gw.http_port and chat.ready.is_set()) or task.done():
            break
        await asyncio.sleep(0.01)
    if task.done():
        task.result()
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as http:
        try:
            yield Running(gw, home, chat, http)
        finally:
            gw.request_stop()
            await asyncio.wait_for(task, 30)


@pytest.fixture
def gateway_home(tmp_path: Path) -> Path:
    return tmp_path / "hermes"


GatewayStarter = Callable[..., Any]
