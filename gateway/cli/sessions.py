"""``hermes-gateway sessions …``: list, export, rename, delete, prune, stats (``browse``: sessions_browse).

Reads open a read-only connection of their own (no writer, no lock), so they
work beside a running daemon, and need nothing from config.yaml: a broken one
is a warning, not a refusal, so a user can still see and export the sessions
while fixing it. Writes go through the running daemon's control
socket, which keeps the daemon the only writer; with no daemon they open the
store directly, which takes the writer lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import sys
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import IO, Annotated, Any, NoReturn, TypeVar

import typer
from rich.cells import cell_len

from gateway.cli import sessions_admin
from gateway.cli.common import EX_USER, HomeOption, fail, postgres_store, quiet_logs, read_state
from gateway.cli.sessions_table import fit_cells, format_size, format_table
from gateway.config import default_home, load_config
from gateway.control import client as control_client
from gateway.errors import EX_CONFIG, ConfigError, DaemonNotRunningError, DaemonUnreachableError
from storage import GatewayError, SessionNotFoundError, StateStore, StorageLockedError, Store, queries

T = TypeVar("T")

DB_NAME = "state.db"
# Below this many sessions an export is over before a bar would be worth drawing.
PROGRESS_MIN_SESSIONS = 20

sessions_app = typer.Typer(
    help="List, browse, export, rename, delete and prune stored sessions.",
    no_args_is_help=True,
    add_completion=False,
)

SourceOption = Annotated[str | None, typer.Option(
    "--source", metavar="PLATFORM", help="Only sessions from this platform (telegram, cli, ...)")]


# ------------------------------------------------------------------ plumbing


def _fail(message: str, code: int = EX_USER) -> NoReturn:
    fail("sessions", message, code)


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """Our errors become one line on stderr and an exit code; nothing else is caught."""
    try:
        yield
    except ConfigError as exc:
        _fail(f"configuration error: {exc}", EX_CONFIG)
    except GatewayError as exc:
        _fail(str(exc))
    except BrokenPipeError:
        # The reader went away (``export - | head``): stop quietly, without
        # letting the interpreter complain about stdout on the way out.
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(EX_USER) from None
    except OSError as exc:
        _fail(f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}")




def _home(home: Path | None) -> Path:
    """The home, after checking its configuration (a bad one exits 78, as the daemon does)."""
    quiet_logs()
    return load_config(home or default_home()).home


def _reading_home(home: Path | None) -> Path:
    """The home for a read: a configuration error is a warning on stderr, the read goes on."""
    quiet_logs()
    root = (home or default_home()).expanduser()
    try:
        load_config(root)
    except ConfigError as exc:
        typer.echo(f"hermes-gateway sessions: warning: configuration error (reading anyway): "
                   f"{' '.join(str(exc).split())}", err=True)
    return root


def _read(home: Path, fn: Callable[[sqlite3.Connection], T]) -> T | None:
    """Run ``fn`` in a read-only transaction; None when there is no state.db yet."""
    return read_state(home, fn)


async def _write_async(home: Path, op: str, params: dict[str, Any],
                       direct: Callable[[Store], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    try:
        return await control_client.call(home, op, params)
    except DaemonNotRunningError:
        pass  # nobody to ask: write ourselves, under the lock
    if (pg := postgres_store(home)) is not None:
        async with pg:
            return await direct(pg)
    db = home / DB_NAME
    if not db.exists():
        raise SessionNotFoundError(f"There are no sessions yet ({db} does not exist).")
    store = StateStore(db)
    try:
        await store.open()
    except StorageLockedError as exc:
        who = f"process {exc.holder_pid}" if exc.holder_pid else "another process"
        raise DaemonUnreachableError(
            f"state.db is locked by {who}, but no daemon answers on its control socket "
            f"{control_client.socket_path(home)}, so the change cannot be made safely. If that process is a "
            "hermes-gateway daemon, check it with 'hermes-gateway status'; otherwise stop it and try again."
        ) from None
    try:
        return await direct(store)
    finally:
        await store.close()


def _write(home: Path, op: str, params: dict[str, Any],
           direct: Callable[[Store], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    return asyncio.run(_write_async(home, op, params, direct))


def _confirm(question: str, verb: str) -> None:
    """Ask on a terminal; without one (CI, cron) refuse rather than hang."""
    stdin = sys.stdin
    if stdin is None or stdin.closed or not stdin.isatty():
        _fail(f"refusing to {verb} without confirmation: stdin is not a terminal to ask on. Re-run with --yes.")
    try:
        ok = typer.confirm(question, default=False, err=True)  # stdout stays the command's output
    except typer.Abort:  # Ctrl-C or end of input at the prompt
        ok = False
    if not ok:
        _fail(f"cancelled; nothing was {verb}d.")


# ------------------------------------------------------------------ commands


def _at_least_one(value: int) -> int:
    # Not typer's min=1: that prints "[x>=1]" in the help.
    if value < 1:
        raise typer.BadParameter(f"must be at least 1, not {value}")
    return value


@sessions_app.command("list")
def list_sessions(
    source: SourceOption = None,
    limit: Annotated[int, typer.Option("--limit", metavar="N", callback=_at_least_one,
                                       help="How many sessions to show (at least 1)")] = 20,
    home: HomeOption = None,
) -> None:
    """List recent sessions, newest first."""
    with _errors():
        root = _reading_home(home)
        rows = _read(root, lambda conn: queries.recent_sessions(conn, limit=limit, source=source)) or []
    if not rows:
        typer.echo("No sessions found." if source is None else f"No sessions found from {source}.")
        return
    for line in format_table(rows):
        typer.echo(line)


def _count_sessions(conn: sqlite3.Connection, source: str | None, session_id: str | None) -> int:
    if session_id is not None:
        return 1
    return queries.count_sessions(conn, source)


@contextlib.contextmanager
def _export_sink(file: str) -> Iterator[IO[str]]:
    """stdout for '-'; otherwise a private temporary file renamed into place only
    when the export is complete, so a failed export never leaves half a file."""
    if file == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    target = Path(file).expanduser()
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:  # mkstemp: mode 0600, conversations are private
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _progress_wanted(file: str, total: int) -> bool:
    if total < PROGRESS_MIN_SESSIONS or not sys.stderr.isatty():
        return False
    return not (file == "-" and sys.stdout.isatty())  # a bar would tangle with the lines on the same screen


@sessions_app.command("export")
def export_sessions(
    file: Annotated[str, typer.Argument(metavar="FILE",
                                        help="Output file (JSONL, one session per line); '-' for stdout")],
    source: SourceOption = None,
    session_id: Annotated[str | None, typer.Option(
        "--session-id", metavar="ID", help="Only this session (id or unique prefix)")] = None,
    home: HomeOption = None,
) -> None:
    """Export sessions with all their messages as JSON lines."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    def export(conn: sqlite3.Connection) -> int:
        with queries.snapshot(conn):  # one snapshot: no session half-written, none counted twice
            sid = queries.resolve_session_id(conn, session_id) if session_id is not None else None
            total = _count_sessions(conn, source, sid)
            bar = Progress(TextColumn("exporting"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                           console=Console(stderr=True), transient=True, disable=not _progress_wanted(file, total))
            written = 0
            with _export_sink(file) as out, bar:
                task = bar.add_task("export", total=total)
                for session in queries.iter_export(conn, source=source, session_id=sid):
                    out.write(json.dumps(session, ensure_ascii=False, default=str) + "\n")
                    written += 1
                    bar.advance(task)
            return written

    with _errors():
        root = _reading_home(home)
        if file != "-" and not Path(file).expanduser().parent.is_dir():
            _fail(f"cannot write {file}: the folder {Path(file).expanduser().parent} does not exist.")
        written = _read(root, export)
        if written is None:  # no state.db yet: nothing to export, but the file is what was asked for
            if session_id is not None:
                raise SessionNotFoundError(f"No session id starts with '{session_id}' (there are no sessions yet).")
            with _export_sink(file):
                pass
            written = 0
    where = "stdout" if file == "-" else file
    typer.echo(f"Exported {written} session{'s' if written != 1 else ''} to {where}.", err=file == "-")


def _describe(session: dict[str, Any]) -> str:
    label = session.get("title") or session.get("preview") or "no messages"
    n = session.get("message_count") or 0
    return f"{session['id']} ({fit_cells(label, min(cell_len(label), 50)).rstrip()}, {n} message{'s' if n != 1 else ''})"


def _lookup(conn: sqlite3.Connection, id_or_prefix: str) -> dict[str, Any]:
    sid = queries.resolve_session_id(conn, id_or_prefix)
    rows = queries.recent_sessions(conn, limit=1, session_ids=[sid])
    if not rows:
        raise SessionNotFoundError(f"No session with id {sid}.")
    return rows[0]


@sessions_app.command("delete")
def delete_session(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="Session id or unique prefix")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation")] = False,
    home: HomeOption = None,
) -> None:
    """Delete a session and all its messages."""
    with _errors():
        root = _home(home)
        session = _read(root, lambda conn: _lookup(conn, session_id))
        if session is None:
            raise SessionNotFoundError(f"No session id starts with '{session_id}' (there are no sessions yet).")
        sid = str(session["id"])
        if not yes:
            _confirm(f"Delete session {_describe(session)}? This cannot be undone.", "delete")
        result = _write(root, "sessions.delete", {"id_or_prefix": sid},
                        lambda store: sessions_admin.delete(store, sid))
    if not result.get("deleted"):
        _fail(f"session {sid} was already gone.")
    typer.echo(f"Deleted session {sid}.")


