"""Block Kit blocks and button presses for ``FakeSlack``.

As Slack's reference describes:

* **Blocks** on ``chat.postMessage`` / ``chat.update``: at most 50 blocks; a ``section`` has a text
  object of at most 3000 characters; an ``actions`` block has 1 to 25 elements; a button's ``text``
  is plain_text of at most 75 characters, its ``value`` at most 2000, its ``action_id`` at most 255
  and unique within the message, its ``style`` ``primary`` or ``danger`` if any. Anything else is
  ``invalid_blocks`` (with ``errors`` and ``response_metadata.messages`` saying where). A message
  with blocks needs no ``text``; ``chat.update`` replaces the blocks when it is given ``blocks``
  (``[]`` removes them) and keeps them otherwise.
* **A press** (``user_presses``) is a ``block_actions`` payload: the presser (``user``), the
  ``container`` (``message_ts``, ``channel_id``, ``thread_ts`` for a message in a thread), the
  ``channel``, the whole ``message``, ``trigger_id``, ``response_url`` and one ``actions`` entry
  (``action_id``, ``block_id``, ``value``, ``text``, ``style``, ``type: button``, ``action_ts``).
  Over Socket Mode it is an ``interactive`` envelope (the client acks its ``envelope_id``:
  ``acks``); in HTTP mode a form POST ``payload=<json>`` to ``events_url``, signed like events.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import aiohttp

__all__ = ["InteractionMethods", "check_action_id", "check_blocks", "sign"]

MAX_BLOCKS, MAX_ELEMENTS, MAX_SECTION, MAX_BUTTON_TEXT, MAX_VALUE, MAX_ID = 50, 25, 3000, 75, 2000, 255
_press_ids = itertools.count(1)


def sign(body: bytes, secret: str, ts: str | int | None = None) -> dict[str, str]:
    """The headers Slack sends with a request body signed with ``secret``."""
    stamp = str(int(time.time()) if ts is None else ts)
    base = b"v0:" + stamp.encode() + b":" + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json", "X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest}"}


def check_blocks(blocks: Any) -> str | None:
    """None when Slack takes ``blocks``; else the ``errors`` entry of ``invalid_blocks``."""
    if isinstance(blocks, str):
        try:
            blocks = json.loads(blocks)
        except ValueError:
            return "invalid JSON [json-pointer:/blocks]"
    if not isinstance(blocks, list):
        return "must be an array [json-pointer:/blocks]"
    if len(blocks) > MAX_BLOCKS:
        return f"must provide no more than {MAX_BLOCKS} items [json-pointer:/blocks]"
    action_ids: set[str] = set()
    for i, block in enumerate(blocks):
        at = f"/blocks/{i}"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            return f"missing required field: type [json-pointer:{at}]"
        if block["type"] == "section":
            text = block.get("text")
            if not isinstance(text, dict) or not isinstance(text.get("text"), str) or not text["text"]:
                return f"must provide a text or fields [json-pointer:{at}/text]"
            if len(text["text"]) > MAX_SECTION:
                return f"must be less than {MAX_SECTION + 1} characters [json-pointer:{at}/text/text]"
        elif block["type"] == "actions":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= MAX_ELEMENTS:
                return f"must provide 1 to {MAX_ELEMENTS} items [json-pointer:{at}/elements]"
            for j, element in enumerate(elements):
                if isinstance(element, dict) and element.get("type") == "static_select":
                    from ._slack_selects import check_static_select

                    problem = check_static_select(element, f"{at}/elements/{j}", action_ids)
                else:
                    problem = _check_button(element, f"{at}/elements/{j}", action_ids)
                if problem is not None:
                    return problem
    return None


def _check_button(element: Any, at: str, action_ids: set[str]) -> str | None:
    if not isinstance(element, dict) or element.get("type") != "button":
        return None if isinstance(element, dict) else f"must be an object [json-pointer:{at}]"
    text = element.get("text")
    if not isinstance(text, dict) or text.get("type") != "plain_text" or not isinstance(text.get("text"), str):
        return f"must be a plain_text object [json-pointer:{at}/text]"
    if not 1 <= len(text["text"]) <= MAX_BUTTON_TEXT:
        return f"must be less than {MAX_BUTTON_TEXT + 1} characters [json-pointer:{at}/text/text]"
    value = element.get("value")
    if value is not None and (not isinstance(value, str) or len(value) > MAX_VALUE):
        return f"must be less than {MAX_VALUE + 1} characters [json-pointer:{at}/value]"
    if element.get("style") not in (None, "primary", "danger"):
        return f"must be one of primary, danger [json-pointer:{at}/style]"
    return check_action_id(element, at, action_ids)


def check_action_id(element: dict[str, Any], at: str, action_ids: set[str]) -> str | None:
    """An interactive element's ``action_id``: within its length, and unique in its message."""
    action_id = element.get("action_id")
    if action_id is not None:
        if not isinstance(action_id, str) or not 1 <= len(action_id) <= MAX_ID:
            return f"must be less than {MAX_ID + 1} characters [json-pointer:{at}/action_id]"
        if action_id in action_ids:
            return f"action_id already exists [json-pointer:{at}/action_id]"
        action_ids.add(action_id)
    return None


