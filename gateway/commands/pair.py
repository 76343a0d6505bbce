"""/pair: an owner approves or refuses the pairing code a stranger's DM was given, and lists who is
waiting and who was let in. What ``hermes-gateway pairing`` shows and the welcome an approved
person gets are here too, so the chat, the control socket and the offline CLI say the same.
"""

from __future__ import annotations

import time
from typing import Any

import structlog

from adapters.base import OutboundMessage, SendKind
from gateway.config import LoadedConfig
from gateway.config.models import PAIRING_PLATFORMS
from gateway.routing.commands import Command, CommandContext, CommandRegistry
from gateway.routing.delivery import record_reply
from gateway.routing.owners import Owners
from gateway.routing.pairing import PairingOutcome
from gateway.routing.services import Services
from storage import pairing

__all__ = ["WELCOME", "pairing_json", "pairing_lines", "register_pair_commands", "welcome"]

log = structlog.get_logger("hermes.pairing")

WELCOME = "✅ You're in: the owner of this bot approved you. Just write to me."
_USAGE = "Usage: /pair list · /pair approve CODE · /pair deny CODE · /pair revoke USER_ID"


def pairing_json(config: LoadedConfig, owners: Owners, codes: list[pairing.PairingCode],
                 users: list[pairing.AllowedUser], *, now: float | None = None,
                 platforms: tuple[str, ...] = PAIRING_PLATFORMS) -> dict[str, Any]:
    """Who is waiting, who was let in (state.db), config.yaml's lists and the owners, by platform."""
    now = time.time() if now is None else now
    out: dict[str, Any] = {"pending": [], "paired": [], "config": {}, "owners": {}}
    for c in codes:
        if c.platform in platforms:
            out["pending"].append({"platform": c.platform, "account": c.account_id, "user_id": c.user_id,
                                   "user_name": c.user_name, "asked_seconds_ago": int(now - c.created_at),
                                   "expires_in_seconds": int(c.expires_at - now), "wrong_attempts": c.failures})
    for u in users:
        if u.platform in platforms:
            out["paired"].append({"platform": u.platform, "account": u.account_id, "user_id": u.user_id,
                                  "user_name": u.user_name, "approved_by": u.approved_by,
                                  "approved_at": u.approved_at})
    for p in platforms:
        ids, allow_all = config.platform_allowlist(p)
        out["config"][p] = {"allowed_users": sorted(ids), "allow_all": allow_all}
        out["owners"][p] = owners.of(p)
    return out


def pairing_lines(data: dict[str, Any]) -> list[str]:
    """``pairing_json`` for a person to read."""
    lines: list[str] = []
    pending = data["pending"]
    lines.append(f"Waiting for approval ({len(pending)}):" if pending else "No pairing code is waiting.")
    for c in pending:
        name = f" {c['user_name']}" if c.get("user_name") else ""
        lines.append(f"  {c['platform']}: {c['user_id']}{name} · asked {c['asked_seconds_ago'] // 60} min ago, "
                     f"expires in {max(0, c['expires_in_seconds']) // 60} min")
    paired = data["paired"]
    lines.append(f"Let in by pairing ({len(paired)}):" if paired else "Nobody was let in by pairing.")
    for u in paired:
        name = f" {u['user_name']}" if u.get("user_name") else ""
        by = f" by {u['approved_by']}" if u.get("approved_by") else ""
        lines.append(f"  {u['platform']}: {u['user_id']}{name} (bot account {u['account']}, approved{by})")
    lines.append("config.yaml / .env allowlists (these always apply):")
    for p, rule in data["config"].items():
        shown = "everyone (allow-all)" if rule["allow_all"] else ", ".join(rule["allowed_users"]) or "none"
        lines.append(f"  {p}: {shown}")
    lines.append("Owners:")
    for p, ids in data["owners"].items():
        lines.append(f"  {p}: {', '.join(ids) or 'none yet'}")
    return lines


async def welcome(services: Services, outcome: PairingOutcome) -> bool:
    """The approved person's welcome, in the DM their code came from, through the delivery ledger."""
    code = outcome.code
    if not outcome.ok or code is None:
        return False
    out = OutboundMessage(code.platform, code.chat_id, WELCOME, kind=SendKind.REPLY)
    if code.platform not in services.adapters:
        # Not served by this run: the ledger keeps it for the first run that serves the platform.
        await services.store.write(lambda c: record_reply(c, out, None, None))
        return False
    try:
        return await services.delivery.send(out)
    except Exception as exc:  # approved all the same; they will see it when they write
        log.warning("pairing.welcome_failed", platform=code.platform, user_id=code.user_id,
                    error_type=type(exc).__name__)
        return False


async def _pair(ctx: CommandContext) -> str:
    msg, services = ctx.message, ctx.services
    if services.pairing is None:
        return "Pairing is not available in this gateway."
    if not services.owners.is_owner(msg.platform, msg.user_id):
        log.warning("auth.refused", platform=msg.platform, user_id=msg.user_id, reason="/pair by a non-owner")
        return "⚠️ Only an owner of this bot can use /pair (auth.owners in config.yaml names them)."
    verb, _, rest = ctx.args.partition(" ")
    verb, rest = verb.lower(), rest.strip()
    if verb in ("", "list"):
        codes, users = await services.pairing.snapshot()
        data = pairing_json(services.config, services.owners, codes, users, platforms=(msg.platform,))
        return "\n".join(pairing_lines(data))
    if verb in ("approve", "deny"):
        if not rest:
            return f"Name the code: /pair {verb} CODE"
        act = services.pairing.approve if verb == "approve" else services.pairing.deny
        outcome = await act(rest, platform=msg.platform, by=f"{msg.platform}:{msg.user_id}")
        if outcome.ok and verb == "approve":
            await welcome(services, outcome)
        return ("✅ " if outcome.ok else "⚠️ ") + outcome.message
    if verb == "revoke":
        if not rest:
            return "Name the user id: /pair revoke USER_ID"
        allowed_rows, owner_rows = await services.pairing.revoke(msg.platform, rest)
        if not allowed_rows and not owner_rows:
            return f"{rest} was not let in by pairing on {msg.platform} (config.yaml's lists are edited there)."
        return f"✅ {rest} may no longer talk to this bot on {msg.platform}" + \
            (" and is no longer an owner." if owner_rows else ".")
    return _USAGE


def register_pair_commands(registry: CommandRegistry) -> None:
    registry.register(Command("pair", "approve or refuse a stranger's pairing code (owners)", _pair,
                              immediate=True, usage="list|approve CODE|deny CODE|revoke USER"))
