"""What every backend hands out about one sender's data (``storage.userdata``, ``storage.forget``).

A sender is a person on a platform: (platform, user id), as the gateway's tables name them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: what a message of a shared session is replaced by when its sender asked to be forgotten
FORGOTTEN_MARKER = "[message deleted at its sender's request]"


@dataclass(frozen=True)
class SenderSession:
    """A session a sender took part in. ``alone``: theirs alone (their DM, their own session in a
    group); else shared with other people, and only their own messages in it are theirs."""

    session_id: str
    source: str
    title: str | None
    started_at: float
    ended_at: float | None
    alone: bool


@dataclass(frozen=True)
class ForgetOutcome:
    """What one forget deleted (``counts``: what -> how many) and the files it let go."""

    request_id: int
    counts: dict[str, int]
    #: media files no longer named by the rows that went (swept after the commit if no other row names them)
    digests: tuple[str, ...] = ()
    forget_memory: bool = False


@dataclass(frozen=True)
class ForgetRequestRow:
    id: int
    platform: str
    user_id: str | None
    requested_by: str
    state: str
    forget_memory: bool
    digests: tuple[str, ...]
    report: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    finished_at: float | None = None
