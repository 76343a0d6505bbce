"""Authorization: default deny, stable ids only, per platform.

A user is allowed when their platform user id is in ``<PLATFORM>_ALLOWED_USERS``,
``GATEWAY_ALLOWED_USERS`` or ``auth.allowed_users``, or when an allow-all
switch is set. Display names are never consulted. Messages an adapter has
already authenticated (the local HTTP API's bearer key) are not subject to
platform allowlists.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import structlog

from adapters.base import ChatType, InboundMessage
from gateway.config import LoadedConfig

log = structlog.get_logger("hermes.auth")


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


class Authorizer:
    def __init__(self, config: LoadedConfig, platforms: Iterable[str]) -> None:
        self._rules = {p: config.platform_allowlist(p) for p in platforms}
        self._config = config

    def warn_if_closed(self) -> None:
        for platform, (ids, allow_all) in self._rules.items():
            if platform == "api-server":
                continue
            if not ids and not allow_all:
                log.warning(
                    "auth.no_allowlist",
                    platform=platform,
                    hint=f"nobody can use {platform}: set {platform.upper().replace('-', '_')}_ALLOWED_USERS "
                    "(or GATEWAY_ALLOWED_USERS) to the user ids that may chat",
                )

    def check(self, msg: InboundMessage) -> Decision:
        if msg.pre_authorized:
            return Decision(True, "authenticated by adapter")
        ids, allow_all = self._rules.get(msg.platform) or self._config.platform_allowlist(msg.platform)
        if allow_all:
            return Decision(True, "allow-all")
        if msg.user_id and msg.user_id in ids:
            return Decision(True, "allowlisted")
        return Decision(False, "not in allowlist" if ids else "no allowlist configured")

    def log_refusal(self, msg: InboundMessage, decision: Decision) -> None:
        # Ids only: the content of a refused message is never logged.
        fields = {
            "platform": msg.platform,
            "user_id": msg.user_id,
            "chat_id": msg.chat_id,
            "chat_type": str(msg.chat_type),
            "reason": decision.reason,
        }
        if msg.chat_type is ChatType.DM:
            log.warning("auth.refused", **fields)
        else:
            log.info("auth.refused", **fields)
