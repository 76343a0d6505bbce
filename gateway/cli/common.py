"""What the command groups share: the ``--home`` option, one-line failures, quiet logs, the config."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import structlog
import typer

from gateway.config import LoadedConfig, default_home, load_config
from gateway.errors import EX_CONFIG, ConfigError
from storage import Reader, StorageURL, Store, sqlite_url

__all__ = ["EX_USER", "HomeOption", "fail", "load_home_config", "postgres_store", "quiet_logs", "read_state", "storage_url_of"]

T = TypeVar("T")

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


def storage_url_of(home: Path) -> StorageURL:
    """Where the home's state lives (``storage.url``); its state.db when the config cannot be read
    (commands that read anyway say so themselves)."""
    try:
        return load_config(home).storage_url
    except ConfigError:
        return sqlite_url(home / "state.db")


def read_state(home: Path, fn: Callable[[Any], T]) -> T | None:
    """``fn`` in one read-only transaction on the home's storage, without a daemon: state.db read
    only (None while it does not exist), or the PostgreSQL database ``storage.url`` names."""
    url = storage_url_of(home)
    if url.backend == "postgresql":
        from storage.postgres import read_once

        return read_once(url, fn)
    assert url.path is not None
    if not url.path.exists():
        return None
    reader = Reader(url.path, workers=1)
    try:
        return reader.run_sync(fn)
    finally:
        reader.close()


def postgres_store(home: Path) -> Store | None:
    """A store on the PostgreSQL database ``storage.url`` names, for a write without a local daemon
    (nodes elsewhere may be running: the database serialises what they and this command do);
    None when the home's state is a state.db, which the caller opens under its lock."""
    url = storage_url_of(home)
    if url.backend != "postgresql":
        return None
    from storage.postgres import PgStore

    return PgStore(url, max_size=2, application_name="hermes-gateway/cli")
