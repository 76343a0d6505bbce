"""The chat methods of ``FakeSlack``: posting, editing, deleting and streaming bot messages, with
Slack's per-method rate limits, and a record of what each message showed.

Follows Slack's method reference: ``chat.startStream`` needs ``thread_ts`` ("streamed messages should
always be replies to a user request") and, outside DMs, ``recipient_user_id`` and
``recipient_team_id``; ``chat.appendStream`` appends ``markdown_text`` (at most 12,000 characters a
call) to a message in the streaming state, ``chat.stopStream`` appends its optional final text and
ends that state; ``chat.update`` refuses a message that is still streaming
(``streaming_state_conflict``) and takes ``text`` (mrkdwn) or ``markdown_text``, not both.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from ._slack_interactions import check_blocks

__all__ = ["BOT_ID", "BOT_USER", "HARD_LIMIT", "MARKDOWN_LIMIT", "STREAM_METHODS", "TIER_LIMITS", "ChatMethods"]

BOT_USER = "U0BOT0001"
BOT_ID = "B0BOT0001"
#: Slack's readable limit is 4000 characters; it truncates above 40,000.
HARD_LIMIT = 40_000
#: ``markdown_text`` of one call: "Limit this field to 12,000 characters".
MARKDOWN_LIMIT = 12_000
#: The methods a workspace without chat streaming does not have.
STREAM_METHODS = frozenset({"chat.startStream", "chat.appendStream", "chat.stopStream"})
#: Calls per minute of Slack's tiers (Tier 2: 20+, Tier 3: 50+, Tier 4: 100+), per method per workspace.
TIER_LIMITS: dict[str, int] = {"chat.update": 50, "chat.delete": 50, "chat.appendStream": 100,
                               "chat.startStream": 20, "chat.stopStream": 20}


class ChatMethods:
    """Mixed into ``FakeSlack`` (a ``FakeServer``): the ``_m_chat_*`` handlers its Web API route calls."""

    messages: dict[tuple[str, str], dict[str, Any]]
    history: list[dict[str, Any]]
    rate_limits: dict[str, int]
    rate_window: float
    _accepted: dict[str, deque[float]]

    if TYPE_CHECKING:  # provided by FakeSlack and FakeServer
        def next_ts(self) -> str: ...
        def _record_sent(self, message: dict[str, Any]) -> dict[str, Any]: ...
        def _notify(self) -> None: ...

    def _rate_limited(self, method: str) -> int | None:
        """Whole seconds to wait when ``method`` is past its tier now; else None (and the call counts)."""
        limit = self.rate_limits.get(method)
        if limit is None:
            return None
        now = time.monotonic()
        window = self._accepted.setdefault(method, deque())
        while window and window[0] <= now - self.rate_window:
            window.popleft()
        if len(window) >= limit:
            return max(1, math.ceil(window[0] + self.rate_window - now))
        window.append(now)
        return None

    @staticmethod
    def _blocks(params: dict[str, Any]) -> tuple[list[dict[str, Any]] | None, dict[str, Any] | None]:
        """The call's blocks (None: none given), or the ``invalid_blocks`` answer."""
        if params.get("blocks") is None:
            return None, None
        problem = check_blocks(params["blocks"])
        if problem is not None:
            return None, {"ok": False, "error": "invalid_blocks", "errors": [problem],
                          "response_metadata": {"messages": [f"[ERROR] {problem}"]}}
        blocks = params["blocks"]
        return (json.loads(blocks) if isinstance(blocks, str) else list(blocks)), None

    def _m_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, text = params.get("channel"), params.get("text")
        if not isinstance(channel, str) or not channel:
            return {"ok": False, "error": "channel_not_found"}
        blocks, refused = self._blocks(params)
        if refused is not None:
            return refused
        if blocks and not text:
            text = ""  # blocks need no fallback text (Slack only warns)
        elif not isinstance(text, str) or not text:
            return {"ok": False, "error": "no_text"}
        if len(text) > HARD_LIMIT:
            return {"ok": False, "error": "msg_too_long"}
        ts = self.next_ts()
        thread_ts = params.get("thread_ts") or None
        message = {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "text": text, "ts": ts}
        if thread_ts:
            message["thread_ts"] = thread_ts
        if blocks is not None:
            message["blocks"] = blocks
        self.messages[(channel, ts)] = dict(message)
        self._record_sent({"method": "chat.postMessage", "chat_id": channel, "text": text, "thread_id": thread_ts,
                           "reply_to": None, "message_id": ts, "ts": ts})
        self._seen("chat.postMessage", channel, message)
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _m_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(params.get("channel")), str(params.get("ts"))
        text, markdown = params.get("text"), params.get("markdown_text")
        message = self.messages.get((channel, ts))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if message.get("user") != BOT_USER:
            return {"ok": False, "error": "cant_update_message"}
        if message.get("streaming"):
            return {"ok": False, "error": "streaming_state_conflict"}
        if markdown and text:
            return {"ok": False, "error": "markdown_text_conflict"}
        blocks, refused = self._blocks(params)
        if refused is not None:
            return refused
        body = markdown or text or (message["text"] if blocks else None)
        if not isinstance(body, str) or not body:
            return {"ok": False, "error": "no_text"}
        if blocks is not None:
            message["blocks"] = blocks  # given: replaced ([] removes them); not given: kept
        if len(body) > (MARKDOWN_LIMIT if markdown else HARD_LIMIT):
            return {"ok": False, "error": "msg_too_long"}
        message["text"] = body
        message["markdown"] = bool(markdown)
        self._record_sent({"method": "chat.update", "chat_id": channel, "text": body,
                           "thread_id": message.get("thread_ts"), "reply_to": None, "message_id": ts, "ts": ts})
        self._seen("chat.update", channel, message)
        return {"ok": True, "channel": channel, "ts": ts, "text": body}

    def _m_chat_delete(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, ts = str(params.get("channel")), str(params.get("ts"))
        message = self.messages.get((channel, ts))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if message.get("user") != BOT_USER:
            return {"ok": False, "error": "cant_delete_message"}
        del self.messages[(channel, ts)]
        self._seen("chat.delete", channel, message, deleted=True)
        return {"ok": True, "channel": channel, "ts": ts}

    # ------------------------------------------------------- chat streaming

    def _m_chat_startStream(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, thread_ts = params.get("channel"), params.get("thread_ts")
        text = params.get("markdown_text") or ""
        if not isinstance(channel, str) or not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not isinstance(thread_ts, str) or not thread_ts:
            return {"ok": False, "error": "invalid_arguments"}  # "streamed messages should always be replies"
        if not channel.startswith("D"):  # "Required when streaming to channels"
            if not params.get("recipient_user_id"):
                return {"ok": False, "error": "missing_recipient_user_id"}
            if not params.get("recipient_team_id"):
                return {"ok": False, "error": "missing_recipient_team_id"}
        if not isinstance(text, str) or len(text) > MARKDOWN_LIMIT:
            return {"ok": False, "error": "msg_too_long"}
        ts = self.next_ts()
        message = {"type": "message", "user": BOT_USER, "bot_id": BOT_ID, "text": text, "ts": ts,
                   "thread_ts": thread_ts, "streaming": True, "markdown": True}
        self.messages[(channel, ts)] = message
        self._record_sent({"method": "chat.startStream", "chat_id": channel, "text": text, "thread_id": thread_ts,
                           "reply_to": None, "message_id": ts, "ts": ts})
        self._seen("chat.startStream", channel, message)
        return {"ok": True, "channel": channel, "ts": ts}

    def _streaming_message(self, params: dict[str, Any]) -> tuple[str, dict[str, Any]] | dict[str, Any]:
        channel, ts = str(params.get("channel")), str(params.get("ts"))
        message = self.messages.get((channel, ts))
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        if not message.get("streaming"):
            return {"ok": False, "error": "message_not_in_streaming_state"}
        return channel, message

    def _m_chat_appendStream(self, params: dict[str, Any]) -> dict[str, Any]:
        found = self._streaming_message(params)
        if isinstance(found, dict):
            return found
        channel, message = found
        text = params.get("markdown_text")
        if not isinstance(text, str) or not text:
            return {"ok": False, "error": "no_text"}
        if len(text) > MARKDOWN_LIMIT:
            return {"ok": False, "error": "msg_too_long"}
        message["text"] += text
        self._record_sent({"method": "chat.appendStream", "chat_id": channel, "text": message["text"],
                           "thread_id": message.get("thread_ts"), "reply_to": None, "message_id": message["ts"],
                           "ts": message["ts"], "appended": text})
        self._seen("chat.appendStream", channel, message)
        return {"ok": True, "channel": channel, "ts": message["ts"]}

    def _m_chat_stopStream(self, params: dict[str, Any]) -> dict[str, Any]:
        found = self._streaming_message(params)
        if isinstance(found, dict):
            return found
        channel, message = found
        text = params.get("markdown_text") or ""
        if not isinstance(text, str) or len(text) > MARKDOWN_LIMIT:
            return {"ok": False, "error": "msg_too_long"}
        message["text"] += text
        message["streaming"] = False
        if params.get("blocks"):
            message["blocks"] = params["blocks"]  # "rendered at the bottom of the finalized message"
        self._record_sent({"method": "chat.stopStream", "chat_id": channel, "text": message["text"],
                           "thread_id": message.get("thread_ts"), "reply_to": None, "message_id": message["ts"],
                           "ts": message["ts"], "appended": text})
        self._seen("chat.stopStream", channel, message)
        shown = {k: v for k, v in message.items() if k not in ("streaming", "markdown")}
        return {"ok": True, "channel": channel, "ts": message["ts"], "message": {**shown, "subtype": "bot_message"}}

    def _seen(self, method: str, channel: str, message: dict[str, Any], *, deleted: bool = False) -> None:
        self.history.append({"method": method, "chat_id": channel, "ts": message["ts"], "text": message["text"],
                             "streaming": bool(message.get("streaming")), "deleted": deleted})
        self._notify()

    def versions(self, channel: str, ts: str) -> list[str]:
        """Every text message ``ts`` showed, in order (an append or an edit that changed nothing visible
        still counts once: Slack repaints it)."""
        return [h["text"] for h in self.history if h["chat_id"] == channel and h["ts"] == ts and not h["deleted"]]

