"""Pytest plugin with the fixtures of ``tests.fakes``.

Enable it with ``pytest_plugins = ["tests.fakes.plugin"]`` in the top-level
conftest, or ``-p tests.fakes.plugin`` on the command line.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from .openai_server import FakeOpenAI


@pytest_asyncio.fixture
async def fake_openai() -> AsyncIterator[FakeOpenAI]:
    """A started ``FakeOpenAI`` on a free 127.0.0.1 port, stopped after the test."""
    async with FakeOpenAI() as server:
        yield server
