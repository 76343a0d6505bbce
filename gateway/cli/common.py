"""What the command groups share: the ``--home`` option, one-line failures, quiet logs, the config."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated, NoReturn

import structlog
import typer

from gateway.config import LoadedConfig, default_home, load_config
from gateway.errors import EX_CONFIG, ConfigError

__all__ = ["EX_USER", "HomeOption", "fail", "load_home_config", "quiet_logs"]

EX_USER = 1

HomeOption = Annotated[Path | None, typer.Option(
    "--home", metavar="DIR", help="HERMES_HOME (default: $HERMES_HOME or ~/.hermes)")]


def fail(group: str, message: str, code: int = EX_USER) -> NoReturn:
    """``hermes-gateway <group>: <message>`` as one line on stderr, whatever the message carried."""
    typer.echo(f"hermes-gateway {group}: {' '.join(message.split())}", err=True)
    raise typer.Exit(code)


def quiet_logs() -> None:
    """Storage's info lines are for the daemon's log; here they would mix into
    the output (an export to stdout above all). Warnings still reach stderr."""
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.dev.ConsoleRenderer(colors=False)],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def load_home_config(group: str, home: Path | None) -> LoadedConfig:
    """The home's configuration; a bad one exits 78 (EX_CONFIG), as the daemon does."""
    quiet_logs()
    try:
        return load_config((home or default_home()).expanduser())
    except ConfigError as exc:
        fail(group, f"configuration error: {exc}", EX_CONFIG)
