"""``hermes-gateway users export|forget PLATFORM:ID``: one person's data, for the operator.

``forget`` asks the running daemon over its control socket (``users.forget``), so the daemon stays
the only writer of state.db; without a daemon it opens state.db itself (taking the writer lock),
deletes, removes the files and VACUUMs. It asks first on a terminal (``--yes`` not to).
``export`` reads state.db read-only, beside a running daemon or not (a large export never crosses
the socket), and writes the JSON to ``--out`` (created 0600, never overwritten) or to stdout.

"Owner" (whose memory profile an export lists and a forget clears) is ``auth.owners`` in
config.yaml here; owners the daemon recorded itself are known to the daemon's ``forget``.

Exit codes: 0 done; 1 refused (the reason is printed); 78 a configuration error.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from gateway.cli.common import EX_USER, HomeOption, fail, load_home_config, postgres_store, read_state
from gateway.cli.sessions import _confirm
from gateway.config import LoadedConfig
from gateway.control import client as control_client
from gateway.errors import DaemonNotRunningError, DaemonUnreachableError
from gateway.routing.owners import Owners
from gateway.userdata import Forgetter, parse_sender, write_export
from storage import MediaStore, StateStore, StorageLockedError, Store
from storage.errors import GatewayError

__all__ = ["users_app"]

#: a forget of a hundred thousand messages takes a while; the daemon answers when it is done
_FORGET_WITHIN = 900.0

users_app = typer.Typer(help="Take out or erase one person's data (PLATFORM:ID, as telegram:123456).",
                        no_args_is_help=True, add_completion=False)

UserArgument = Annotated[str, typer.Argument(metavar="PLATFORM:ID", help="The person, as telegram:123456")]


def _fail(message: str, code: int = EX_USER) -> NoReturn:
    fail("users", message, code)


def _config(home: Path | None) -> LoadedConfig:
    return load_home_config("users", home)


def _report_lines(report: dict[str, Any]) -> list[str]:
    lines = [f"  {what}: {n}" for what, n in report.get("counts", {}).items() if what != "files"]
    lines.append(f"  media files removed: {report.get('files_removed', 0)}")
    lines.append(f"  memory profile entries removed: {report.get('profile_entries_removed', 0)}")
    return lines


async def _forget_here(config: LoadedConfig, platform: str, user_id: str) -> dict[str, Any]:
    store: Store | None = postgres_store(config.home)
    try:
        if store is None:
            store = StateStore(config.db_path)
        await store.open()
    except StorageLockedError as exc:
        raise DaemonUnreachableError(
            f"state.db is locked by process {exc.holder_pid or '?'}, but no daemon answers on its control socket, "
            "so nothing can be deleted safely. Check it with 'hermes-gateway status'.") from None
    try:
        forgetter = Forgetter(store, MediaStore(config.home / "media"), config.home)
        owner = Owners(config.settings.auth.owners).is_owner(platform, user_id)
        report = await forgetter.forget(platform, user_id, requested_by="cli", forget_memory=owner, vacuum=False)
        await store.vacuum()
        return report.as_json()
    finally:
        await store.close()


@users_app.command("forget")
def forget_user(user: UserArgument, yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask first")] = False,
                home: HomeOption = None) -> None:
    """Delete everything kept of one person (their sessions, their messages in shared ones, jobs, files)."""
    config = _config(home)
    try:
        platform, user_id = parse_sender(user)
        if not yes:
            _confirm(f"Delete every row and file of {platform}:{user_id}? This cannot be undone.", "delete")
        try:
            report = control_client.call_sync(config.home, "users.forget", {"user": f"{platform}:{user_id}"},
                                              reply_within=_FORGET_WITHIN)["report"]
        except DaemonNotRunningError:
            url = config.storage_url
            if url.backend == "sqlite" and url.path is not None and not url.path.exists():
                _fail(f"there is no state.db in {config.home} yet: nothing to delete.")
            report = asyncio.run(_forget_here(config, platform, user_id))
    except GatewayError as exc:
        _fail(str(exc))
    typer.echo(f"Deleted the data of {platform}:{user_id}:")
    for line in _report_lines(report):
        typer.echo(line)


@users_app.command("export")
def export_user(user: UserArgument, out: Annotated[Path | None, typer.Option(
        "--out", metavar="FILE", help="Write the JSON here (a new file, mode 0600); default: stdout")] = None,
                home: HomeOption = None) -> None:
    """Write everything kept of one person as JSON (what /export-my-data sends them)."""
    config = _config(home)
    try:
        platform, user_id = parse_sender(user)
    except GatewayError as exc:
        _fail(str(exc))
    url = config.storage_url
    if url.backend == "sqlite" and url.path is not None and not url.path.exists():
        _fail(f"there is no state.db in {config.home} yet: nothing to export.")
    if out is not None and out.exists():
        _fail(f"{out} exists already; name a new file.")
    owner = Owners(config.settings.auth.owners).is_owner(platform, user_id)
    from gateway.userdata.service import UserData  # here, not at the top: it loads the router's services

    profile = UserData.profile_of(config.home) if owner else None
    target = out or config.home / "tmp" / f"export-{secrets.token_hex(8)}.json"
    target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        summary = read_state(config.home, lambda c: write_export(c, target, platform, user_id, profile=profile))
        assert summary is not None
        if out is None:
            with target.open("rb") as f:
                shutil.copyfileobj(f, sys.stdout.buffer)
    except GatewayError as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}")

        if out is None:
            with contextlib.suppress(OSError):
                target.unlink()
    if out is not None:
        typer.echo(json.dumps({"file": str(out), "sessions": summary.sessions, "messages": summary.messages,
                               "scheduled_jobs": summary.jobs, "bytes": summary.bytes}), err=True)
