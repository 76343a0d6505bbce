"""Who owns this gateway: the people who approve pairings and tools' questions, and may use
the owner-only commands.

Owners come from ``auth.owners`` in config.yaml ("123": that id on every platform;
"telegram:123": on one) and from state.db, where the pairing CLI records the first person
it approves on a platform that has none (``add``). The set is kept in memory so that the
check on every message is a lookup, never a read.
"""

from __future__ import annotations

from collections.abc import Iterable


class Owners:
    def __init__(self, configured: Iterable[str] = ()) -> None:
        self._configured = frozenset(o.strip() for o in configured if o.strip())
        #: platform -> user ids recorded in state.db (not in config.yaml)
        self._recorded: dict[str, set[str]] = {}

    def is_owner(self, platform: str, user_id: str | None) -> bool:
        if not user_id:
            return False
        if user_id in self._configured or f"{platform}:{user_id}" in self._configured:
            return True
        return user_id in self._recorded.get(platform, ())

    def add(self, platform: str, user_id: str) -> None:
        """An owner recorded in state.db (loaded at start, or just made by the pairing CLI)."""
        self._recorded.setdefault(platform, set()).add(user_id)

    def remove(self, platform: str, user_id: str) -> None:
        self._recorded.get(platform, set()).discard(user_id)

    def configured_for(self, platform: str) -> list[str]:
        """``auth.owners`` entries that apply on ``platform`` (bare ids and this platform's)."""
        out = []
        for entry in sorted(self._configured):
            scope, _, uid = entry.rpartition(":")
            if not scope or scope == platform:
                out.append(uid)
        return out

    def of(self, platform: str) -> list[str]:
        """Every owner id of ``platform``: config.yaml's first, then state.db's."""
        configured = self.configured_for(platform)
        return configured + sorted(self._recorded.get(platform, set()) - set(configured))

    def has_any(self, platform: str) -> bool:
        return bool(self.of(platform))

    @property
    def configured(self) -> frozenset[str]:
        return self._configured
