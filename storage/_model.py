"""What every storage backend shares: the rows of the gateway's tables as the
store hands them out, the auto-prune settings, and which messages are stored."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class AutoPruneSettings:
    """``sessions.*`` in config.yaml; off by default (history powers search)."""

    auto_prune: bool = False
    retention_days: float = 90
    vacuum_after_prune: bool = True
    min_interval_hours: float = 24


def is_scaffolding(message: Mapping[str, Any]) -> bool:
    """An assistant message with nothing in it: no text, no tool calls, no reasoning of any kind.

    Such messages are placeholders of an unfinished step; they are never persisted.
    """
    if message.get("role") != "assistant":
        return False
    content = message.get("content")
    has_text = bool(content.strip()) if isinstance(content, str) else bool(content)
    payload = ("tool_calls", "reasoning", "reasoning_content", "reasoning_details",
               "codex_reasoning_items", "codex_message_items")
    return not (has_text or any(message.get(key) for key in payload))


# ------------------------------------------------------- the gateway's tables


@dataclass(frozen=True)
class IndexEntry:
    """A routing-index entry and what is known of the session it points at."""

    session_id: str
    #: when the key was (re)bound to the session
    updated_at: float
    #: False when the session was deleted since (the entry is stale)
    session_exists: bool
    ended_at: float | None
    last_message_at: float | None


@dataclass(frozen=True)
class ChatOwner:
    """A chat asking which sessions are its own: its session key, platform and the user writing."""

    session_key: str
    platform: str
    user_id: str | None


@dataclass(frozen=True)
class SessionTitle:
    """A titled session, as title lookups see it."""

    id: str
    title: str
    started_at: float


@dataclass(frozen=True)
class ParkedMessage:
    """A message taken from its platform and not yet answered (``inbound.park``): what a crash
    or a stop left, taken again at the next start."""

    id: int
    session_key: str
    payload: str
    parked_at: float


@dataclass(frozen=True)
class SeenMessage:
    """What is known of an inbound message seen before (its dedupe record).

    For a message that became a turn: the session and row id of the user's
    message as stored, and the reply once it was stored (a retried request is
    answered with it). All None for a message answered otherwise.
    """

    seen_at: float
    session_id: str | None
    question_id: int | None
    answer: str | None


@dataclass(frozen=True)
class LedgerFile:
    """A file that goes with a reply, as the delivery ledger keeps it (its bytes: the media store)."""

    sha256: str
    name: str
    mime: str
    kind: str
    size: int


@dataclass(frozen=True)
class PendingReply:
    """An outbox row not yet marked sent: what a crash may have cut off."""

    id: int
    platform: str
    chat_id: str
    thread_id: str | None
    reply_to: str | None
    text: str
    created_at: float
    #: the platform messages a streamed answer had shown (empty for a reply sent whole)
    message_ids: tuple[str, ...] = ()
    #: True for a stream whose answer was never stored (the turn was cut off): its messages show a fragment
    interrupted: bool = False
    #: the files that go with it, and how many of them the platform already took; None: not even
    #: its text is known to have gone out (a reply with files notes 0 once its text is out)
    files: tuple[LedgerFile, ...] = ()
    files_sent: int | None = None


@dataclass(frozen=True)
class HandoffRow:
    id: int
    session_id: str
    source_key: str
    source_platform: str
    target_platform: str
    state: str
    error: str | None
    target_chat_id: str | None
    target_thread_id: str | None
    target_key: str | None


@dataclass(frozen=True)
class HomeChannelRow:
    """A platform's home channel as stored; ``chat_type`` is the adapter's ChatType value."""

    platform: str
    chat_id: str
    thread_id: str | None
    chat_type: str | None
    set_by: str | None
    updated_at: float


@dataclass(frozen=True)
class CronJobRow:
    """A scheduled job as stored (``gateway_cron_jobs``); ``toolsets`` None: the platform's."""

    id: str
    name: str
    prompt: str
    schedule: str
    kind: str
    deliver: str
    toolsets: tuple[str, ...] | None
    catch_up: str
    owner_platform: str
    owner_chat_id: str
    owner_thread_id: str | None
    owner_user_id: str | None
    owner_session_key: str
    owner_chat_type: str
    paused: bool
    next_due: float | None
    run_requested: bool
    last_run_at: float | None
    last_status: str | None
    failures: int
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class CronRunRow:
    """One run of a job (``gateway_cron_runs``); ``due_at`` None: started by "run now"."""

    id: int
    job_id: str
    due_at: float | None
    started_at: float
    finished_at: float | None
    status: str
    attempt: int
    missed: int
    session_id: str | None
    ledger_id: int | None
    error: str | None


@dataclass(frozen=True)
class AttachmentRow:
    """A file that came with (or was sent in) a message: one row of ``gateway_attachments``.

    The bytes are the media store's file named ``sha256``; ``kind`` is the adapters'
    ``AttachmentKind`` value; ``name`` is the sender's, shown and never a path."""

    id: int
    message_id: int
    session_id: str
    kind: str
    mime: str | None
    name: str | None
    size: int
    sha256: str
    #: what the model was told it shows or says (a description, a transcript), once known
    description: str | None
    created_at: float


# ------------------------------------------------------------------- pruning


@dataclass(frozen=True)
class PruneSkip:
    """An ended session old enough to prune, kept because a kept session continues from it.

    Deleting it would cut the compression lineage of a conversation still in use
    (``/resume <title>`` finds the newest of a lineage; ``X #3`` numbers after it).
    """

    session_id: str
    title: str | None
    #: the kept session that continues it (its child, or a later descendant)
    continued_by: str


@dataclass(frozen=True)
class PrunePlan:
    """What a prune deletes (oldest first) and what it keeps for the lineage."""

    delete: tuple[str, ...]
    skipped: tuple[PruneSkip, ...]


@dataclass(frozen=True)
class PruneResult:
    deleted: int
    skipped: tuple[PruneSkip, ...]
