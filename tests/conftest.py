from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from storage import StateStore, WriterSettings

pytest_plugins = ["tests.fakes.plugin", "tests.emulators.plugin", "tests.pg.plugin"]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "home" / "state.db"


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[StateStore]:
    async with StateStore(db_path, writer_settings=WriterSettings(synchronous="NORMAL")) as st:
        yield st
