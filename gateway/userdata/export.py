"""/export-my-data's file: one sender's data as JSON, streamed to a file on a reader thread.

``write_export`` runs on a read connection (``Store.read``, never the event loop) inside one
read transaction, so the file is one consistent moment of state.db; it writes each message as it
reads it (``storage.userdata.iter_messages`` reads ``BATCH`` rows at a time), so a person with a
hundred thousand messages costs the same memory as one with ten.

The file (``FORMAT``)::

    {"format": "hermes-gateway/export-my-data", "version": 1,
     "sender": {"platform": ..., "user_id": ...}, "exported_at": "<ISO 8601, UTC>",
     "notes": [...],                   # what is and is not in here, in words
     "sessions": [{"id", "title", "source", "started_at", "ended_at",
                   "shared": bool,     # true: only the sender's own messages are listed
                   "messages": [{"id", "role", "timestamp", "content", "tool_name"?,
                                 "attachments"?: [{"kind", "mime", "name", "size", "sha256",
                                                   "description", "created_at"}]}]}],
     "scheduled_jobs": [{"id", "name", "schedule", "prompt", "deliver", "paused", "created_at", ...}],
     "memory": {"user_profile": [entries]} | null}
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from storage import queries, userdata

__all__ = ["FORMAT", "ExportSummary", "write_export"]

FORMAT = "hermes-gateway/export-my-data"
_NOTES = (
    "Sessions marked shared had other people in them: only your own messages are listed. Your "
    "messages in shared sessions from before the gateway recorded senders (gateway schema step 13) "
    "cannot be told apart from other people's and are not listed.",
    "Attachments are listed by their metadata; the files themselves are not in this export.",
    "memory.user_profile is the assistant's profile of its owner (USER.md): it is listed for an owner "
    "only. The assistant's own notes (MEMORY.md) are about the installation, not about a person.",
)


@dataclass(frozen=True)
class ExportSummary:
    sessions: int
    messages: int
    jobs: int
    bytes: int


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _job(job: Any) -> dict[str, Any]:
    return {"id": job.id, "name": job.name, "schedule": job.schedule, "kind": job.kind, "prompt": job.prompt,
            "deliver": job.deliver, "paused": job.paused, "chat_id": job.owner_chat_id,
            "last_run_at": _iso(job.last_run_at), "last_status": job.last_status,
            "created_at": _iso(job.created_at)}


def _sessions(conn: sqlite3.Connection, out: IO[str], platform: str, user_id: str) -> tuple[int, int]:
    n_sessions = n_messages = 0
    for session in userdata.sessions_of(conn, platform, user_id):
        only = None if session.alone else (platform, user_id)
        head = {"id": session.session_id, "title": session.title, "source": session.source,
                "started_at": _iso(session.started_at), "ended_at": _iso(session.ended_at),
                "shared": not session.alone}
        out.write(("," if n_sessions else "") + _dump(head)[:-1] + ',"messages":[')
        first = True
        for message in userdata.iter_messages(conn, session.session_id, only=only):
            message["timestamp"] = _iso(message["timestamp"])
            out.write(("" if first else ",") + _dump(message))
            first = False
            n_messages += 1
        out.write("]}")
        n_sessions += 1
    return n_sessions, n_messages


def write_export(conn: sqlite3.Connection, path: Path, platform: str, user_id: str, *,
                 profile: tuple[str, ...] | None, now: float | None = None) -> ExportSummary:
    """Write the sender's export to ``path`` (created 0600); on a read connection."""
    with queries.snapshot(conn):  # one moment of the database for the whole file
        # Created 0600 from the first byte (never readable by others, even for a moment).
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="utf-8") as out:
            head = {"format": FORMAT, "version": 1, "sender": {"platform": platform, "user_id": user_id},
                    "exported_at": _iso(time.time() if now is None else now), "notes": list(_NOTES)}
            out.write(_dump(head)[:-1] + ',"sessions":[')
            n_sessions, n_messages = _sessions(conn, out, platform, user_id)
            jobs = userdata.jobs_of(conn, platform, user_id)
            out.write('],"scheduled_jobs":' + _dump([_job(j) for j in jobs]))
            memory = None if profile is None else {"user_profile": list(profile)}
            out.write(',"memory":' + _dump(memory) + "}\n")
    return ExportSummary(n_sessions, n_messages, len(jobs), path.stat().st_size)
