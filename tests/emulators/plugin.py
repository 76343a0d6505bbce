"""Pytest plugin with the fixtures of ``tests.emulators``.

Enable it with ``pytest_plugins = [..., "tests.emulators.plugin"]`` in the top-level conftest, or
``-p tests.emulators.plugin`` on the command line.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from .fake_discord import FakeDiscord
from .fake_slack import FakeSlack
from .fake_telegram import FakeTelegram

_PROXY_VARS = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "WS_PROXY",
    "WSS_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "ws_proxy",
    "wss_proxy",
)


@pytest.fixture(autouse=True)
def _no_proxy_for_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx (PTB) and other clients honour proxy variables even for 127.0.0.1: clear them for every test."""
    for name in _PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest_asyncio.fixture
async def fake_telegram() -> AsyncIterator[FakeTelegram]:
    """A started ``FakeTelegram`` on a free 127.0.0.1 port, stopped after the test."""
    async with FakeTelegram() as fake:
        yield fake


@pytest_asyncio.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    """A started ``FakeSlack`` (Web API, Socket Mode, Events API) on a free 127.0.0.1 port."""
    async with FakeSlack() as fake:
        yield fake


@pytest_asyncio.fixture
async def fake_discord() -> AsyncIterator[FakeDiscord]:
    """A started ``FakeDiscord`` (REST + gateway websocket) on a free 127.0.0.1 port."""
    async with FakeDiscord() as fake:
        yield fake
