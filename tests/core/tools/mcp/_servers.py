"""Specs of the suite's MCP servers (``tests/fakes/mcp_server.py``, ``tests/fakes/mcp_malformed.py``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from core.tools.mcp import McpServerSpec

FAKES = Path(__file__).resolve().parents[3] / "fakes"
SERVER = str(FAKES / "mcp_server.py")
MALFORMED = str(FAKES / "mcp_malformed.py")


def fake(name: str = "t", *args: str, timeout: float = 10.0, **kw: Any) -> McpServerSpec:
    return McpServerSpec(name, command=sys.executable, args=(SERVER, *args), timeout=timeout, **kw)


def malformed(name: str = "bad", *, timeout: float = 10.0) -> McpServerSpec:
    return McpServerSpec(name, command=sys.executable, args=(MALFORMED,), timeout=timeout)
