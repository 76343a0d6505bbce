"""The control socket's ``pairing.*`` requests (``hermes-gateway pairing …``), through the daemon:

- ``pairing.list`` -> ``gateway.commands.pairing_json`` (waiting codes, paired users, config.yaml's
  lists, owners)
- ``pairing.approve`` / ``pairing.deny`` ``{"code"}`` -> ``{"ok", "message", "welcomed"}``: any platform's
  code, for the bot account its platform runs as now; the first person approved on a platform
  without an owner becomes its owner; an approved person is welcomed through the delivery ledger
- ``pairing.revoke`` ``{"platform", "user_id"}`` -> ``{"allowlist", "owner"}`` (rows removed)

A refused approval (unknown, expired, locked code ...) is ``ok: false`` with the reason, never
an error of the request. The code is never logged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.commands import pairing_json, welcome
from gateway.config.models import PAIRING_PLATFORMS
from gateway.control.wire import Connection, Op, param
from gateway.errors import RequestError
from gateway.routing.pairing import Pairing
from gateway.routing.services import Services

__all__ = ["pairing_ops"]


def _pairing(services: Services) -> Pairing:
    if services.pairing is None:
        raise RequestError("pairing is not available in this daemon")
    return services.pairing


def _only(params: dict[str, Any], op: str, allowed: set[str]) -> None:
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise RequestError(f"unknown parameter(s) for {op}: {', '.join(unknown)}")


def pairing_ops(services: Callable[[], Services]) -> dict[str, Op]:
    """The ``pairing.*`` ops; ``services`` gives the daemon's (it refuses while the daemon starts)."""

    async def list_all(conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        _only(params, "pairing.list", set())
        s = services()
        codes, users = await _pairing(s).snapshot()
        return pairing_json(s.config, s.owners, codes, users)

    def settle(approve: bool) -> Op:
        name = "pairing.approve" if approve else "pairing.deny"

        async def op(conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
            _only(params, name, {"code"})
            s = services()
            p = _pairing(s)
            code = param(params, "code", str)
            by = f"cli:{conn.user}"
            outcome = await (p.approve(code, platform=None, by=by) if approve else p.deny(code, platform=None, by=by))
            welcomed = approve and outcome.ok and await welcome(s, outcome)
            return {"ok": outcome.ok, "message": outcome.message, "welcomed": welcomed,
                    "became_owner": outcome.became_owner}

        return op

    async def revoke(conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        _only(params, "pairing.revoke", {"platform", "user_id"})
        platform = param(params, "platform", str)
        if platform not in PAIRING_PLATFORMS:
            raise RequestError(f"unknown platform {platform!r}: pairing is for {', '.join(PAIRING_PLATFORMS)}")
        allowed_rows, owner_rows = await _pairing(services()).revoke(platform, param(params, "user_id", str))
        return {"allowlist": allowed_rows, "owner": owner_rows}

    return {"pairing.list": list_all, "pairing.approve": settle(True), "pairing.deny": settle(False),
            "pairing.revoke": revoke}
