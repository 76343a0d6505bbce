"""/forget-me's confirmation: one pending request per sender, answered within ``CONFIRM_SECONDS``.

A request is answered by ``/forget-me confirm`` from the same sender, or by a press of its
button (which arrives as ``/approve <id>`` / ``/deny <id>`` from the presser, as an approval's
does: ``adapters.approvals``). Only the sender who asked may answer; a newer request replaces
an older one. Pending requests live in memory: a restart forgets them, and the person asks again
(nothing was deleted yet).
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Literal

from gateway.errors import RequestError

__all__ = ["CONFIRM_PREFIX", "CONFIRM_SECONDS", "Confirmations", "PendingForget", "Taken", "parse_sender"]

#: how long a request waits for its confirmation
CONFIRM_SECONDS = 120.0
#: the ids of these requests (an approval's button payload carries them; approvals' ids never start so)
CONFIRM_PREFIX = "forget"


@dataclass
class PendingForget:
    id: str
    platform: str
    user_id: str
    chat_id: str
    thread_id: str | None
    deadline: float
    #: the message showing the question with its buttons (edited into its outcome), if any
    message_id: str | None = None


@dataclass(frozen=True)
class Taken:
    status: Literal["ok", "none", "expired", "not_yours"]
    pending: PendingForget | None = None


class Confirmations:
    def __init__(self, *, seconds: float = CONFIRM_SECONDS) -> None:
        self._seconds = seconds
        #: (platform, user id) -> their request
        self._by_sender: dict[tuple[str, str], PendingForget] = {}

    def open(self, platform: str, user_id: str, chat_id: str, thread_id: str | None) -> PendingForget:
        pending = PendingForget(f"{CONFIRM_PREFIX}{secrets.token_hex(8)}", platform, user_id, chat_id, thread_id,
                                time.monotonic() + self._seconds)
        self._by_sender[(platform, user_id)] = pending
        return pending

    def put_back(self, pending: PendingForget) -> None:
        """A request taken but not carried out (refused for now): it waits again, until its deadline."""
        self._by_sender.setdefault((pending.platform, pending.user_id), pending)

    def get(self, request_id: str) -> PendingForget | None:
        return next((p for p in self._by_sender.values() if p.id == request_id), None)

    def take(self, platform: str, user_id: str | None, request_id: str | None = None) -> Taken:
        """The sender's request, removed: by id (a button), or the sender's own (typed)."""
        if request_id is not None:
            pending = self.get(request_id)
            if pending is None:
                return Taken("none")
            if (pending.platform, pending.user_id) != (platform, user_id):
                return Taken("not_yours", pending)
        else:
            found = self._by_sender.get((platform, user_id or ""))
            if found is None:
                return Taken("none")
            pending = found
        del self._by_sender[(pending.platform, pending.user_id)]
        if time.monotonic() > pending.deadline:
            return Taken("expired", pending)
        return Taken("ok", pending)


def parse_sender(text: str) -> tuple[str, str]:
    """``PLATFORM:ID`` (as ``telegram:123``) -> (platform, user id); a clear error for anything else."""
    platform, sep, user_id = text.strip().partition(":")
    if not sep or not platform or not user_id.strip():
        raise RequestError(f"a sender is PLATFORM:ID (as telegram:123456), not {text!r}")
    return platform.lower(), user_id.strip()
