"""Who owns this gateway: the people who approve pairings and tools' questions, and may use
the owner-only commands.

Owners come from ``auth.owners`` in config.yaml ("123": that id on every platform;
"telegram:123": on one) and from state.db, where the pairing CLI records the first person
it approves on a platform that has none (``add``). The set is kept in memory so that the
check on every message is a lookup, never a read.

A recorded owner belongs to the bot account that was approved through (``account_id``): when the
same home later runs another bot on that platform, that bot's owner is not made by the first one's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable


class Owners:
    def __init__(self, configured: Iterable[str] = (), *,
                 accounts: Callable[[str], str | None] | None = None) -> None:
        """``accounts``: the bot account each platform runs as now (None: not known yet)."""
        self._configured = frozenset(o.strip() for o in configured if o.strip())
        #: platform -> bot account ("": any) -> user ids recorded in state.db (not in config.yaml)
        self._recorded: dict[str, dict[str, set[str]]] = {}
        self._accounts = accounts

    def _recorded_now(self, platform: str) -> set[str]:
        by_account = self._recorded.get(platform, {})
        account = self._accounts(platform) if self._accounts is not None else None
        if account is None:  # not connected (or no accounts known): every recorded one, as listed
            return set().union(*by_account.values()) if by_account else set()
        return by_account.get("", set()) | by_account.get(account, set())

    def is_owner(self, platform: str, user_id: str | None) -> bool:
        if not user_id:
            return False
        if user_id in self._configured or f"{platform}:{user_id}" in self._configured:
            return True
        return user_id in self._recorded_now(platform)

    def add(self, platform: str, user_id: str, account_id: str | None = None) -> None:
        """An owner recorded in state.db (loaded at start, or just made by the pairing CLI), of the
        bot account ``account_id`` (None: of any)."""
        self._recorded.setdefault(platform, {}).setdefault(account_id or "", set()).add(user_id)

    def remove(self, platform: str, user_id: str) -> None:
        for ids in self._recorded.get(platform, {}).values():
            ids.discard(user_id)

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
        return configured + sorted(self._recorded_now(platform) - set(configured))

    def has_any(self, platform: str) -> bool:
        return bool(self.of(platform))

    @property
    def configured(self) -> frozenset[str]:
        return self._configured
