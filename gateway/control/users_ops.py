"""The control socket's ``users.*`` requests (``hermes-gateway users forget``): a sender's data
through the daemon, so the daemon stays the only writer of state.db.

- ``users.forget`` ``{"user": "PLATFORM:ID"}`` -> ``{"report": {...}}``: every row of that sender
  deleted (``gateway.userdata.Forgetter``), with the same refusals as /forget-me (a turn of theirs
  running, a forget of theirs under way). The CLI asked its operator first; no second question.

Exports need no request: reading state.db is safe beside the daemon (``hermes-gateway users
export`` reads it directly, and a large export never crosses the socket).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.control.wire import Connection, Op, param
from gateway.errors import RequestError
from gateway.routing.services import Services
from gateway.userdata import parse_sender, userdata_of

__all__ = ["users_ops"]


def users_ops(services: Callable[[], Services]) -> dict[str, Op]:
    async def forget(conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(params) - {"user"})
        if unknown:
            raise RequestError(f"unknown parameter(s) for users.forget: {', '.join(unknown)}")
        platform, user_id = parse_sender(param(params, "user", str))
        s = services()
        data = userdata_of(s)
        if data is None:
            raise RequestError("this daemon runs without the user-data part")
        if (platform, user_id) in data.forgetting:
            raise RequestError(f"{platform}:{user_id}'s data is being deleted right now")
        running = await data.running_key(s, platform, user_id)
        if running is not None:
            raise RequestError(f"a turn of {platform}:{user_id} is running now ({running}); try again when it ends")
        data.forgetting.add((platform, user_id))
        try:
            report = await data.forgetter.forget(platform, user_id, requested_by="cli",
                                                 forget_memory=s.owners.is_owner(platform, user_id))
        finally:
            data.forgetting.discard((platform, user_id))
        return {"report": report.as_json()}

    return {"users.forget": forget}
