"""Message components and their interactions for ``FakeDiscord``: buttons on the bot's messages, a
user pressing one, and the interaction response Discord waits for.

As Discord's reference describes:

* **Components** on a message create or edit (``components``): at most 5 action rows (type 1), each
  with 1 to 5 buttons (type 2); a button has a ``style`` 1-5, a ``label`` of at most 80 characters,
  and (styles 1-4) a ``custom_id`` of 1 to 100 characters, unique within the message; a link button
  (style 5) has a ``url`` instead. Anything else is 400 ``Invalid Form Body`` (code 50035) with
  Discord's ``errors`` tree (``{"components": {"0": {"components": {"1": {"custom_id": {"_errors":
  [{"code", "message"}]}}}}}}``). ``components: []`` on an edit removes them.
* **A press** (``user_presses``) is a gateway ``INTERACTION_CREATE`` of type 3 (MESSAGE_COMPONENT) with
  an ``id`` and a ``token``, the pressed ``custom_id`` and ``component_type`` in ``data``, the whole
  message, the channel, and the presser as ``member.user`` (guild) or ``user`` (DM).
* **The response** ``POST /interactions/{id}/{token}/callback`` (no bot token needed): type 6
  (DEFERRED_UPDATE_MESSAGE), 7 (UPDATE_MESSAGE: ``data`` edits the message) or 4
  (CHANNEL_MESSAGE_WITH_SOURCE: ``data`` is a new message); 204, or 200 with ``?with_response=true``.
  A second response is 400 "Interaction has already been acknowledged." (code 40060); an unknown
  id or token, or a response after :attr:`InteractionMethods.interaction_timeout` (3 s), is 404
  "Unknown interaction" (code 10062). A press left unanswered for 3 s is marked ``failed``, as the
  Discord client then shows "This interaction failed".
"""

from __future__ import annotations

import asyncio
import datetime as dtm
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

__all__ = ["INTERACTION_TIMEOUT", "DiscordFormError", "InteractionMethods", "Press", "check_components"]

INTERACTION_TIMEOUT = 3.0
MAX_ROWS, MAX_BUTTONS, MAX_CUSTOM_ID, MAX_LABEL = 5, 5, 100, 80
JSON = "application/json"


class DiscordFormError(Exception):
    """400 Invalid Form Body (code 50035) with Discord's ``errors`` tree."""

    def __init__(self, errors: dict[str, Any]) -> None:
        super().__init__("Invalid Form Body")
        self.errors = errors

    def body(self) -> dict[str, Any]:
        return {"message": "Invalid Form Body", "code": 50035, "errors": self.errors}


def _iso_now() -> str:
    return dtm.datetime.now(dtm.UTC).isoformat()


def _error(path: list[str], code: str, message: str) -> DiscordFormError:
    tree: dict[str, Any] = {"_errors": [{"code": code, "message": message}]}
    for key in reversed(path):
        tree = {key: tree}
    return DiscordFormError(tree)


def check_components(components: Any, root: str = "components") -> list[dict[str, Any]]:
    """``components`` as Discord takes them, or ``DiscordFormError`` pointing at the first fault."""
    if not isinstance(components, list):
        raise _error([root], "LIST_TYPE_CONVERT", "Must be an array.")
    if len(components) > MAX_ROWS:
        raise _error([root], "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_ROWS} or fewer in length.")
    seen: set[str] = set()
    for r, row in enumerate(components):
        at = [root, str(r)]
        if not isinstance(row, Mapping) or row.get("type") != 1:
            raise _error([*at, "type"], "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (1,).")
        if any(isinstance(c, Mapping) and c.get("type") == 3 for c in row.get("components") or []):
            from ._discord_selects import check_select_row  # a string select: alone in its row

            check_select_row(row, at, seen)
            continue
        buttons = row.get("components")
        if not isinstance(buttons, list) or not 1 <= len(buttons) <= MAX_BUTTONS:
            raise _error([*at, "components"], "BASE_TYPE_BAD_LENGTH", f"Must be between 1 and {MAX_BUTTONS} in length.")
        for b, button in enumerate(buttons):
            here = [*at, "components", str(b)]
            if not isinstance(button, Mapping) or button.get("type") != 2:
                raise _error([*here, "type"], "UNION_TYPE_CHOICES", "Value of field \"type\" must be one of (2,).")
            style, label, custom_id = button.get("style"), button.get("label"), button.get("custom_id")
            if style not in (1, 2, 3, 4, 5):
                raise _error([*here, "style"], "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4, 5}.")
            if label is not None and (not isinstance(label, str) or len(label) > MAX_LABEL):
                raise _error([*here, "label"], "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_LABEL} or fewer in length.")
            if style == 5:
                if not isinstance(button.get("url"), str):
                    raise _error([*here, "url"], "BASE_TYPE_REQUIRED", "This field is required")
                continue
            if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= MAX_CUSTOM_ID:
                raise _error([*here, "custom_id"], "BASE_TYPE_BAD_LENGTH",
                             f"Must be between 1 and {MAX_CUSTOM_ID} in length.")
            if custom_id in seen:
                raise _error([*here, "custom_id"], "COMPONENT_CUSTOM_ID_DUPLICATED",
                             "Component custom id cannot be duplicated")
            seen.add(custom_id)
    return [dict(row) for row in components]


