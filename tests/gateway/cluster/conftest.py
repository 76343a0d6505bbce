from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack

import pytest


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    """Nodes and stores started by a test, stopped after it (last first)."""
    async with AsyncExitStack() as s:
        yield s
