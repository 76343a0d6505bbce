"""``hermes-gateway pairing list|approve CODE|deny CODE|revoke PLATFORM:USER``: who may talk to the bot.

While the daemon runs, every request goes over its control socket (``pairing.*``): the daemon
stays the only writer of state.db, the person approved may talk at once and is welcomed at once.
Without a daemon, ``list`` reads state.db read-only, and a change is written to state.db directly
(under the writer lock, as ``sessions rename`` does): an approval counts from the next start, and
its welcome waits in the delivery ledger until then. A code is approved for the bot account that
gave it; the first person approved on a platform without an owner becomes its owner.

Exit codes: 0 done; 1 refused (unknown, expired or locked code ...; the reason is printed);
78 a configuration error.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from gateway.cli.common import EX_USER, HomeOption, fail, load_home_config, postgres_store, read_state
from gateway.config import LoadedConfig
from gateway.config.models import PAIRING_PLATFORMS
from gateway.control import client as control_client
from gateway.errors import DaemonNotRunningError, DaemonUnreachableError
from gateway.routing.owners import Owners
from gateway.routing.pairing import PAIRING_KEY_FILE, Pairing
from storage import StateStore, StorageLockedError, Store, pairing
from storage.errors import GatewayError

__all__ = ["pairing_app"]


pairing_app = typer.Typer(
    help="Approve or refuse the pairing codes strangers' DMs were given; list and revoke who may talk.",
    no_args_is_help=True,
    add_completion=False,
)

CodeArgument = Annotated[str, typer.Argument(metavar="CODE", help="The 8-character code the person was given")]


def _fail(message: str, code: int = EX_USER) -> NoReturn:
    fail("pairing", message, code)


def _config(home: Path | None) -> LoadedConfig:
    return load_home_config("pairing", home)


def _ask(config: LoadedConfig, op: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The daemon's answer; None when no daemon runs for this home."""
    try:
        return control_client.call_sync(config.home, op, params, reply_within=30)
    except DaemonNotRunningError:
        return None
    except GatewayError as exc:
        _fail(str(exc))


def _offline_note() -> None:
    typer.echo("hermes-gateway pairing: the daemon is not running; state.db was used directly (a change "
               "counts from its next start).", err=True)


# ------------------------------------------------------------------ without a daemon


def _stored(config: LoadedConfig) -> dict[str, Any]:
    codes: list[pairing.PairingCode] = []
    users: list[pairing.AllowedUser] = []
    owners = Owners(config.settings.auth.owners)
    now = time.time()
    try:
        found = read_state(config.home, lambda c: (pairing.pending(c, now=now), pairing.allowed(c), pairing.owners(c)))
        if found is not None:
            codes, users, recorded = found
            for o in recorded:
                owners.add(o.platform, o.user_id, o.account_id)
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):  # a state.db no daemon of this version has opened yet
            raise
    from gateway.commands import pairing_json  # here, not at the top: it loads every chat command

    return pairing_json(config, owners, codes, users)


async def _offline_write(config: LoadedConfig, action: str, args: tuple[str, ...]) -> dict[str, Any]:
    store: Store | None = postgres_store(config.home)
    if store is not None:
        await store.open()
    else:
        if not config.db_path.exists():
            return {"ok": False, "message": f"No pairing code was given yet ({config.db_path} does not exist).",
                    "allowlist": 0, "owner": 0}
        store = StateStore(config.db_path)
        try:
            await store.open()
        except StorageLockedError as exc:
            who = f"process {exc.holder_pid}" if exc.holder_pid else "another process"
            raise DaemonUnreachableError(
                f"state.db is locked by {who}, but no daemon answers on its control socket, so the change "
                "cannot be made safely. Check it with 'hermes-gateway status'.") from None
    try:
        owners = Owners(config.settings.auth.owners)
        p = Pairing(store, owners, config.home / PAIRING_KEY_FILE, key=config.pairing_key)
        await p.load()
        if action == "revoke":
            allowed_rows, owner_rows = await p.revoke(*args)
            return {"allowlist": allowed_rows, "owner": owner_rows}
        by = "cli"
        outcome = await (p.approve(args[0], platform=None, by=by) if action == "approve"
                         else p.deny(args[0], platform=None, by=by))
        code = outcome.code
        if action == "approve" and outcome.ok and code is not None:
            # Delivered by the next daemon's recovery of the ledger, once its platform connects.
            from adapters.base import OutboundMessage  # here, not at the top: see _stored
            from gateway.commands import WELCOME
            from gateway.routing.delivery import record_reply

            welcome = OutboundMessage(code.platform, code.chat_id, WELCOME)
            await store.write(lambda c: record_reply(c, welcome, None, None))
        return {"ok": outcome.ok, "message": outcome.message, "welcomed": False,
                "became_owner": outcome.became_owner}
    finally:
        await store.close()


