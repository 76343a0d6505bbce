"""Context compression: summarise the middle of a long session and continue in a new one.

The head (first messages) and a tail of roughly ``tail_tokens`` stay verbatim;
the middle is summarised by the auxiliary model. The tail is bounded by the
compression threshold too, so that on a small context window a split leaves
the session at no more than half the threshold and the next turns fit.

The session splits in one transaction: the old one ends with reason
``compression``, the new one points back to it through ``parent_session_id``,
takes the lineage title (``X #2``) and a freshly built system prompt, and the
chat's key is re-pointed to it (by an operation the gateway supplies). A
cancel or a crash therefore leaves either the old session, live and whole, or
the new one, bound to the chat. The old transcript is left untouched, so
nothing said is ever lost; that is also why a kept message too large for the
new session (a megabyte answer) is not copied whole: its copy is cut and
points back at the old session, which holds the one whole copy.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from storage import new_session_id, ops, queries

from .errors import CompressionError
from .llm import ModelClient, Usage

log = structlog.get_logger("hermes.compression")

SUMMARY_PREFIX = "[Summary of the earlier part of this conversation, written when it was compressed]"

SUMMARY_INSTRUCTIONS = (
    "You compress a conversation between a user and an AI assistant so the assistant can continue it. "
    "Summarise the transcript you are given. Keep: the user's goals and requests, decisions made, facts "
    "discovered (names, numbers, paths, settings), questions resolved, and work still pending. Use short "
    "sections 'Resolved', 'Pending', 'Key facts'. Write in the third person, under 500 words, no preamble."
)

#: the most the summary may cost (the max_tokens of the summary call), reserved when planning a split
SUMMARY_MAX_TOKENS = 1200

#: re-points a chat's session key at a session, inside the caller's write transaction:
#: ``(connection, session_key, session_id)``. The gateway's session index supplies it.
RebindOp = Callable[[sqlite3.Connection, str, str], None]

# Per message: the role and framing cost a few tokens beyond the text.
_MESSAGE_OVERHEAD = 4
_CHARS_PER_TOKEN = 4
# A kept message may always keep this many tokens, however small the keep budget.
_MIN_KEPT_TOKENS = 500


#: what one image costs a model, about (1568 x 1176 pixels at ~750 pixels a token)
IMAGE_TOKENS = 2500


def estimate_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """A provider-independent estimate: ~4 characters per token, plus a little per message.

    An image part counts as ``IMAGE_TOKENS``, not as the length of its base64 text.
    """
    chars = images = 0
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "image_url":
                    images += 1
                elif isinstance(part, dict) and isinstance(part.get("text"), str):
                    chars += len(part["text"])
                else:
                    chars += len(json.dumps(part))
        elif content:
            chars += len(json.dumps(content))
        if m.get("tool_calls"):
            chars += len(json.dumps(m["tool_calls"]))
    return chars // _CHARS_PER_TOKEN + _MESSAGE_OVERHEAD * len(messages) + images * IMAGE_TOKENS


@dataclass(frozen=True)
class Plan:
    head: list[dict[str, Any]]
    middle: list[dict[str, Any]]
    tail: list[dict[str, Any]]


def keep_budget(compression_at: int, system_prompt: str) -> int:
    """Tokens that the head and tail of a split may keep between them.

    After a split the session (prompt + head + summary + tail) is at most half
    the compression threshold, so it has room to grow before the next split.
    """
    system = estimate_tokens([{"role": "system", "content": system_prompt}])
    return max(compression_at // 2 - system - SUMMARY_MAX_TOKENS, 0)


def kept_message_chars(keep_tokens: int) -> int:
    """The most characters of one message that a split copies into the new session: a quarter of
    what the head and tail may keep between them, so one huge message cannot fill the new session."""
    return max(keep_tokens // 4, _MIN_KEPT_TOKENS) * _CHARS_PER_TOKEN


def clip_kept(message: dict[str, Any], max_chars: int, old_id: str) -> dict[str, Any]:
    """``message`` as the new session keeps it: text past ``max_chars`` left out, saying where it is."""
    content = message.get("content")
    if not isinstance(content, str) or len(content) <= max_chars:
        return message
    note = (f"[{len(content) - max_chars} more characters of this message were left out when the session "
            f"was compressed; the whole message is in session {old_id}.]")
    return {**message, "content": f"{content[:max_chars]}\n\n{note}"}


def plan_split(history: Sequence[dict[str, Any]], *, head_messages: int, tail_tokens: int,
               keep_tokens: int | None = None) -> Plan:
    """Head / middle / tail of ``history``; no boundary falls between tool calls and their results.

    The head is always kept (it holds the task). The tail takes roughly
    ``tail_tokens``, but no more than ``keep_tokens`` less the head, when given;
    it always holds at least the last message.
    """
    n = len(history)
    head_end = min(head_messages, n)
    while head_end < n and history[head_end].get("role") == "tool":
        head_end += 1  # a tool result belongs with the call before it
    budget = tail_tokens
    if keep_tokens is not None:
        budget = max(min(tail_tokens, keep_tokens - estimate_tokens(history[:head_end])), 0)
    tail_start = n
    while tail_start > head_end:
        cost = estimate_tokens([history[tail_start - 1]])
        if cost > budget and tail_start < n:
            break
        budget -= cost
        tail_start -= 1
    while head_end < tail_start < n and history[tail_start].get("role") == "tool":
        tail_start -= 1  # the tail takes the call its first results answer, never orphaned results
    return Plan(list(history[:head_end]), list(history[head_end:tail_start]), list(history[tail_start:]))


def recent_window(messages: Sequence[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    """The latest messages that fit in ``budget`` tokens, not starting with a result cut off from its call."""
    start, left = len(messages), budget
    while start > 0:
        cost = estimate_tokens([messages[start - 1]])
        if cost > left:
            break
        left -= cost
        start -= 1
    while start < len(messages) and messages[start].get("role") == "tool":
        start += 1
    return list(messages[start:])


def transcript_for_summary(messages: Sequence[Mapping[str, Any]], *, per_message: int = 2000) -> str:
    lines: list[str] = []
    for m in messages:
        role = str(m.get("role"))
        content = m.get("content")
        text = content if isinstance(content, str) else json.dumps(content) if content else ""
        if m.get("tool_calls"):
            names = ", ".join(str((c.get("function") or {}).get("name")) for c in m["tool_calls"])
            text = f"{text} [called tools: {names}]".strip()
        if role == "tool":
            role = f"tool result ({m.get('name') or 'tool'})"
        if text.startswith(SUMMARY_PREFIX):
            role = "earlier summary"
        lines.append(f"{role}: {text[:per_message]}")
    return "\n".join(lines)


async def summarise(client: ModelClient, middle: Sequence[Mapping[str, Any]], *,
                    model: str | None) -> tuple[str, Usage]:
    """The summary of ``middle`` and what the call cost."""
    result = await client.chat(
        [
            {"role": "system", "content": SUMMARY_INSTRUCTIONS},
            {"role": "user", "content": transcript_for_summary(middle)},
        ],
        model=model,
        max_tokens=SUMMARY_MAX_TOKENS,
    )
    text = (result.content or "").strip()
    if not text:
        raise ValueError("the summary model returned an empty summary")
    return text, result.usage


@dataclass(frozen=True)
class SplitResult:
    old_session_id: str
    new_session_id: str
    title: str | None
    summarised: int
    kept: int


@dataclass(frozen=True)
class CompressOutcome:
    """What ``/compress`` (or the agent's own compression) did: the reply to show, and the split if any."""

    reply: str
    split: SplitResult | None = None


def split_session_op(
    old_id: str,
    plan: Plan,
    summary: str,
    system_prompt: str,
    title: str | None,
    *,
    usage: Mapping[str, Any] | None = None,
    rebind: tuple[RebindOp, str] | None = None,
    max_chars: int | None = None,
) -> Callable[[sqlite3.Connection], SplitResult]:
    """One transaction: new session (head + summary + tail, new prompt, lineage title), old one ended.

    ``usage`` (the summary call) is booked on the old session; ``rebind`` (the
    operation and the chat's key) moves the chat to the new session in the
    same transaction, so no crash or cancel can leave it on the ended one. A
    kept message longer than ``max_chars`` is copied cut (``clip_kept``).
    """

    def op(conn: sqlite3.Connection) -> SplitResult:
        row = queries.get_session(conn, old_id)
        if row is None:
            raise CompressionError(f"Session {old_id} was deleted before it could be compressed.")
        if row["ended_at"] is not None:
            # Ended meanwhile (/new, a reset, another compression): its chat has moved on already.
            raise CompressionError(f"Session {old_id} has already ended, so it was not compressed; "
                                   "send /compress again in the chat's current session.")
        if usage:
            ops.record_usage(conn, old_id, **usage)
        # A terminal session stays in the terminal's 6-hex id form (the reference's), a chat's in 8.
        new_id = new_session_id("terminal" if row["source"] == "cli" else "gateway")
        now = time.time()
        ops.create_session(conn, new_id, row["source"], model=row["model"], user_id=row["user_id"], parent_session_id=old_id,
                           system_prompt=system_prompt, started_at=now)
        summary_msg = {"role": "user", "content": f"{SUMMARY_PREFIX}\n{summary}"}
        for message in [*plan.head, summary_msg, *plan.tail]:
            if max_chars is not None:
                message = clip_kept(message, max_chars, old_id)
            cols = ops.message_columns(message)
            cols.pop("timestamp", None)
            ops.append_message(conn, new_id, **cols)
        ops.end_session(conn, old_id, "compression", at=now)
        final_title = None
        if title:
            final_title = ops.next_title_in_lineage(conn, title)
            ops.set_session_title(conn, new_id, final_title)
        if rebind is not None:
            rebind_op, session_key = rebind
            rebind_op(conn, session_key, new_id)
        return SplitResult(old_id, new_id, final_title, len(plan.middle), len(plan.head) + len(plan.tail))

    return op
