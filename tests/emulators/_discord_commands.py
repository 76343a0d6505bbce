"""Application (slash) commands for ``FakeDiscord``: registering them and a person invoking one.

As Discord's reference describes:

* **Bulk overwrite** ``PUT /applications/{application_id}/commands`` (global) and
  ``PUT /applications/{application_id}/guilds/{guild_id}/commands`` (one guild): the body is the whole
  list (JSON array); what is not in it is deleted. Each command: ``name`` 1-32 characters, lowercase,
  of letters, digits, ``-`` and ``_`` (else 50035 ``APPLICATION_COMMAND_INVALID_NAME``); a CHAT_INPUT
  command (``type`` 1, the default) needs a ``description`` of 1-100 characters (50035
  ``BASE_TYPE_BAD_LENGTH``); names are unique per type (50035
  ``APPLICATION_COMMANDS_DUPLICATE_NAME``); string options have the same name rule, a description
  of 1-100 and at most 25 of them. More than 100 CHAT_INPUT commands is 400 code 30032 "Maximum
  number of application commands reached (100)". Nothing is kept from a refused list. The answer
  is 200 with the commands as stored (``id``, ``application_id``, ``version``, ``guild_id``...).
  ``GET`` on the same paths lists them. The bot token is required (401 without it).
* **An invocation** (``user_invokes``) is a gateway ``INTERACTION_CREATE`` of type 2
  (APPLICATION_COMMAND) with ``data`` ``{id, name, type: 1, options: [{name, type: 3, value}]}``, the
  channel and the invoker; it must be answered within 3 s through the interaction callback
  (``_discord_interactions``), like a press. Invoking a command that is not registered (globally or
  in the channel's guild) is an ``AssertionError``: a Discord client does not offer it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ._discord_interactions import Press

if TYPE_CHECKING:
    from .fake_discord import FakeDiscord

__all__ = ["MAX_COMMANDS", "AppCommands"]

MAX_COMMANDS = 100
MAX_NAME, MAX_DESCRIPTION, MAX_OPTIONS = 32, 100, 25
_NAME = re.compile(r"^[-_\w]{1,32}$")
JSON = "application/json"


def _form_error(path: list[str], code: str, message: str) -> tuple[int, dict[str, Any]]:
    tree: dict[str, Any] = {"_errors": [{"code": code, "message": message}]}
    for key in reversed(path):
        tree = {key: tree}
    return 400, {"message": "Invalid Form Body", "code": 50035, "errors": tree}


def _bad_name(name: Any) -> bool:
    return not isinstance(name, str) or not _NAME.fullmatch(name) or name != name.lower()


def _bad_description(text: Any) -> bool:
    return not isinstance(text, str) or not 1 <= len(text) <= MAX_DESCRIPTION


def check_commands(body: Any) -> tuple[int, Any] | None:
    """The error answer for a bulk overwrite body, or None when Discord would take it."""
    if not isinstance(body, list):
        return 400, {"message": "400: Bad Request", "code": 50109}
    if sum(1 for c in body if isinstance(c, Mapping) and c.get("type", 1) == 1) > MAX_COMMANDS:
        return 400, {"message": f"Maximum number of application commands reached ({MAX_COMMANDS})", "code": 30032}
    seen: set[tuple[Any, str]] = set()
    for i, command in enumerate(body):
        at = [str(i)]
        if not isinstance(command, Mapping):
            return _form_error(at, "DICT_TYPE_CONVERT", "Only dictionaries may be used in a DictType")
        kind = command.get("type", 1)
        if kind not in (1, 2, 3, 4):
            return _form_error([*at, "type"], "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4}.")
        name = command.get("name")
        if _bad_name(name):
            return _form_error([*at, "name"], "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
        if kind == 1 and _bad_description(command.get("description")):
            return _form_error([*at, "description"], "BASE_TYPE_BAD_LENGTH",
                               f"Must be between 1 and {MAX_DESCRIPTION} in length.")
        if (kind, name) in seen:
            return _form_error([*at, "name"], "APPLICATION_COMMANDS_DUPLICATE_NAME",
                               "Application command names must be unique")
        seen.add((kind, str(name)))
        options = command.get("options") or []
        if not isinstance(options, list) or len(options) > MAX_OPTIONS:
            return _form_error([*at, "options"], "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_OPTIONS} or fewer in length.")
        for j, option in enumerate(options):
            where = [*at, "options", str(j)]
            if not isinstance(option, Mapping) or _bad_name(option.get("name")):
                return _form_error([*where, "name"], "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid")
            if _bad_description(option.get("description")):
                return _form_error([*where, "description"], "BASE_TYPE_BAD_LENGTH",
                                   f"Must be between 1 and {MAX_DESCRIPTION} in length.")
    return None


class AppCommands:
    """The application's commands on one ``FakeDiscord``: global ones and per guild."""

    def __init__(self, fake: FakeDiscord) -> None:
        self._fake = fake
        #: None -> the global commands; a guild id -> that guild's
        self.registered: dict[str | None, list[dict[str, Any]]] = {}
        #: every bulk overwrite, accepted or not: ``{guild_id, body, status}``
        self.overwrites: list[dict[str, Any]] = []
        self._version = 0

    def add_routes(self, app: web.Application) -> None:
        base = "/api/v10/applications/{app_id}"
        for path in (base + "/commands", base + "/guilds/{guild_id}/commands"):
            app.router.add_put(path, self._overwrite)
            app.router.add_get(path, self._list)

    def names(self, guild_id: str | None = None) -> list[str]:
        return [str(c["name"]) for c in self.registered.get(guild_id, [])]

    def _answer(self, status: int, body: Any) -> web.Response:
        return web.Response(status=status, body=json.dumps(body).encode(), headers={"Content-Type": JSON})

    def _refused(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") != f"Bot {self._fake.token}":
            return self._answer(401, {"message": "401: Unauthorized", "code": 0})
        if request.match_info["app_id"] != str(self._fake.application_id):
            return self._answer(403, {"message": "Missing Access", "code": 50001})
        return None

    async def _overwrite(self, request: web.Request) -> web.StreamResponse:
        guild_id = request.match_info.get("guild_id")
        try:
            body = await request.json()
        except ValueError:
            body = None
        self._fake._record_call("bulk_upsert_commands", {"guild_id": guild_id, "commands": body},
                                http_method="PUT", path=request.path, headers={})
        refused = self._refused(request)
        status, answer = (refused.status, None) if refused is not None else (check_commands(body) or (200, None))
        self.overwrites.append({"guild_id": guild_id, "body": body, "status": status})
        if refused is not None:
            return refused
        if status != 200:
            return self._answer(status, answer)
        self._version += 1
        stored = [{"id": str(self._fake.snowflake()), "application_id": str(self._fake.application_id),
                   "version": str(self._version), "type": c.get("type", 1), "name": c["name"],
                   "description": c.get("description", ""), "options": c.get("options") or [],
                   "default_member_permissions": None, "dm_permission": True, "nsfw": False,
                   "guild_id": guild_id, "integration_types": [0], "contexts": None}
                  for c in body]
        self.registered[guild_id] = stored
        self._fake._notify()
        return self._answer(200, stored)

    async def _list(self, request: web.Request) -> web.StreamResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        return self._answer(200, self.registered.get(request.match_info.get("guild_id"), []))

    async def user_invokes(self, name: str, args: str | None = None, *, channel_id: str | int | None = None,
                           user: Mapping[str, Any] | None = None) -> Press:
        """A person runs ``/name`` (with the string option ``args``) in a channel (default: their DM)."""
        fake = self._fake
        channel = fake.channels[str(channel_id)] if channel_id is not None else fake.dm_channel()
        guild_id = channel.get("guild_id")
        offered = self.registered.get(None, []) + (self.registered.get(str(guild_id), []) if guild_id else [])
        command = next((c for c in offered if c["name"] == name), None)
        if command is None:
            raise AssertionError(f"no application command /{name} is registered: {[c['name'] for c in offered]}")
        author = dict(user or fake.user)
        iid = str(fake.snowflake())
        data: dict[str, Any] = {"id": command["id"], "name": name, "type": 1}
        if args is not None:
            data["options"] = [{"name": command["options"][0]["name"] if command["options"] else "args",
                                "type": 3, "value": args}]
        payload: dict[str, Any] = {
            "id": iid, "application_id": str(fake.application_id), "type": 2, "token": f"itoken-{iid}-c",
            "version": 1, "data": data, "channel_id": channel["id"], "channel": dict(channel), "locale": "en-US",
            "app_permissions": "2248473465835073", "entitlements": [], "authorizing_integration_owners": {},
            "attachment_size_limit": 10 * 1024 * 1024,
        }
        if guild_id:
            payload.update({"guild_id": guild_id, "guild_locale": "en-US", "context": 0,
                            "member": {**fake._member(), "user": author, "permissions": "2248473465835073",
                                       "nick": None, "avatar": None, "pending": False}})
        else:
            payload.update({"user": author, "context": 1})
        press = Press(iid, payload["token"], channel["id"], "", f"/{name}", str(author["id"]), payload)
        fake._press_records[iid] = press
        asyncio.get_running_loop().call_later(fake.interaction_timeout, fake._expire, press)
        await fake.dispatch("INTERACTION_CREATE", payload)
        return press
