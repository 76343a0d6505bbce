"""A workspace under a fake $HERMES_HOME, its FilesSettings, a ToolContext and the registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.tools import ToolContext, ToolRegistry
from core.tools.files import FilesSettings, file_tools
from storage import StateStore


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "hermes"
    (h / "workspace").mkdir(parents=True)
    return h


@pytest.fixture
def ws(home: Path) -> Path:
    return home / "workspace"


@pytest.fixture
def ssh(tmp_path: Path) -> Path:
    return tmp_path / "userhome" / ".ssh"


@pytest.fixture
def settings(home: Path, ssh: Path) -> FilesSettings:
    return FilesSettings.for_home(home, protected_extra=(ssh,), search_timeout=2.0)


@pytest.fixture
def ctx(home: Path, store: StateStore) -> ToolContext:
    return ToolContext(session_id="s1", platform="telegram", home=home, store=store, user_id="42")


@pytest.fixture
def registry(settings: FilesSettings) -> ToolRegistry:
    return ToolRegistry(file_tools(settings))
