"""``hermes-gateway chat``: the terminal chat, through the running daemon.

Each line typed (or piped in) goes to the daemon over its control socket and
its answer is printed before the next line is sent; at end of input the
command exits once the last answer is in. The daemon stays the only writer of
state.db. ``--standalone`` starts the daemon in this process (terminal chat
only, under the writer lock) for when none runs. The loop is ``chat_loop``,
the in-process daemon ``standalone``; here are the command and its exit codes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from gateway.cli.chat_loop import run_chat
from gateway.cli.standalone import DaemonRunningError, quiet_logging, run_standalone
from gateway.config import default_home
from gateway.errors import EX_CONFIG, ConfigError, DaemonNotRunningError
from storage.errors import GatewayError, StorageLockedError

EX_UNAVAILABLE = 69  # sysexits.h: the service (the daemon) is not there

HomeOption = Annotated[Path | None, typer.Option(
    "--home", metavar="DIR", help="HERMES_HOME (default: $HERMES_HOME or ~/.hermes)")]


def chat(
    title: Annotated[list[str] | None, typer.Argument(
        metavar="TITLE", help="With -c: the session to continue, by title (the newest of its lineage) or id.",
        show_default=False)] = None,
    continue_last: Annotated[bool, typer.Option(
        "-c", "--continue", help="Continue the most recent terminal session (or the one named after -c).")] = False,
    resume: Annotated[str | None, typer.Option(
        "-r", "--resume", metavar="SESSION", help="Resume a session by id, unique id prefix or title.",
        show_default=False)] = None,
    standalone: Annotated[bool, typer.Option(
        "--standalone", help="No daemon running: run one in this process for this chat.")] = False,
    no_stream: Annotated[bool, typer.Option(
        "--no-stream", help="Print each answer when it is finished, not as it is written.")] = False,
    home: HomeOption = None,
) -> None:
    """Chat with the agent in this terminal (through the running daemon)."""
    root = home or default_home()
    named = " ".join(title).strip() if title else None
    if named and not continue_last:
        typer.echo("hermes-gateway chat: a session name needs -c (continue) or -r (resume).", err=True)
        raise typer.Exit(2)
    if named and resume:
        typer.echo("hermes-gateway chat: give either -c <title> or -r <id|title>, not both.", err=True)
        raise typer.Exit(2)
    ref = resume or named
    runner = run_standalone if standalone else run_chat
    if standalone:
        quiet_logging(root)
    try:
        code = asyncio.run(runner(root, resume=ref, continue_last=continue_last and not named,
                                  stream=not no_stream))
    except DaemonNotRunningError as exc:
        typer.echo(f"hermes-gateway chat: {exc}\nOr chat without a daemon: hermes-gateway chat --standalone",
                   err=True)
        raise typer.Exit(EX_UNAVAILABLE) from None
    except (StorageLockedError, DaemonRunningError) as exc:
        pid = exc.holder_pid if isinstance(exc, StorageLockedError) else exc.pid
        who = f" (process {pid})" if pid else ""
        typer.echo(f"hermes-gateway chat: a daemon already runs for {root}{who}; "
                   "run `hermes-gateway chat` without --standalone to talk to it.", err=True)
        raise typer.Exit(1) from None
    except ConfigError as exc:
        typer.echo(f"hermes-gateway chat: configuration error: {exc}", err=True)
        raise typer.Exit(EX_CONFIG) from None
    except GatewayError as exc:
        typer.echo(f"hermes-gateway chat: {exc}", err=True)
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        typer.echo("", err=True)
        raise typer.Exit(130) from None
    raise typer.Exit(code)