@dataclass
class Press:
    """One press of a button, and what became of its interaction."""

    id: str
    token: str
    channel_id: str
    message_id: str
    custom_id: str
    user_id: str
    payload: dict[str, Any]
    created: float = field(default_factory=time.monotonic)
    #: the accepted response's type (6, 7 or 4), and how long after the press it came
    response_type: int | None = None
    acked_after: float | None = None
    #: every response attempt as (type, HTTP status), accepted or not
    responses: list[tuple[Any, int]] = field(default_factory=list)
    #: unanswered for ``interaction_timeout``: the user saw "This interaction failed"
    failed: bool = False


class InteractionMethods:
    """Mixed into ``FakeDiscord`` (a ``FakeServer``): presses and the interaction callback route."""

    interaction_timeout: float = INTERACTION_TIMEOUT
    #: interaction id -> its press (set by ``FakeDiscord.__init__``)
    _press_records: dict[str, Press]

    if TYPE_CHECKING:  # provided by FakeDiscord and FakeServer
        application_id: int
        user: dict[str, Any]
        channels: dict[str, dict[str, Any]]
        _messages: dict[str, list[dict[str, Any]]]

        def snowflake(self) -> int: ...
        def _member(self) -> dict[str, Any]: ...
        def _notify(self) -> None: ...
        def _record_call(self, method: str, params: dict[str, Any], **kw: Any) -> Any: ...
        bot: dict[str, Any]
        echo_bot_messages: bool

        async def dispatch(self, event: str, data: dict[str, Any]) -> None: ...
        def _message(self, cid: str, mid: str) -> dict[str, Any]: ...
        def _store(self, msg: dict[str, Any]) -> None: ...
        def _record_sent(self, message: dict[str, Any]) -> Any: ...
        def message_payload(self, channel: dict[str, Any], author: Mapping[str, Any], content: str) -> dict[str, Any]: ...

    @property
    def presses(self) -> list[Press]:
        """Every press so far, in order."""
        return list(self._press_records.values())

    def add_interaction_routes(self, app: web.Application) -> None:
        app.router.add_post("/api/v10/interactions/{iid}/{token}/callback", self._interaction_callback)

    def find_message(self, message_id: str | int) -> dict[str, Any]:
        for messages in self._messages.values():
            for msg in messages:
                if msg["id"] == str(message_id):
                    return msg
        raise AssertionError(f"no message {message_id} in the fake Discord")

    async def user_presses(self, message_id: str | int, custom_id: str, *, user: Mapping[str, Any] | None = None,
                           stale: bool = False, extra: Mapping[str, Any] | None = None) -> Press:
        """``user`` (default: the fake's user) presses the button ``custom_id`` on message ``message_id``.

        ``stale=True``: a client still showing an older version of the message presses a button the
        message no longer has (the press is sent all the same). ``extra`` is merged into the payload."""
        msg = self.find_message(message_id)
        buttons = [c for row in msg.get("components") or [] for c in row.get("components") or []]
        if not stale and not any(b.get("custom_id") == custom_id and not b.get("disabled") for b in buttons):
            raise AssertionError(f"message {message_id} shows no button {custom_id!r}: {buttons}")
        channel = self.channels[msg["channel_id"]]
        author = dict(user or self.user)
        iid = str(self.snowflake())
        payload: dict[str, Any] = {
            "id": iid, "application_id": str(self.application_id), "type": 3, "token": f"itoken-{iid}-x",
            "version": 1, "data": {"custom_id": custom_id, "component_type": 2}, "channel_id": channel["id"],
            "channel": dict(channel), "message": dict(msg), "locale": "en-US", "app_permissions": "2248473465835073",
            "attachment_size_limit": 10 * 1024 * 1024, "entitlements": [], "authorizing_integration_owners": {},
        }
        if channel.get("guild_id"):
            payload.update({"guild_id": channel["guild_id"], "guild_locale": "en-US", "context": 0,
                            "member": {**self._member(), "user": author, "permissions": "2248473465835073",
                                       "nick": None, "avatar": None, "pending": False}})
        else:
            payload.update({"user": author, "context": 1})
        payload.update(extra or {})
        press = Press(iid, payload["token"], channel["id"], msg["id"], custom_id, str(author["id"]), payload)
        self._press_records[iid] = press
        asyncio.get_running_loop().call_later(self.interaction_timeout, self._expire, press)
        await self.dispatch("INTERACTION_CREATE", payload)
        return press

    def _expire(self, press: Press) -> None:
        if press.response_type is None:
            press.failed = True  # "This interaction failed"
            self._notify()

    async def _interaction_callback(self, request: web.Request) -> web.StreamResponse:
        iid, token = request.match_info["iid"], request.match_info["token"]
        try:
            body = await request.json()
        except ValueError:
            body = None
        body = body if isinstance(body, dict) else {}
        self._record_call("interaction_callback", {**body, "iid": iid, "token": token}, http_method="POST",
                          path=request.path, headers={})
        press = self._press_records.get(iid)
        kind = body.get("type")
        status, answer = await self._respond_to(press, token, kind, body)
        if press is not None:
            press.responses.append((kind, status))
        self._notify()
        if status == 204:
            return web.Response(status=204)
        if status == 200 and request.query.get("with_response") not in ("true", "1", "True"):
            return web.Response(status=204)
        return web.Response(status=status, body=json.dumps(answer).encode(), headers={"Content-Type": JSON})

    async def _respond_to(self, press: Press | None, token: str, kind: Any, body: dict[str, Any]) -> tuple[int, Any]:
        unknown = {"message": "Unknown interaction", "code": 10062}
        if press is None or press.token != token:
            return 404, unknown
        if press.response_type is not None:
            return 400, {"message": "Interaction has already been acknowledged.", "code": 40060}
        elapsed = time.monotonic() - press.created
        if press.failed or elapsed > self.interaction_timeout:
            return 404, unknown
        if kind not in (4, 6, 7):
            return 400, _error(["type"], "BASE_TYPE_CHOICES", "Value must be one of {4, 6, 7}.").body()
        data = body.get("data") if isinstance(body.get("data"), dict) else {}
        try:
            if "components" in data:
                data["components"] = check_components(data["components"], "data")
        except DiscordFormError as exc:
            return 400, exc.body()
        if kind == 7:
            await self._interaction_edit(press.channel_id, press.message_id, data)
        elif kind == 4:
            await self._interaction_message(press.channel_id, data)
        press.response_type, press.acked_after = kind, elapsed
        return 200, {"interaction": {"id": press.id, "type": 3, "response_message_loading": False,
                                     "response_message_ephemeral": False}}

    async def _interaction_edit(self, cid: str, mid: str, data: dict[str, Any]) -> None:
        """An UPDATE_MESSAGE interaction response: ``data`` edits the message the button is on."""
        msg = self._message(cid, mid)
        if "content" in data:
            msg["content"] = data["content"]
        if "components" in data:
            msg["components"] = data["components"]
        msg["edited_timestamp"] = _iso_now()
        self._record_sent({"method": "interaction_update", "chat_id": cid, "message_id": mid, "text": msg["content"],
                           "reply_to": None, "thread_id": None, "params": data})
        if self.echo_bot_messages:
            await self.dispatch("MESSAGE_UPDATE", msg)

    async def _interaction_message(self, cid: str, data: dict[str, Any]) -> None:
        """A CHANNEL_MESSAGE_WITH_SOURCE interaction response: ``data`` is a new message of the bot."""
        msg = self.message_payload(self.channels[cid], self.bot, str(data.get("content") or ""))
        msg["components"] = data.get("components") or []
        self._store(msg)
        self._record_sent({"method": "interaction_message", "chat_id": cid, "message_id": msg["id"],
                           "text": msg["content"], "reply_to": None, "thread_id": None, "params": data})
        if self.echo_bot_messages:
            await self.dispatch("MESSAGE_CREATE", msg)
