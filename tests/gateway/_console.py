"""``hermes-gateway`` as a user runs it: the console script of this venv, on this checkout's code."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "hermes-gateway"
TIMEOUT = 60


def console_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HERMES_", "API_SERVER", "GATEWAY_", "TELEGRAM_"))}
    env["HERMES_HOME"] = str(home)
    env["COLUMNS"] = "200"
    # The code under test, not whatever checkout the console script was installed from (a worktree).
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


@dataclass
class Result:
    code: int
    out: str
    err: str
