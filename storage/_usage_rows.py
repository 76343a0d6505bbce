"""The rows of token usage both backends return (``storage.sqlite.usage``, ``storage.postgres.usage``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UsageRow:
    """What the sessions of one day, source and model used."""

    day: str  # YYYY-MM-DD, local time
    source: str
    model: str | None
    sessions: int
    api_calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    reasoning_tokens: int


@dataclass(frozen=True)
class UsageTotals:
    """What some sessions used: the sums of the reference's token columns (``/usage``, ``usage`` CLI)."""

    sessions: int
    api_calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    #: the summed cost of the calls whose model had prices (None: no call had)
    cost_usd: float | None


@dataclass(frozen=True)
class UserUsage:
    """One person's sessions (by platform and user id; user None: sessions no chat's user started)."""

    platform: str
    user_id: str | None
    totals: UsageTotals