class InteractionMethods:
    """Mixed into ``FakeSlack``: ``user_presses`` and the record of presses."""

    messages: dict[tuple[str, str], dict[str, Any]]
    presses: list[dict[str, Any]]

    if TYPE_CHECKING:  # provided by FakeSlack
        user: str
        events_url: str | None
        signing_secret: str
        open_sockets: list[Any]
        _http: aiohttp.ClientSession | None
        _ids: itertools.count[int]

        def endpoint(self) -> str: ...
        def _live_socket(self) -> Any: ...

    async def _send_interactive(self, payload: Any) -> str | None:
        """An ``interactive`` envelope over the newest live socket (its id), or None without one."""
        if not any(not s.silent for s in self.open_sockets):
            return None
        envelope_id = f"env-{next(self._ids)}"
        await self._live_socket().ws.send_json({"envelope_id": envelope_id, "type": "interactive", "payload": payload,
                                                "accepts_response_payload": False})
        return envelope_id

    async def _post_form(self, raw: bytes, secret: str | None = None) -> int:
        """A signed form POST to ``events_url`` (``secret``: default the right one); its HTTP status."""
        if self.events_url is None or self._http is None:
            raise AssertionError("no socket and no events_url: nowhere to send it")
        headers = sign(raw, self.signing_secret if secret is None else secret)
        headers["Content-Type"] = "application/x-www-form-urlencoded"
        async with self._http.post(self.events_url, data=raw, headers=headers,
                                   timeout=aiohttp.ClientTimeout(total=10)) as resp:
            await resp.read()
            return resp.status

    def press_payload(self, channel: str, ts: str, action_id: str, *, user: str | None = None,
                      stale: bool = False, value: str | None = None) -> dict[str, Any]:
        """The ``block_actions`` payload of ``user`` pressing ``action_id`` on message ``(channel, ts)``.
        ``stale=True``: a client still showing an older version presses a button the message lost (whose
        ``value`` was the one given)."""
        message = self.messages.get((channel, ts))
        if message is None:
            raise AssertionError(f"no message {channel}/{ts} in the fake Slack")
        found = [(block.get("block_id"), element) for block in message.get("blocks") or []
                 for element in block.get("elements") or [] if element.get("action_id") == action_id]
        if not found and not stale:
            raise AssertionError(f"message {channel}/{ts} shows no button {action_id!r}")
        block_id, button = found[0] if found else ("gone", {"action_id": action_id, "type": "button",
                                                            "text": {"type": "plain_text", "text": "?"}})
        if value is not None:
            button = {**button, "value": value}
        n = next(_press_ids)
        presser = user or self.user
        container: dict[str, Any] = {"type": "message", "message_ts": ts, "channel_id": channel, "is_ephemeral": False}
        if message.get("thread_ts"):
            container["thread_ts"] = message["thread_ts"]
        action = {"action_id": action_id, "block_id": block_id, "text": button.get("text"), "type": "button",
                  "action_ts": f"{time.time():.6f}"}
        for key in ("value", "style"):
            if key in button:
                action[key] = button[key]
        return {
            "type": "block_actions", "user": {"id": presser, "username": f"user-{presser.lower()}",
                                              "name": f"user-{presser.lower()}", "team_id": "T0TEAM001"},
            "api_app_id": "A0APP0001", "token": "verification-token-unused", "container": container,
            "trigger_id": f"trig.press.{n}", "team": {"id": "T0TEAM001", "domain": "fake"}, "enterprise": None,
            "is_enterprise_install": False, "channel": {"id": channel, "name": f"chan-{channel.lower()}"},
            "message": dict(message), "state": {"values": {}},
            "response_url": f"{self.endpoint()}/response/press-{n}", "actions": [action],
        }

    async def user_presses(self, channel: str, ts: str, action_id: str, *, user: str | None = None,
                           stale: bool = False, value: str | None = None, secret: str | None = None) -> dict[str, Any]:
        """``user`` presses ``action_id`` on message ``(channel, ts)``; the press is delivered over the live
        socket (``envelope_id``) or POSTed to ``events_url`` signed with ``secret`` (``status``). Returns the
        record: ``payload``, ``sent_at`` (``time.monotonic()``) and ``envelope_id`` or ``status``."""
        return await self.deliver_press(self.press_payload(channel, ts, action_id, user=user, stale=stale,
                                                           value=value), secret=secret)

    async def deliver_press(self, payload: Any, *, secret: str | None = None) -> dict[str, Any]:
        """Deliver any ``interactive`` payload (a malformed one too), like ``user_presses``."""
        record: dict[str, Any] = {"payload": payload, "sent_at": time.monotonic()}
        self.presses.append(record)
        envelope_id = await self._send_interactive(payload)
        if envelope_id is not None:
            record["envelope_id"] = envelope_id
        else:
            raw = urlencode({"payload": json.dumps(payload)}).encode()
            record["status"] = await self._post_form(raw, secret)
        return record
