"""``hermes-gateway``: the command line."""

from __future__ import annotations

import asyncio
import os
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from pathlib import Path
from typing import Annotated

import typer

from gateway.cli._help import PlainHelpGroup
from gateway.cli.chat import chat as chat_command
from gateway.cli.cron import cron_app
from gateway.cli.insights import insights as insights_command
from gateway.cli.ops import register as register_ops_commands
from gateway.cli.pairing import pairing_app
from gateway.cli.service import service_app
from gateway.cli.sessions import sessions_app
from gateway.cli.sessions_browse import browse as browse_sessions
from gateway.cli.storage_cmd import storage_app
from gateway.cli.tools import tools as tools_command
from gateway.cli.usage import usage_command
from gateway.cli.users import users_app
from gateway.config import default_home, load_config
from gateway.errors import EX_CONFIG, ConfigError
from gateway.logs import configure_logging
from storage.errors import StorageLockedError

app = typer.Typer(help="hermes-gateway: chat with your own AI agent over Telegram, Discord, Slack and HTTP.",
                  no_args_is_help=True, add_completion=False, cls=PlainHelpGroup)

HomeOption = Annotated[Path | None, typer.Option(
    "--home", metavar="DIR", help="HERMES_HOME (default: $HERMES_HOME or ~/.hermes)")]


def _version() -> str:
    try:
        return package_version("hermes-gateway")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _print_version(wanted: bool) -> None:
    if wanted:
        typer.echo(f"hermes-gateway {_version()}")
        raise typer.Exit()


@app.callback()
def _everywhere(
    home: Annotated[Path | None, typer.Option(
        "--home", metavar="DIR",
        help="HERMES_HOME for the command that follows (default: $HERMES_HOME or ~/.hermes); "
             "a --home after the command wins.")] = None,
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_print_version, help="Print the version and exit.")] = False,
) -> None:
    # Through the environment, as HERMES_HOME itself would: every command (and the systemd
    # unit that `service install` writes) already takes its default home from there.
    if home is not None:
        os.environ["HERMES_HOME"] = str(home.expanduser().absolute())


@app.command()
def run(home: HomeOption = None) -> None:
    """Run the gateway daemon in the foreground."""
    from gateway.daemon.runner import Gateway

    try:
        config = load_config(home or default_home())
    except ConfigError as exc:
        typer.echo(f"hermes-gateway: configuration error: {exc}", err=True)
        raise typer.Exit(EX_CONFIG) from None
    configure_logging(config.settings.logging.level, config.settings.logging.format)
    gateway = Gateway(config)
    try:
        asyncio.run(gateway.run())
    except ConfigError as exc:
        typer.echo(f"hermes-gateway: configuration error: {exc}", err=True)
        raise typer.Exit(EX_CONFIG) from None
    except StorageLockedError as exc:
        typer.echo(f"hermes-gateway: {exc}", err=True)
        raise typer.Exit(EX_CONFIG) from None
    except KeyboardInterrupt:
        pass
    if gateway.restart_requested:  # /restart: drained and stopped like SIGTERM's stop, now back
        from gateway.daemon.reexec import come_back

        come_back()


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(_version())


sessions_app.command("browse")(browse_sessions)
app.add_typer(sessions_app, name="sessions")
app.add_typer(service_app, name="service")
app.add_typer(cron_app, name="cron")
app.add_typer(users_app, name="users")
app.add_typer(pairing_app, name="pairing")
app.add_typer(storage_app, name="storage")
register_ops_commands(app)
app.command("chat")(chat_command)
app.command("insights")(insights_command)
app.command("usage")(usage_command)
app.command("tools")(tools_command)


def main() -> None:
    app(prog_name="hermes-gateway")

