"""Shared by the scheduled-jobs front-end tests: a daemon with a chat platform (``testchat``,
where answers can be delivered later), and reading what the ``cronjob`` tool told the model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from gateway.scheduler import Jobs, JobView, jobs_of
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import Running, run_gateway

ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1,u2"}
WAIT = 15.0


@asynccontextmanager
async def running(home: Path, fake: FakeOpenAI, *, config: dict[str, Any] | None = None) -> AsyncIterator[Running]:
    async with run_gateway(home, fake.base_url, config=config, env=ALLOW, chat=ChatAdapter()) as run:
        yield run


def jobs(run: Running) -> Jobs:
    services = run.gateway.services
    found = jobs_of(services)
    assert found is not None, "the daemon runs without scheduled jobs"
    return found


async def all_jobs(run: Running) -> list[JobView]:
    return await jobs(run).list(None)


def tool_results(fake: FakeOpenAI) -> list[str]:
    """What each ``cronjob`` call answered, in order (read from the requests that followed)."""
    seen: dict[str, str] = {}
    for request in fake.chat_requests:
        messages = request.body.get("messages") or []
        names = {c["id"]: c["function"]["name"] for m in messages if m.get("role") == "assistant"
                 for c in m.get("tool_calls") or []}
        for m in messages:
            if m.get("role") == "tool" and names.get(m.get("tool_call_id")) == "cronjob":
                seen.setdefault(m["tool_call_id"], str(m["content"]))
    return list(seen.values())


def result_json(text: str) -> dict[str, Any]:
    value = json.loads(text)
    assert isinstance(value, dict)
    return value


async def say(run: Running, text: str, *, user: str = "u1", **kw: Any) -> str:
    """One message on testchat; the text of the next message the chat gets back."""
    chat = kw.get("chat") or user
    before = len(run.chat.to(chat))
    await run.chat.say(text, user=user, **kw)
    sent = await run.chat.wait_sent(before + 1, chat=chat, timeout=WAIT)
    return sent[before].text