@sessions_app.command("rename")
def rename_session(
    session_id: Annotated[str, typer.Argument(metavar="ID", help="Session id or unique prefix")],
    title: Annotated[list[str], typer.Argument(metavar="TITLE", help="The new title (quotes not needed)")],
    home: HomeOption = None,
) -> None:
    """Set or change a session's title."""
    text = " ".join(title)
    with _errors():
        root = _home(home)
        result = _write(root, "sessions.rename", {"id_or_prefix": session_id, "title": text},
                        lambda store: sessions_admin.rename(store, session_id, text))
    typer.echo(f"Session {result['session_id']} is now titled '{result['title']}'.")


@sessions_app.command("prune")
def prune_sessions(
    older_than: Annotated[float, typer.Option("--older-than", metavar="DAYS",
                                              help="Delete ended sessions older than this many days")]
    = sessions_admin.DEFAULT_PRUNE_DAYS,
    source: SourceOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation")] = False,
    home: HomeOption = None,
) -> None:
    """Delete ended sessions older than N days (active sessions are never pruned)."""
    with _errors():
        root = _home(home)
        days = sessions_admin.check_prune_age(older_than)
        plan = _read(root, lambda conn: sessions_admin.prune_plan(conn, days, source))
        scope = f"ended sessions older than {days:g} day{'' if days == 1 else 's'}" + (f" from {source}" if source else "")
        if plan is None or not plan.delete:
            typer.echo(f"No {scope} can go; nothing to prune." if plan and plan.skipped
                       else f"No {scope}; nothing to prune.")
            for line in sessions_admin.describe_skipped(sessions_admin.skipped_rows(plan.skipped if plan else ())):
                typer.echo(line)
            return
        if not yes:
            kept = f" ({len(plan.skipped)} more kept: later sessions continue from them)" if plan.skipped else ""
            _confirm(f"Delete {len(plan.delete)} {scope}{kept}? This cannot be undone.", "prune")
        result = _write(root, "sessions.prune", {"older_than_days": days, "source": source},
                        lambda store: sessions_admin.prune(store, days, source))
    n = int(result.get("deleted", 0))
    typer.echo(f"Pruned {n} session{'s' if n != 1 else ''}.")
    for line in sessions_admin.describe_skipped(list(result.get("skipped") or [])):
        typer.echo(line)


@sessions_app.command("stats")
def session_stats(home: HomeOption = None) -> None:
    """Totals, sessions per source, database size."""
    with _errors():
        root = _reading_home(home)
        db = root / DB_NAME
        data = _read(root, lambda conn: queries.stats(conn, db_path=db)) or {
            "total_sessions": 0, "total_messages": 0, "by_source": {}, "db_size_bytes": 0,
        }
    typer.echo(f"Total sessions: {data['total_sessions']}")
    typer.echo(f"Total messages: {data['total_messages']}")
    for src, count in data["by_source"].items():
        typer.echo(f"{src}: {count} session{'s' if count != 1 else ''}")
    typer.echo(f"Database size: {format_size(int(data['db_size_bytes']))}")
