"""Rows the storage functions return, shared by both backends (the SQLite functions and their
PostgreSQL counterparts return these same classes)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BackgroundTask:
    id: str
    chat_session_key: str
    platform: str
    chat_id: str
    thread_id: str | None
    user_id: str | None
    reply_to: str | None
    prompt: str
    session_id: str | None
    status: str
    ledger_id: int | None
    error: str | None
    created_at: float
    finished_at: float | None

@dataclass(frozen=True)
class Exchange:
    """The session's last exchange as the model sees it."""

    question_id: int
    question: str
    #: the visible messages after the question (its answer, with the tool calls on the way)
    answer_ids: tuple[int, ...]
    #: an assistant message is among them
    answered: bool
    #: messages after the question are superseded (a /retry replaced them, or one was cut off)
    retried: bool = False

@dataclass(frozen=True)
class Undone:
    exchanges: int
    messages: int

@dataclass(frozen=True)
class PairingCode:
    id: int
    platform: str
    account_id: str
    user_id: str
    user_name: str | None
    chat_id: str
    created_at: float
    expires_at: float
    failures: int
    #: pending | approved | denied | locked | replaced
    status: str

@dataclass(frozen=True)
class AllowedUser:
    platform: str
    account_id: str
    user_id: str
    user_name: str | None
    approved_by: str | None
    approved_at: float

@dataclass(frozen=True)
class RecordedOwner:
    platform: str
    account_id: str
    user_id: str
    recorded_at: float

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
