"""What the cluster tests (three real daemons over one PostgreSQL server and FakeTelegram) share:
each node's ``status`` over its control socket, who polls, what the bot sent, what is stored."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from gateway.control.client import call
from gateway.errors import ControlError
from storage.postgres import PgStore
from tests.emulators.fake_telegram import FakeTelegram

from .._telegram_process import until

NODES = ("n1", "n2", "n3")


async def status(home: Path) -> dict[str, Any] | None:
    try:
        return await call(home, "status", reply_within=5)
    except (ControlError, OSError):
        return None


async def cluster_of(home: Path) -> dict[str, Any]:
    st = await status(home)
    return dict(st.get("cluster") or {}) if st is not None else {}


async def wait_cluster(home: Path, what: str, check: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def poll() -> bool:
        seen.clear()
        seen.update(await cluster_of(home))
        return bool(seen) and bool(check(seen))

    async def loop() -> None:
        while not await poll():
            await asyncio.sleep(0.2)

    task = asyncio.create_task(loop())
    try:
        await until(task.done, what)
    finally:
        task.cancel()
    return seen


def pollers(view: dict[str, Any]) -> list[str]:
    return [n["node_id"] for n in view["nodes"] if n["alive"] and "telegram" in n["roles"]]


def answers(fake: FakeTelegram, chat_id: int) -> list[str]:
    return [str(m.get("rendered") or m["text"]) for m in fake.sent if m["chat_id"] == chat_id]


RECOVERED = "↻ (recovered after a restart) "


def delivered(fake: FakeTelegram) -> list[tuple[int, str]]:
    """(chat, answer) for each answer the bot sent, the recovery prefix taken off."""
    out = []
    for m in fake.sent:
        text = str(m.get("rendered") or m.get("text") or "").removeprefix(RECOVERED)
        if text.startswith("echo: "):
            out.append((int(m["chat_id"]), text.removeprefix("echo: ")))
    return out


async def stored(pg_url: str) -> list[tuple[str, str, str]]:
    """(session, role, content) of every stored message, in the order they were stored."""
    async with PgStore(pg_url) as store:
        found = await store.read(lambda c: c.execute(
            "SELECT session_id, role, content FROM messages ORDER BY id").fetchall())
    return [(str(r[0]), str(r[1]), str(r[2])) for r in found]
