"""Authorization: default deny, stable ids only, per platform.

A user is allowed when their platform user id is in ``<PLATFORM>_ALLOWED_USERS``,
``GATEWAY_ALLOWED_USERS`` or ``auth.allowed_users``, or when an allow-all
switch is set; or when they are an owner (``Owners``); or when an owner let them in
through pairing (``Pairing``, for the bot account the platform runs as). Display
names are never consulted. Messages an adapter has already authenticated (the
local HTTP API's bearer key) are not subject to platform allowlists.

Whoever is refused, a DM of theirs may be answered with a pairing code (``unknown_dm``);
a group message never is. Every refusal is one log line of ids and a reason, never
the message's text, and a sender who keeps writing fills at most a few lines a minute.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

import structlog

from adapters.base import ChatType, InboundMessage
from gateway.config import LoadedConfig
from gateway.config.models import PAIRING_PLATFORMS
from gateway.routing.owners import Owners
from gateway.routing.pairing import Pairing

log = structlog.get_logger("hermes.auth")

#: refusal lines per sender per window; the rest are counted into the next line
_LOG_BURST = 3
_LOG_WINDOW = 60.0
_LOG_SENDERS = 4096


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


class Authorizer:
    def __init__(self, config: LoadedConfig, platforms: Iterable[str], *, owners: Owners | None = None,
                 pairing: Pairing | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._rules = {p: config.platform_allowlist(p) for p in platforms}
        self._config = config
        self._owners = owners or Owners()
        self._pairing = pairing
        self._clock = clock
        #: (platform, sender) -> (window start, lines in it, lines held back)
        self._logged: OrderedDict[tuple[str, str], tuple[float, int, int]] = OrderedDict()

    def _allowlist(self, platform: str) -> tuple[frozenset[str], bool]:
        return self._rules.get(platform) or self._config.platform_allowlist(platform)

    def warn_if_closed(self) -> None:
        for platform, (ids, allow_all) in self._rules.items():
            if platform == "api-server":
                continue
            if not ids and not allow_all and not self._owners.has_any(platform):
                pairs = self.unknown_dm(platform) == "pair"
                log.warning(
                    "auth.no_allowlist",
                    platform=platform,
                    hint=f"nobody can use {platform} yet: set {platform.upper().replace('-', '_')}_ALLOWED_USERS "
                    "(or GATEWAY_ALLOWED_USERS) to the user ids that may chat"
                    + (", or approve the pairing code a DM gets with `hermes-gateway pairing approve CODE`"
                       if pairs else ""),
                )

    def check(self, msg: InboundMessage) -> Decision:
        if msg.pre_authorized:
            return Decision(True, "authenticated by adapter")
        ids, allow_all = self._allowlist(msg.platform)
        if allow_all:
            return Decision(True, "allow-all")
        if msg.user_id and msg.user_id in ids:
            return Decision(True, "allowlisted")
        if self._owners.is_owner(msg.platform, msg.user_id):
            return Decision(True, "owner")
        if self._pairing is not None and self._pairing.is_allowed(msg.platform, msg.user_id):
            return Decision(True, "paired")
        return Decision(False, "not in allowlist" if ids or self._has_someone(msg.platform)
                        else "no allowlist configured")

    def _has_someone(self, platform: str) -> bool:
        return self._owners.has_any(platform) or (self._pairing is not None and self._pairing.has_allowed(platform))

    def unknown_dm(self, platform: str) -> Literal["pair", "ignore"]:
        """What a refused DM on ``platform`` gets: ``auth.unknown_dm`` when set; otherwise a code only
        while the platform has nobody yet (no allowlist, no owner, nobody paired)."""
        if self._pairing is None or platform not in PAIRING_PLATFORMS:
            return "ignore"
        chosen = self._config.settings.auth.unknown_dm_for(platform)
        if chosen is not None:
            return chosen
        ids, allow_all = self._allowlist(platform)
        return "ignore" if ids or allow_all or self._has_someone(platform) else "pair"

    def log_refusal(self, msg: InboundMessage, decision: Decision) -> None:
        held = self._admit_line(msg.platform, msg.user_id or "")
        if held is None:
            return
        # Ids only: the content of a refused message is never logged.
        fields: dict[str, object] = {
            "platform": msg.platform,
            "user_id": msg.user_id,
            "chat_id": msg.chat_id,
            "chat_type": str(msg.chat_type),
            "reason": decision.reason,
        }
        if held:
            fields["suppressed"] = held
        if msg.chat_type is ChatType.DM:
            log.warning("auth.refused", **fields)
        else:
            log.info("auth.refused", **fields)

    def _admit_line(self, platform: str, sender: str) -> int | None:
        """None: this refusal is not logged (the sender had their lines this window); otherwise
        how many were held back since the last line."""
        now, key = self._clock(), (platform, sender)
        start, lines, held = self._logged.pop(key, (now, 0, 0))
        if now - start >= _LOG_WINDOW:
            start, lines = now, 0
        if lines >= _LOG_BURST:
            self._logged[key] = (start, lines, held + 1)
            return None
        self._logged[key] = (start, lines + 1, 0)
        while len(self._logged) > _LOG_SENDERS:
            self._logged.popitem(last=False)
        return held
