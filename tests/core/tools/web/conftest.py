from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from core.tools import ToolContext
from storage import StateStore

from ._server import WebServer, serve


@pytest.fixture
async def server() -> AsyncIterator[WebServer]:
    async with serve() as running:
        yield running


@pytest.fixture
def ctx(tmp_path: Path) -> ToolContext:
    # The web tools never touch the store; a real one would only slow the tests down.
    return ToolContext(session_id="s-web", platform="test", home=tmp_path, store=cast(StateStore, cast(Any, None)))