def _change(config: LoadedConfig, op: str, params: dict[str, Any], action: str, args: tuple[str, ...]) -> dict[str, Any]:
    result = _ask(config, op, params)
    if result is not None:
        return result
    try:
        result = asyncio.run(_offline_write(config, action, args))
    except GatewayError as exc:
        _fail(str(exc))
    _offline_note()
    return result


# ------------------------------------------------------------------ commands


@pairing_app.command("list")
def list_pairing(
    home: HomeOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print it as JSON, and nothing else.")] = False,
) -> None:
    """Codes waiting for approval, who was let in by pairing, config.yaml's allowlists and the owners."""
    config = _config(home)
    data = _ask(config, "pairing.list", {})
    if data is None:
        data = _stored(config)
        typer.echo("hermes-gateway pairing: the daemon is not running; read from state.db.", err=True)
    if as_json:
        typer.echo(json.dumps(data, ensure_ascii=False, indent=2))
        return
    from gateway.commands import pairing_lines  # here, not at the top: see _stored

    for line in pairing_lines(data):
        typer.echo(line)


def _settle(action: str, code: str, home: Path | None) -> None:
    config = _config(home)
    result = _change(config, f"pairing.{action}", {"code": code}, action, (code,))
    if not result.get("ok"):
        _fail(str(result.get("message")))
    typer.echo(str(result.get("message")))
    if action == "approve":
        typer.echo("They were welcomed in their DM." if result.get("welcomed")
                   else "Their welcome goes out when the daemon runs and their platform is connected.")


@pairing_app.command("approve")
def approve(code: CodeArgument, home: HomeOption = None) -> None:
    """Let the person who was given CODE talk to the bot (the first one on a platform becomes its owner)."""
    _settle("approve", code, home)


@pairing_app.command("deny")
def deny(code: CodeArgument, home: HomeOption = None) -> None:
    """Refuse CODE (the person may ask again later for a new one)."""
    _settle("deny", code, home)


@pairing_app.command("revoke")
def revoke(
    user: Annotated[str, typer.Argument(metavar="PLATFORM:USER", help="telegram:123456 (as `pairing list` shows it)")],
    home: HomeOption = None,
) -> None:
    """That user may no longer talk to the bot through pairing (nor is an owner recorded by it)."""
    platform, _, user_id = user.partition(":")
    if platform not in PAIRING_PLATFORMS or not user_id:
        _fail(f"name the user as PLATFORM:ID, PLATFORM one of {', '.join(PAIRING_PLATFORMS)} (not {user!r})")
    config = _config(home)
    result = _change(config, "pairing.revoke", {"platform": platform, "user_id": user_id}, "revoke",
                     (platform, user_id))
    if not result.get("allowlist") and not result.get("owner"):
        _fail(f"{user_id} was not let in by pairing on {platform} (config.yaml's and .env's lists are edited "
              "there).")
    typer.echo(f"Revoked {user_id} on {platform}" + (" (no longer an owner)." if result.get("owner") else "."))
