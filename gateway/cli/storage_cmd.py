"""``hermes-gateway storage copy --from URL --to URL``: move the gateway's data between backends.

URLs are written as ``storage.url`` is: ``sqlite:///abs/path/state.db`` or
``postgresql://user:password@host/db``. The copy itself is ``storage.copy`` (all its SQL lives
there); this module reads the options, draws the progress (a bar on a terminal, plain lines in a
pipe or under CI) and prints the verification. A URL is only ever shown without its password.

Exit codes: 0 copied and every count matches; 1 refused or stopped (the reason is printed; the
same command resumes a stopped copy); 2 a malformed URL or option; 3 copied, but a count differs.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from gateway.cli.common import EX_USER, fail, quiet_logs
from storage import StorageURL, StorageURLError, parse_storage_url
from storage.errors import StorageError

if TYPE_CHECKING:  # storage.copy is imported when the command runs: it pulls in psycopg
    from rich.progress import TaskID

    from storage.copy import CopyEvent, CopyResult

__all__ = ["storage_app"]

EX_USAGE = 2
EX_MISMATCH = 3

storage_app = typer.Typer(help="Move the gateway's data between SQLite (state.db) and PostgreSQL.",
                          no_args_is_help=True, add_completion=False)

_URL_HELP = "sqlite:///absolute/path/state.db or postgresql://user:password@host/db"


def _fail(message: str, code: int = EX_USER) -> NoReturn:
    fail("storage", message, code)


def _url(raw: str, which: str) -> StorageURL:
    try:
        url = parse_storage_url(raw, default_path=Path("state.db"))
    except StorageURLError as exc:
        _fail(f"--{which}: {exc}", EX_USAGE)
    if not raw.strip():
        _fail(f"--{which} needs a URL ({_URL_HELP})", EX_USAGE)
    return url


class _Plain:
    """One line per event: what a log file or CI shows."""

    def __call__(self, event: CopyEvent) -> None:
        if event.kind == "note":
            typer.echo(f"note: {event.message}")
        elif event.kind == "batch":
            typer.echo(f"{event.table}: {event.copied}/{event.total} rows")
        elif event.kind == "finish":
            typer.echo(event.message)

    def __enter__(self) -> _Plain:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class _Bar:
    """A rich progress bar per table on a terminal."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(),
                                  TimeRemainingColumn())
        self._tasks: dict[str, TaskID] = {}

    def __call__(self, event: CopyEvent) -> None:
        if event.kind == "note" or event.kind == "finish":
            self._progress.console.print(event.message if event.kind == "finish" else f"note: {event.message}")
        elif event.kind in ("start", "batch"):
            task = self._tasks.get(event.table)
            if task is None:
                task = self._tasks[event.table] = self._progress.add_task(event.table, total=event.total)
            self._progress.update(task, completed=event.copied, total=max(event.total, event.copied))

    def __enter__(self) -> _Bar:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()


def _bar_wanted() -> bool:
    return sys.stdout.isatty() and os.environ.get("CI", "").lower() in ("", "0", "false")


def _print_counts(result: CopyResult) -> None:
    width = max([len(c.table) for c in result.counts] + [5])
    typer.echo(f"{'table':<{width}}  {'source':>10}  {'target':>10}")
    for c in result.counts:
        mark = "" if c.equal else ("  NOT COPIED: no such table in the target" if not c.copied else "  DIFFERS")
        typer.echo(f"{c.table:<{width}}  {c.source:>10}  {c.target:>10}{mark}")


@storage_app.command("copy")
def copy(
    source: Annotated[str, typer.Option(
        "--from", metavar="URL", envvar="HERMES_COPY_FROM", show_envvar=False,
        help=f"Where the data is: {_URL_HELP} (or $HERMES_COPY_FROM, to keep a password off the command line)")],
    target: Annotated[str, typer.Option(
        "--to", metavar="URL", envvar="HERMES_COPY_TO", show_envvar=False,
        help="Where it goes, created or migrated as the gateway would (or $HERMES_COPY_TO)")],
    force: Annotated[bool, typer.Option(
        "--force", help="Copy into a target that holds other data: its rows are deleted first")] = False,
    batch_size: Annotated[int | None, typer.Option(
        "--batch-size", metavar="ROWS", help="Rows per transaction (default: 5000)")] = None,
) -> None:
    """Copy every session, message and gateway table from one database to another, resumably."""
    from storage.copy import BATCH_ROWS, copy_storage

    quiet_logs()
    batch_size = BATCH_ROWS if batch_size is None else batch_size
    if batch_size < 1:
        _fail("--batch-size must be at least 1", EX_USAGE)
    src, dst = _url(source, "from"), _url(target, "to")
    typer.echo(f"copying {src.redacted} -> {dst.redacted}")
    view: _Plain | _Bar = _Bar() if _bar_wanted() else _Plain()
    try:
        with view:
            result = asyncio.run(copy_storage(src, dst, force=force, batch_rows=batch_size, on_event=view))
    except StorageError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        _fail("interrupted; run the same command again to resume where it stopped", 130)
    _print_counts(result)
    if not result.verified:
        _fail("the row counts differ (above); the target is not a complete copy", EX_MISMATCH)
    copied = f"{result.rows_copied} rows copied" + (" (resumed)" if result.resumed else "")
    typer.echo(f"done: {copied}; every table has the same number of rows on both sides")
