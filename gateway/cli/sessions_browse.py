"""``hermes-gateway sessions browse``: pick a session in the terminal and resume it in ``chat``.

On a terminal: a picker (arrows move, typing filters on title, preview, source
and id, Enter resumes, Esc leaves). Without one (a pipe, a script): the plain
list of ``sessions list``, since there is nobody to pick.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from gateway.cli.chat import chat
from gateway.cli.common import HomeOption
from gateway.cli.picker import PickerState, pick
from gateway.cli.sessions import SourceOption, _at_least_one, _errors, _read, _reading_home
from gateway.cli.sessions_table import format_table
from storage import queries

_TITLE = "Sessions · type to filter · ↑/↓ move · Enter resumes in chat · Esc leaves"


def _haystack(row: dict[str, Any]) -> str:
    return " ".join(str(row.get(k) or "") for k in ("title", "preview", "source", "id"))


def _on_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty() and sys.stdout.isatty()


def browse(
    source: SourceOption = None,
    limit: Annotated[int, typer.Option("--limit", metavar="N", callback=_at_least_one,
                                       help="How many recent sessions to offer (at least 1)")] = 200,
    standalone: Annotated[bool, typer.Option(
        "--standalone", help="No daemon running: resume the picked session with chat --standalone.")] = False,
    home: HomeOption = None,
) -> None:
    """Pick a session (arrows, type to filter) and resume it in chat; a plain list without a terminal."""
    with _errors():
        root: Path = _reading_home(home)
        rows = _read(root, lambda conn: queries.recent_sessions(conn, limit=limit, source=source)) or []
    if not rows:
        typer.echo("No sessions found." if source is None else f"No sessions found from {source}.")
        return
    table = format_table(rows)
    if not _on_terminal():
        for line in table:
            typer.echo(line)
        return
    state = PickerState(table[2:], [_haystack(r) for r in rows])
    chosen = pick(state, title=_TITLE, header=table[0], fd=sys.stdin.fileno(), out=sys.stdout)
    if chosen is None:
        return
    session_id = str(rows[chosen]["id"])
    typer.echo(f"Resuming {session_id} …", err=True)
    chat(title=None, continue_last=False, resume=session_id, standalone=standalone, home=home)
