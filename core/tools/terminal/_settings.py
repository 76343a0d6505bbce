"""What the terminal tool is configured with (``tools.terminal`` in config.yaml, made concrete)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: past this much output a command is killed: reading a gigabyte to keep 64 KB of it only burns
#: CPU (a pipe delivers ~1 GB/s, so this is well under a second of reading)
OUTPUT_CEILING_BYTES = 64 * 2**20


def _default_shell() -> str:
    # bash when there is one: models write bash (<(…), [[ ]], pipefail); /bin/sh otherwise
    return shutil.which("bash", path="/usr/bin:/bin") or "/bin/sh"


@dataclass(frozen=True)
class TerminalSettings:
    """Everything a ``terminal`` call needs besides its arguments."""

    #: where commands run (created 0700 when missing)
    cwd: Path
    #: the longest a command may run, in seconds; the model may ask for less, never more
    timeout: float
    #: variables a command may see although they are secrets or come from .env
    pass_env: frozenset[str]
    #: the model gets at most this much of a command's output: half from its start, half from its end
    max_output_bytes: int
    #: names that never reach a command unless in ``pass_env``: every name in $HERMES_HOME/.env and
    #: any other known secret (names that look secret are dropped anyway: see ``child_env``)
    secret_names: frozenset[str]
    #: $HERMES_HOME (writes into it, outside the workspace, are on the dangerous list)
    home: Path
    #: the values of $HERMES_HOME/.env: those named in ``pass_env`` reach a command (the daemon's own
    #: environment wins over them, as in config loading); the rest never do
    dotenv: Mapping[str, str] = field(default_factory=dict)
    #: past this much output the command is killed and the model told
    output_ceiling_bytes: int = OUTPUT_CEILING_BYTES
    #: after SIGTERM on a timeout, how long the group has before SIGKILL
    kill_grace: float = 2.0
    #: the shell that runs the command (``<shell> -c <command>``)
    shell: str = field(default_factory=_default_shell)

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise ValueError("timeout must be positive")
        if self.max_output_bytes < 64:
            raise ValueError("max_output_bytes must be at least 64")
        if self.output_ceiling_bytes < self.max_output_bytes:
            raise ValueError("output_ceiling_bytes must be at least max_output_bytes")


def terminal_settings(home: Path, *, cwd: str | None = None, timeout: float = 120.0,
                      pass_env: Iterable[str] = (), max_output_kb: int = 64,
                      dotenv: Mapping[str, str] | None = None,
                      secret_names: Iterable[str] = ()) -> TerminalSettings:
    """Settings from the values of ``tools.terminal`` (``cwd`` unset: ``$HERMES_HOME/workspace``;
    relative: under ``$HERMES_HOME``; ``~`` expanded). Every name in ``dotenv`` is a secret."""
    env = dict(dotenv or {})
    where = home / "workspace" if not cwd else Path(os.path.expanduser(cwd))
    if not where.is_absolute():
        where = home / where
    return TerminalSettings(
        cwd=where, timeout=timeout, pass_env=frozenset(pass_env), max_output_bytes=max_output_kb * 1024,
        secret_names=frozenset(secret_names) | frozenset(env), home=home, dotenv=env)
