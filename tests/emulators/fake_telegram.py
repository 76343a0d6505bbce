"""A fake Telegram Bot API server for end-to-end tests with the real python-telegram-bot.

Point the client at it with ``ApplicationBuilder().token(fake.token).base_url(fake.base_url)
.base_file_url(fake.base_file_url)`` (``base_url`` is ``f"{fake.endpoint()}/bot"``; PTB appends the
token itself).

Wire behaviour
--------------
* Routes ``/bot<token>/<method>`` (GET or POST; query string, form-encoded, JSON and multipart bodies).
  Method names are case-insensitive like Telegram's. A malformed token gets 404 ``Not Found``, a
  well-formed but wrong one 401 ``Unauthorized`` (both become PTB's ``InvalidToken``); an unknown
  method gets 404 ``Not Found``.
* Parameters are decoded like the real server reads PTB's form encoding (PTB sends ``str`` values raw
  and everything else ``json.dumps``-ed): only the known JSON fields (``reply_parameters``,
  ``reply_markup``, ``entities``, ``allowed_updates``, ``commands``, ...) are JSON-decoded, id-like
  fields become ``int``, flag fields ``bool``. A text of ``"123"`` stays the string ``"123"``.
* Envelope ``{"ok": true, "result": ...}``; errors ``{"ok": false, "error_code": N, "description":
  "...", "parameters": {...}}`` with the real HTTP status.
* ``getUpdates``: ``offset`` acknowledges (drops) every update below it; the request parks up to
  ``timeout`` seconds and answers ``[]`` when it runs out. A new ``getUpdates`` ends a parked one with
  409 (like Telegram with two pollers). While a webhook is set: 409.
* ``setWebhook``: the fake POSTs each pending update (in order, one at a time) to the URL with the
  ``X-Telegram-Bot-Api-Secret-Token`` header; a non-2xx answer or a connection error is retried after
  each of ``webhook_retry_delays`` and then the update is dropped. Every attempt is recorded in
  :attr:`FakeTelegram.webhook_deliveries`.
* ``sendMessage``/``editMessageText`` validate like Telegram: empty text, more than 4096 UTF-16 code
  units *after entity parsing*, MarkdownV2/HTML parse errors (see :func:`parse_markdown_v2`),
  unknown chat, unknown reply target, unknown forum topic, same-text edits ("message is not
  modified"), an edit of an unknown message ("message to edit not found").
* ``sendMessageDraft`` (Bot API 9.3): ``chat_id`` (private chats only; elsewhere 400
  ``TEXTDRAFT_PEER_INVALID``), ``draft_id`` (non-zero), ``text`` (1-4096 after entity parsing, with
  ``parse_mode``/``entities`` as ``sendMessage``), ``message_thread_id``; returns ``True``. A draft is an
  ephemeral preview: the chat shows the latest one until the bot sends a message there, or for
  ``DRAFT_TTL`` seconds. Every accepted draft state is recorded in :attr:`FakeTelegram.drafts`.
* Per-chat flood control (``rate_limit_chat``, ``chat_min_interval``): 429 ``Too Many Requests: retry
  after N`` with ``parameters.retry_after``, for the methods named (edits and drafts by default).

Test API (see each method's docstring)
-------------------------------------
* Chats: ``add_user``, ``private_chat``, ``group``, ``supergroup``, ``forum``, ``create_topic``;
  ``fake.user`` is the default user (Alice) whose private chat exists.
* Inbound: ``await user_says(text, chat=, user=, thread=, reply_to_bot=, mention=, entities=, **extra)``,
  ``await raw_update(dict)``, ``await redeliver(update_or_id)``, ``await deliver_to_webhook(update,
  secret=)``.
* Outbound: ``sent`` (successful sendMessage/editMessageText as dicts: ``method, chat_id, message_id,
  text`` (as sent), ``rendered`` (after MarkdownV2/HTML parsing), ``entities, thread_id, reply_to,
  parse_mode, reply_markup, params, time``), ``await wait_sent(n, timeout, match)``, ``message()``,
  ``history()``; ``drafts`` (every accepted sendMessageDraft: ``chat_id, draft_id, text, rendered,
  entities, thread_id, parse_mode, time``), ``draft_states()``, ``draft()`` (the one shown now);
  ``calls``/``calls_to()``/``await wait_calls()`` for every request.
* Faults: ``fail_next``, ``rate_limit_next``, ``rate_limit_chat``, ``chat_min_interval``,
  ``conflict_next_poll``, ``conflict_forever``/
  ``stop_conflicts``, ``hang_polls``/``release_polls``, ``block_bot``/``unblock_bot``.
* State: ``connected()``, ``await wait_connected()``, ``parked_polls``, ``updates`` (pending),
  ``acked_offset``, ``webhook``, ``webhook_deliveries``, ``topics()``, ``deleted``, ``my_commands``.

Files in (``getFile``, the ``/file`` route, media in messages, albums): see ``_telegram_files``, and
``user_sends`` / ``user_sends_album``.

Uploads (``sendPhoto``, ``sendDocument``, ``sendVoice``, ``sendAudio``, ``sendMediaGroup``) are
``_telegram_uploads``. Inline keyboards, ``user_presses`` (a ``callback_query``), ``answerCallbackQuery``
and ``editMessageReplyMarkup`` are ``_telegram_buttons``. Not emulated: inline mode,
channels, chat members, Telegram's own (unpublished) flood thresholds (script them with
:meth:`FakeTelegram.rate_limit_chat` and :meth:`FakeTelegram.chat_min_interval`), updates for
the bot's own service messages, and the default ``allowed_updates`` exclusions. Unknown methods can be
added with :meth:`FakeTelegram.register_method`.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import copy
import inspect
import itertools
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web

from ._telegram_buttons import Buttons
from ._telegram_commands import CommandMenu
from ._telegram_files import TelegramFiles
from ._telegram_uploads import Uploads

__all__ = [
    "CONFLICT_POLLING",
    "CONFLICT_WEBHOOK",
    "DEFAULT_TOKEN",
    "DRAFT_TTL",
    "MAX_MESSAGE_LENGTH",
    "SECRET_HEADER",
    "STREAM_METHODS",
    "BotApiError",
    "EntityParseError",
    "FakeTelegram",
    "parse_html",
    "parse_markdown_v2",
    "utf16_len",
]

DEFAULT_TOKEN = "123456:TEST-TOKEN"
MAX_MESSAGE_LENGTH = 4096
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
CONFLICT_POLLING = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
)
CONFLICT_WEBHOOK = "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
CONFLICT_SET_WEBHOOK = "Conflict: terminated by setWebhook request"
NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are exactly "
    "the same as a current content and reply markup of the message"
)
TOO_LONG = "Bad Request: message is too long"
TEXT_EMPTY = "Bad Request: message text is empty"
DRAFT_PEER_INVALID = "Bad Request: TEXTDRAFT_PEER_INVALID"
DRAFT_ID_INVALID = "Bad Request: draft_id must be non-zero"
#: How long a draft stays on screen without a newer one (the Bot API calls it a 30-second preview).
DRAFT_TTL = 30.0
#: What per-chat flood control limits unless told otherwise: the calls a streamed answer repeats.
STREAM_METHODS = ("editMessageText", "sendMessageDraft")
CHAT_NOT_FOUND = "Bad Request: chat not found"
BLOCKED = "Forbidden: bot was blocked by the user"

_TOKEN_RE = re.compile(r"\d+:[A-Za-z0-9_-]+")
_SECRET_RE = re.compile(r"[A-Za-z0-9_-]{1,256}")
_COMMAND_RE = re.compile(r"/[A-Za-z0-9_]{1,64}(?:@[A-Za-z0-9_]+)?")
_MENTION_RE = re.compile(r"(?<![A-Za-z0-9_@])@[A-Za-z0-9_]{4,32}(?![A-Za-z0-9_])")
_BOT_COMMAND_NAME_RE = re.compile(r"[a-z0-9_]{1,32}")

# Fields the real server reads as JSON when they arrive as strings (PTB json.dumps every non-str).
_JSON_FIELDS = frozenset(
    "allowed_updates caption_entities commands entities explanation_entities "
    "input_message_content link_preview_options media options permissions reaction reply_markup "
    "reply_parameters results scope".split()
)
_INT_FIELDS = frozenset(
    "chat_id direct_messages_topic_id draft_id from_chat_id icon_color limit max_connections message_id "
    "message_thread_id offset reply_to_message_id sender_chat_id until_date user_id".split()
)
_BOOL_FIELDS = frozenset(
    "allow_paid_broadcast allow_sending_without_reply disable_notification "
    "disable_web_page_preview drop_pending_updates protect_content".split()
)
_FLOAT_FIELDS = frozenset({"timeout"})
_CHAT_ACTIONS = frozenset(
    "typing upload_photo record_video upload_video record_voice upload_voice upload_document "
    "choose_sticker find_location record_video_note upload_video_note".split()
)
_TOPIC_ICON_COLOR = 7322096


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units (what Telegram counts; astral characters count 2)."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


class BotApiError(Exception):
    """Raise from a method handler to answer with an error envelope (``status`` and ``description``)."""

    def __init__(self, status: int, description: str, parameters: Mapping[str, Any] | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = dict(parameters) if parameters else None


class EntityParseError(ValueError):
    """A MarkdownV2/HTML text Telegram would refuse; ``str(err)`` is the part after "can't parse entities: "."""


# --------------------------------------------------------------------------------------- MarkdownV2

_MDV2_RESERVED = frozenset("_*[]()~`>#+-=|{}.!")
_MDV2_TYPES = {
    "Bold": "bold",
    "Italic": "italic",
    "Underline": "underline",
    "Strikethrough": "strikethrough",
    "Spoiler": "spoiler",
    "Code": "code",
    "Pre": "pre",
    "PreCode": "pre",
    "TextUrl": "text_link",
    "CustomEmoji": "custom_emoji",
}
_CODE_KINDS = frozenset({"Code", "Pre", "PreCode"})


@dataclass
class _Open:
    kind: str
    argument: str | None
    utf16: int
    byte: int
    pos: int  # index into the output characters


def parse_markdown_v2(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse a MarkdownV2 text like Telegram (modelled on TDLib's parser); return (plain text, entities).

    Raises :class:`EntityParseError` with Telegram's wording. The rules:

    * ``\\`` followed by any character with code 1..126 yields that character literally (everywhere,
      also inside code, pre and link URLs). A ``\\`` before anything else is a literal backslash.
    * Outside code/pre, each of ``_*[]()~`>#+-=|{}.!`` must be escaped unless it is markup:
      ``*bold*``, ``_italic_``, ``__underline__``, ``~strike~``, ``||spoiler||``, ``[text](url)``,
      ``![emoji](tg://emoji?id=N)``, `` `code` ``, ```` ```lang\\npre``` ````; a ``>`` at the start of a
      line (blockquote), ``**>`` at the start of a line (expandable blockquote) closed by ``||`` at the
      end of a line. Otherwise: "Character 'X' is reserved and must be escaped with the preceding '\\'".
    * Inside `` `code` `` and ```` ``` ```` blocks only ````` ` ````` is reserved (and ``\\`` escapes).
    * Inside a link's ``(...)`` everything up to the first unescaped ``)`` is the URL;
      a missing ``)`` → "Can't find end of a URL at byte offset N".
    * An entity left open at the end → "Can't find end of <Type> entity at byte offset N" (UTF-8 byte
      offset of its opening marker; Type is Bold, Italic, Underline, Strikethrough, Spoiler, Code, Pre,
      PreCode, TextUrl or CustomEmoji).
    * The innermost open entity's closing marker always wins: ``_`` closes italic unless followed by
      ``_``; ``__`` closes underline. Empty entities are dropped silently, as Telegram does.
    """
    out: list[str] = []
    utf16 = 0
    stack: list[_Open] = []
    entities: list[dict[str, Any]] = []
    quote: tuple[int, bool] | None = None  # (utf16 start, expandable)
    n = len(text)
    i = 0

    def ch(j: int) -> str:
        return text[j] if 0 <= j < n else ""

    def byte_offset(j: int) -> int:
        return len(text[:j].encode("utf-8", "surrogatepass"))

    def emit(c: str) -> None:
        nonlocal utf16
        out.append(c)
        utf16 += 2 if ord(c) > 0xFFFF else 1

    def reserved(j: int) -> EntityParseError:
        return EntityParseError(
            f"Character '{text[j]}' is reserved and must be escaped with the preceding '\\'"
        )

    def close_quote(end: int) -> None:
        nonlocal quote
        assert quote is not None
        start, expandable = quote
        if end > start:
            kind = "expandable_blockquote" if expandable else "blockquote"
            entities.append({"type": kind, "offset": start, "length": end - start})
        quote = None

    def read_url() -> str:
        nonlocal i
        begin = byte_offset(i)
        url: list[str] = []
        while i < n and text[i] != ")":
            if text[i] == "\\" and 0 < ord(ch(i + 1) or "\0") <= 126:
                url.append(text[i + 1])
                i += 2
                continue
            url.append(text[i])
            i += 1
        if i >= n:
            raise EntityParseError(f"Can't find end of a URL at byte offset {begin}")
        i += 1  # the ")"
        return "".join(url)

    while i < n:
        in_code = bool(stack) and stack[-1].kind in _CODE_KINDS
        if (i == 0 or text[i - 1] == "\n") and not in_code:
            if text.startswith("**>", i):
                if quote is None:
                    quote = (utf16, True)
                i += 3
                continue
            if text[i] == ">":
                if quote is None:
                    quote = (utf16, False)
                i += 1
                continue
            if quote is not None:
                close_quote(utf16 - 1 if i > 0 else utf16)  # the line break before this line is outside
        c = text[i]
        if c == "\\" and 0 < ord(ch(i + 1) or "\0") <= 126:
            emit(text[i + 1])
            i += 2
            continue
        if c not in ("`" if in_code else _MDV2_RESERVED):
            emit(c)
            i += 1
            continue
        top = stack[-1].kind if stack else None
        if (
            quote is not None
            and quote[1]
            and c == "|"
            and ch(i + 1) == "|"
            and ch(i + 2) in ("", "\n")
            and top != "Spoiler"
        ):
            close_quote(utf16)
            i += 2
            continue
        is_end = (
            (top == "Bold" and c == "*")
            or (top == "Italic" and c == "_" and ch(i + 1) != "_")
            or (top == "Code" and c == "`")
            or (top in ("Pre", "PreCode") and text.startswith("```", i))
            or (top in ("TextUrl", "CustomEmoji") and c == "]")
            or (top == "Underline" and c == "_" and ch(i + 1) == "_")
            or (top == "Strikethrough" and c == "~")
            or (top == "Spoiler" and c == "|" and ch(i + 1) == "|")
        )
        if not is_end:
            start_byte, argument = byte_offset(i), None
            if c == "_" and ch(i + 1) == "_":
                kind, i = "Underline", i + 2
            elif c == "_":
                kind, i = "Italic", i + 1
            elif c == "*":
                kind, i = "Bold", i + 1
            elif c == "~":
                kind, i = "Strikethrough", i + 1
            elif c == "|" and ch(i + 1) == "|":
                kind, i = "Spoiler", i + 2
            elif c == "[":
                kind, i = "TextUrl", i + 1
            elif c == "!" and ch(i + 1) == "[":
                kind, i = "CustomEmoji", i + 2
            elif c == "`" and text.startswith("```", i):
                kind, i = "Pre", i + 3
                end = i
                while end < n and not text[end].isspace() and text[end] != "`":
                    end += 1
                if end != i and end < n and text[end] != "`":
                    kind, argument, i = "PreCode", text[i:end], end
                if ch(i) in ("\n", "\r"):
                    i += 2 if ch(i + 1) in ("\n", "\r") and ch(i + 1) != ch(i) else 1
            elif c == "`":
                kind, i = "Code", i + 1
            else:
                raise reserved(i)
            stack.append(_Open(kind, argument, utf16, start_byte, len(out)))
            continue

        opened = stack.pop()
        entity: dict[str, Any] = {
            "type": _MDV2_TYPES[opened.kind],
            "offset": opened.utf16,
            "length": utf16 - opened.utf16,
        }
        if opened.kind in ("Underline", "Spoiler"):
            i += 2
        elif opened.kind in ("Pre", "PreCode"):
            i += 3
            if opened.argument:
                entity["language"] = opened.argument
        elif opened.kind == "TextUrl":
            i += 1
            if ch(i) == "(":
                i += 1
                url = read_url()
            else:
                url = "".join(out[opened.pos :])  # [text] alone: the text is the URL
            if not url.strip():
                continue
            entity["url"] = url
        elif opened.kind == "CustomEmoji":
            i += 1
            if ch(i) != "(":
                raise EntityParseError("Custom emoji entity must contain a tg://emoji URL")
            i += 1
            url = read_url()
            emoji_id = url.removeprefix("tg://emoji?id=")
            if emoji_id == url or not emoji_id.isdigit():
                raise EntityParseError("Custom emoji URL must have an emoji identifier")
            entity["custom_emoji_id"] = emoji_id
        else:
            i += 1
        if entity["length"] > 0:
            entities.append(entity)

    if stack:
        raise EntityParseError(f"Can't find end of {stack[-1].kind} entity at byte offset {stack[-1].byte}")
    if quote is not None:
        close_quote(utf16)
    entities.sort(key=lambda e: (e["offset"], -e["length"]))
    return "".join(out), entities


# --------------------------------------------------------------------------------------------- HTML

_HTML_TAGS = frozenset(
    "a b blockquote code del em i ins pre s span strike strong tg-emoji tg-spoiler u".split()
)
_HTML_ENTITY_RE = re.compile(r"&(lt|gt|amp|quot|#[0-9]{1,7}|#x[0-9a-fA-F]{1,6});")
_HTML_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}


def parse_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """A light HTML check: supported tags only, balanced, properly closed; entities decoded.

    Returns (plain text, []) — entity offsets are not computed for HTML. Errors use Telegram's
    wording: 'Unsupported start tag "x" at byte offset N', 'Unclosed start tag at byte offset N',
    'Unmatched end tag at byte offset N, expected "</b>", found "</i>"', "Can't find end tag
    corresponding to start tag "b"'. ``&`` not starting a known entity is kept literally.
    """
    out: list[str] = []
    stack: list[str] = []
    n, i = len(text), 0
    while i < n:
        c = text[i]
        if c == "&":
            m = _HTML_ENTITY_RE.match(text, i)
            if m:
                name = m.group(1)
                if name.startswith("#x"):
                    out.append(chr(int(name[2:], 16)))
                elif name.startswith("#"):
                    out.append(chr(int(name[1:])))
                else:
                    out.append(_HTML_NAMED[name])
                i = m.end()
                continue
            out.append(c)
            i += 1
            continue
        if c != "<":
            out.append(c)
            i += 1
            continue
        offset = len(text[:i].encode("utf-8", "surrogatepass"))
        close = text.find(">", i)
        if text.startswith("</", i):
            if close < 0:
                raise EntityParseError(f"Unclosed end tag at byte offset {offset}")
            name = text[i + 2 : close].strip().lower()
            if not stack:
                raise EntityParseError(f"Unexpected end tag at byte offset {offset}")
            if name and name != stack[-1]:
                raise EntityParseError(
                    f'Unmatched end tag at byte offset {offset}, expected "</{stack[-1]}>", found "</{name}>"'
                )
            stack.pop()
            i = close + 1
            continue
        m = re.match(r"<([A-Za-z][A-Za-z0-9-]*)", text[i:])
        name = m.group(1).lower() if m else ""
        if name not in _HTML_TAGS:
            raise EntityParseError(f'Unsupported start tag "{name}" at byte offset {offset}')
        if close < 0:
            raise EntityParseError(f"Unclosed start tag at byte offset {offset}")
        if name == "span" and "tg-spoiler" not in text[i:close]:
            raise EntityParseError('Tag "span" must have class "tg-spoiler"')
        stack.append(name)
        i = close + 1
    if stack:
        raise EntityParseError(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out), []


# ------------------------------------------------------------------------------------- the server


@dataclass(eq=False)
class _Poll:
    request: web.Request
    hung: bool = False
    terminated: str | None = None  # the 409 description that ends this poll

    def alive(self) -> bool:
        transport = self.request.transport
        return transport is not None and not transport.is_closing()


@dataclass
class _Webhook:
    url: str
    secret_token: str | None
    max_connections: int
    allowed_updates: list[str] | None


_USE_WEBHOOK_SECRET: Any = object()

Handler = Callable[[dict[str, Any]], Any]


class FakeTelegram(TelegramFiles):
    """Fake Bot API. Start with ``async with FakeTelegram() as fake:``; see the module docstring."""

    platform = "telegram"

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        bot_username: str = "hermes_test_bot",
        bot_name: str = "Hermes Test",
        first_update_id: int = 10_001,
        webhook_retry_delays: Sequence[float] = (0.05, 0.1, 0.2),
        webhook_timeout: float = 10.0,
        topic_replies_to_root: bool = True,
        privacy_mode: bool = False,
        poll_window: float = 1.0,
    ) -> None:
        super().__init__(poll_window=poll_window)
        if not _TOKEN_RE.fullmatch(token):
            raise ValueError(f"not a Telegram-style token: {token!r}")
        self._token = token
        self.bot: dict[str, Any] = {
            "id": int(token.split(":", 1)[0]),
            "is_bot": True,
            "first_name": bot_name,
            "username": bot_username,
        }
        #: Delays before each webhook retry; after the last one an undelivered update is dropped.
        self.webhook_retry_delays = tuple(webhook_retry_delays)
        self.webhook_timeout = webhook_timeout
        #: Like Telegram, a plain message in a forum topic carries ``reply_to_message`` = the topic's
        #: creation service message (whose ``from`` is the topic's creator, possibly the bot).
        self.topic_replies_to_root = topic_replies_to_root
        #: Bot privacy mode: group messages that are not commands, @mentions of the bot or replies to
        #: the bot are never delivered (they land in :attr:`withheld`). Off by default: the bot sees
        #: every group message, so the product's own mention filter is what gets tested.
        self.privacy_mode = privacy_mode
        #: Updates ``user_says`` built but did not deliver because of privacy mode.
        self.withheld: list[dict[str, Any]] = []
        #: Every update injected (user_says, raw_update), in order.
        self.injected: list[Any] = []
        #: Every webhook POST attempt: ``{update_id, url, status, error, attempt, secret, manual, time}``.
        self.webhook_deliveries: list[dict[str, Any]] = []
        #: Updates dropped after the webhook retries ran out.
        self.webhook_dropped: list[Any] = []
        #: ``(chat_id, message_id)`` of every deleted message.
        self.deleted: list[tuple[int, int]] = []
        #: ``setMyCommands`` state: key ``(scope_type, language_code)`` → list of commands.
        self.my_commands: dict[tuple[str, str], list[dict[str, Any]]] = {}
        #: Highest ``offset`` a ``getUpdates`` acknowledged with (0: none yet).
        self.acked_offset = 0
        #: Every accepted ``sendMessageDraft``, in order: ``{chat_id, draft_id, text, rendered, entities,
        #: thread_id, parse_mode, params, time}`` (each one is a visible update of the preview).
        self.drafts: list[dict[str, Any]] = []

        self._next_update_id = first_update_id
        self._user_ids = itertools.count(5_000_000_001)
        self._group_ids = itertools.count(-4_500_000_001, -1)
        self._supergroup_ids = itertools.count(-1_002_000_000_001, -1)
        self._users: dict[int, dict[str, Any]] = {}
        self._chats: dict[int, dict[str, Any]] = {}
        self._messages: dict[tuple[int, int], dict[str, Any]] = {}
        self._last_message_id: dict[int, int] = {}
        self._topics: dict[int, dict[int, dict[str, Any]]] = {}
        self._blocked: set[int] = set()
        self._updates: list[dict[str, Any]] = []  # pending, in update_id order, removed by ack
        self._forced: list[Any] = []  # redeliveries and malformed updates: handed out once
        self._allowed_updates: list[str] | None = None
        self._polls: list[_Poll] = []
        self._last_poll_answered: float | None = None
        self._conflicts_left = 0
        self._conflict_forever = False
        self._hang_all = False
        self._hang_budget = 0
        self._webhook: _Webhook | None = None
        self._webhook_last_error: tuple[int, str] | None = None
        self._webhook_task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._handlers: dict[str, tuple[str, Handler]] = {}
        #: the draft each (chat, thread) shows now: its record, until a message or DRAFT_TTL ends it
        self._live_drafts: dict[tuple[int, int | None], dict[str, Any]] = {}
        #: per chat: the scripted 429s still to come, each ``(methods, retry_after)``
        self._chat_floods: dict[int, list[tuple[frozenset[str], float]]] = {}
        #: per chat: ``(min_interval, methods, whole_seconds)`` and when it last accepted one of them
        self._chat_intervals: dict[int, tuple[float, frozenset[str], bool]] = {}
        self._chat_last_call: dict[int, float] = {}
        self._poll_handler = self._m_get_updates
        self._init_files()
        self._album_ids = itertools.count(1)
        for name, handler in (
            ("getMe", self._m_get_me),
            ("logOut", self._m_true),
            ("close", self._m_true),
            ("getUpdates", self._m_get_updates),
            ("setWebhook", self._m_set_webhook),
            ("deleteWebhook", self._m_delete_webhook),
            ("getWebhookInfo", self._m_get_webhook_info),
            ("sendMessage", self._m_send_message),
            ("editMessageText", self._m_edit_message_text),
            ("sendMessageDraft", self._m_send_message_draft),
            ("sendChatAction", self._m_send_chat_action),
            ("createForumTopic", self._m_create_forum_topic),
            ("deleteMessage", self._m_delete_message),
            ("setMyCommands", self._m_set_my_commands),
            ("getMyCommands", self._m_get_my_commands),
            ("deleteMyCommands", self._m_delete_my_commands),
            ("getChat", self._m_get_chat),
            ("getFile", self._m_get_file),
        ):
            self.register_method(name, handler)
        #: Files the bot uploads: sendPhoto, sendDocument, sendVoice, sendAudio, sendMediaGroup (``_telegram_uploads``).
        self.uploads = Uploads(self)
        for upload_method, serve in self.uploads.methods():
            self.register_method(upload_method, serve)
        #: Inline keyboards and their presses (``_telegram_buttons``).
        self.buttons = Buttons(self)
        self.buttons.install()
        self.command_menu = CommandMenu(self)  # setMyCommands' limit of 100 and its calls (``_telegram_commands``)
        self.command_menu.install()

        #: The default user (``user_says`` without ``user=``); its private chat exists.
        self.user = self.add_user("Alice", username="alice")

    # ---------------------------------------------------------------- config for the client

    @property
    def token(self) -> str:
        return self._token

    @property
    def bot_id(self) -> int:
        return int(self.bot["id"])

    @property
    def bot_username(self) -> str:
        return str(self.bot["username"])

    @property
    def base_url(self) -> str:
        """For ``ApplicationBuilder().base_url(...)`` / ``Bot(base_url=...)``."""
        return f"{self.endpoint()}/bot"

    @property
    def base_file_url(self) -> str:
        """For ``ApplicationBuilder().base_file_url(...)`` / ``Bot(base_file_url=...)``."""
        return f"{self.endpoint()}/file/bot"

    def connected(self) -> bool:
        """True while a webhook is set, a ``getUpdates`` is parked (with its connection open), or one
        was answered successfully within the last ``poll_window`` seconds. 409-answered polls don't count."""
        if self._closing or not self.started:
            return False
        if self._webhook is not None or any(p.alive() for p in self._polls):
            return True
        last = self._last_poll_answered
        return last is not None and time.monotonic() - last <= self.poll_window

    def _parked_requests(self) -> int:
        return len(self._polls)

    @property
    def parked_polls(self) -> int:
        """Number of ``getUpdates`` requests waiting right now (including hung ones)."""
        return len(self._polls)

    @property
    def updates(self) -> list[Any]:
        """Updates not yet acknowledged (polling) or not yet delivered (webhook)."""
        return copy.deepcopy(self._forced + self._updates)

    @property
    def webhook(self) -> dict[str, Any] | None:
        """``{url, secret_token, max_connections, allowed_updates}`` while a webhook is set."""
        return None if self._webhook is None else dict(vars(self._webhook))

    # ------------------------------------------------------------------------- users and chats

    def add_user(
        self,
        first_name: str = "Bob",
        *,
        username: str | None = None,
        last_name: str | None = None,
        user_id: int | None = None,
        language_code: str | None = "en",
    ) -> dict[str, Any]:
        """Define a user (and its private chat with the bot). Returns the User object."""
        uid = next(self._user_ids) if user_id is None else user_id
        user: dict[str, Any] = {"id": uid, "is_bot": False, "first_name": first_name}
        if last_name:
            user["last_name"] = last_name
        if username:
            user["username"] = username
        if language_code:
            user["language_code"] = language_code
        self._users[uid] = user
        self.private_chat(user)
        return copy.deepcopy(user)

    def private_chat(self, user: Any = None) -> dict[str, Any]:
        """The private chat between ``user`` (default: :attr:`user`) and the bot. Returns the Chat."""
        u = self._resolve_user(user)
        chat = self._chats.get(u["id"])
        if chat is None:
            chat = {"id": u["id"], "type": "private", "first_name": u["first_name"]}
            for key in ("last_name", "username"):
                if key in u:
                    chat[key] = u[key]
            self._chats[u["id"]] = chat
        return copy.deepcopy(chat)

    def group(self, title: str = "Test Group", *, chat_id: int | None = None) -> dict[str, Any]:
        """Define a basic group. Returns the Chat."""
        cid = next(self._group_ids) if chat_id is None else chat_id
        self._chats[cid] = {"id": cid, "type": "group", "title": title}
        return copy.deepcopy(self._chats[cid])

    def supergroup(
        self,
        title: str = "Test Supergroup",
        *,
        forum: bool = False,
        username: str | None = None,
        chat_id: int | None = None,
    ) -> dict[str, Any]:
        """Define a supergroup (``forum=True``: with topics). Returns the Chat."""
        cid = next(self._supergroup_ids) if chat_id is None else chat_id
        chat: dict[str, Any] = {"id": cid, "type": "supergroup", "title": title}
        if username:
            chat["username"] = username
        if forum:
            chat["is_forum"] = True
        self._chats[cid] = chat
        return copy.deepcopy(chat)

    def forum(self, title: str = "Test Forum", **kw: Any) -> dict[str, Any]:
        """Define a forum supergroup (``is_forum: true``). Returns the Chat."""
        return self.supergroup(title, forum=True, **kw)

    def create_topic(self, chat: Any, name: str = "Topic", *, by: Any = None) -> int:
        """Create a forum topic as user ``by`` (default: :attr:`user`); returns its ``message_thread_id``."""
        chat_obj = self._resolve_chat(chat)
        if not chat_obj.get("is_forum"):
            raise ValueError(f"chat {chat_obj['id']} is not a forum")
        return self._create_topic(chat_obj, name, self._resolve_user(by), _TOPIC_ICON_COLOR)

    def topics(self, chat: Any) -> dict[int, str]:
        """``{message_thread_id: name}`` of the forum's topics."""
        cid = self._resolve_chat(chat)["id"]
        return {tid: t["name"] for tid, t in self._topics.get(cid, {}).items()}

    def block_bot(self, chat: Any) -> None:
        """The user of this private chat blocks the bot: sends get 403 'bot was blocked by the user'."""
        self._blocked.add(self._resolve_chat(chat)["id"])

    def unblock_bot(self, chat: Any) -> None:
        self._blocked.discard(self._resolve_chat(chat)["id"])

    def message(self, chat: Any, message_id: int) -> dict[str, Any] | None:
        """The current state of a message (after edits), or None (unknown or deleted)."""
        msg = self._messages.get((self._resolve_chat(chat)["id"], message_id))
        return copy.deepcopy(msg)

    def history(self, chat: Any, *, thread: int | None = None) -> list[dict[str, Any]]:
        """Current messages of a chat (optionally one thread), oldest first, deleted ones left out."""
        cid = self._resolve_chat(chat)["id"]
        found = [
            m
            for (c, _), m in sorted(self._messages.items())
            if c == cid and (thread is None or m.get("message_thread_id") == thread)
        ]
        return copy.deepcopy(found)

    # --------------------------------------------------------------------------------- inbound

    async def user_says(
        self,
        text: str,
        *,
        chat: Any = None,
        user: Any = None,
        thread: int | None = None,
        reply_to_bot: bool | int = False,
        mention: bool = False,
        entities: list[dict[str, Any]] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A user sends ``text``; returns the Update that was queued (or POSTed to the webhook).

        ``chat``/``user``: a Chat/User dict or an id; defaults: the default :attr:`user` and its
        private chat (``chat`` alone, if private, implies its user). ``thread``: ``message_thread_id``
        (plus ``is_topic_message`` in a forum; an unknown id in a forum becomes a topic).
        ``reply_to_bot``: True → replies to the bot's latest message in that chat/thread (a stand-in
        bot message is created when there is none), or a bot message id. ``mention``: prefix
        ``@<bot_username>`` unless the text already mentions it. ``entities``: None → computed
        (``bot_command`` for a leading ``/cmd[@bot]``, ``mention`` for each ``@username``); a list →
        used as given. ``extra`` keys are merged into the Message last (override anything).
        """
        message = self._user_message(text, chat=chat, user=user, thread=thread, reply_to_bot=reply_to_bot,
                                     mention=mention, entities=entities)
        message.update(extra)
        return self._deliver_user_message(message)

    async def user_sends(
        self,
        media: Mapping[str, Any],
        *,
        caption: str | None = None,
        chat: Any = None,
        user: Any = None,
        thread: int | None = None,
        reply_to_bot: bool | int = False,
        mention: bool = False,
        caption_entities: list[dict[str, Any]] | None = None,
        media_group_id: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A user sends a medium (``fake.photo(...)``, ``fake.document(...)``, ...) with an optional
        ``caption`` (entities computed like ``user_says``'s, as ``caption_entities``); the other
        arguments as :meth:`user_says`. Returns the Update."""
        if mention and caption is None:
            caption = ""
        message = self._user_message(caption, chat=chat, user=user, thread=thread, reply_to_bot=reply_to_bot,
                                     mention=mention, entities=caption_entities)
        if "text" in message:
            message["caption"] = message.pop("text")
        if "entities" in message:
            message["caption_entities"] = message.pop("entities")
        message.update(copy.deepcopy(dict(media)))
        if media_group_id is not None:
            message["media_group_id"] = media_group_id
        message.update(extra)
        return self._deliver_user_message(message)

    async def user_sends_album(
        self, media: Sequence[Mapping[str, Any]], *, caption: str | None = None, caption_on: int = 0,
        media_group_id: str | None = None, **kw: Any,
    ) -> list[dict[str, Any]]:
        """An album: one message per medium (2 to 10, as Telegram allows), each its own update, all with
        one ``media_group_id``; ``caption`` (and ``mention``) on part ``caption_on`` only, as Telegram
        shows it. The other arguments as :meth:`user_sends`."""
        if not 2 <= len(media) <= 10:
            raise ValueError("an album has 2 to 10 parts")
        group = media_group_id or str(13_000_000_000_000_000 + next(self._album_ids))
        mention = bool(kw.pop("mention", False))
        return [
            await self.user_sends(part, caption=caption if i == caption_on else None, media_group_id=group,
                                  mention=mention and i == caption_on, **kw)
            for i, part in enumerate(media)
        ]

    def _user_message(
        self,
        text: str | None,
        *,
        chat: Any,
        user: Any,
        thread: int | None,
        reply_to_bot: bool | int,
        mention: bool,
        entities: list[dict[str, Any]] | None,
    ) -> dict[str, Any]:
        if user is None and chat is not None:
            chat_obj = self._resolve_chat(chat)
            sender = self._users.get(chat_obj["id"], self._users[self.user["id"]])
        else:
            sender = self._resolve_user(user)
            if chat is None:
                self.private_chat(sender)
            chat_obj = self._resolve_chat(chat if chat is not None else sender["id"])
        if mention and text is not None and f"@{self.bot_username}".lower() not in text.lower():
            text = f"@{self.bot_username} {text}" if text else f"@{self.bot_username}"
        if (
            thread is not None
            and chat_obj.get("is_forum")
            and thread not in self._topics.get(chat_obj["id"], {})
        ):
            self._topics.setdefault(chat_obj["id"], {})[thread] = {
                "name": f"Topic {thread}",
                "icon_color": _TOPIC_ICON_COLOR,
                "root": None,
            }
            self._bump_message_id(chat_obj["id"], thread)
        target: dict[str, Any] | None = None
        if reply_to_bot is not False:
            target = self._bot_message_to_reply(chat_obj, thread, reply_to_bot)
        elif thread is not None and chat_obj.get("is_forum") and self.topic_replies_to_root:
            root = self._topics[chat_obj["id"]][thread]["root"]
            target = self._messages.get((chat_obj["id"], root)) if root is not None else None
        message = self._new_message(
            chat_obj,
            sender,
            text,
            thread=thread,
            entities=_auto_entities(text or "") if entities is None else entities,
        )
        if target is not None:
            message["reply_to_message"] = _without_reply(target)
        return message

    def _deliver_user_message(self, message: dict[str, Any]) -> dict[str, Any]:
        update = {"update_id": self._take_update_id(), "message": message}
        if self.privacy_mode and not self._addresses_bot(message):
            self.withheld.append(copy.deepcopy(update))
        else:
            self._enqueue(update)
        return copy.deepcopy(update)

    async def user_presses(self, message: Any, data: str, *, user: Any = None, stale: bool = False,
                           age: float = 0.0) -> dict[str, Any]:
        """A person presses the inline button ``data`` of ``message`` (see ``_telegram_buttons``)."""
        return await self.buttons.user_presses(message, data, user=user, stale=stale, age=age)

    async def raw_update(self, update: Any, *, assign_update_id: bool = True) -> Any:
        """Queue an arbitrary (possibly malformed) update as-is, for fuzzing.

        A dict without ``update_id`` gets the next one (unless ``assign_update_id=False``). Updates
        without an integer ``update_id`` (or non-dicts) are handed out once and never need an ack.
        """
        update = copy.deepcopy(update)
        if isinstance(update, dict) and "update_id" not in update and assign_update_id:
            update["update_id"] = self._take_update_id()
        if isinstance(update, dict) and _is_update_id(update.get("update_id")):
            self._next_update_id = max(self._next_update_id, update["update_id"] + 1)
            self._enqueue(update)
        else:
            self.injected.append(update)
            self._forced.append(update)
            self._notify()
        return copy.deepcopy(update)

    async def redeliver(self, update: Any) -> dict[str, Any]:
        """Deliver an update again with the same ``update_id`` (an Update dict or its id).

        Polling: the next ``getUpdates`` returns it even though its id is below the acknowledged
        offset (once). Webhook: it is POSTed again.
        """
        if isinstance(update, int):
            found = [u for u in self.injected if isinstance(u, dict) and u.get("update_id") == update]
            if not found:
                raise KeyError(f"no injected update with update_id {update}")
            update = found[-1]
        self._forced.append(copy.deepcopy(update))
        self._notify()
        return copy.deepcopy(update)

    # -------------------------------------------------------------------------------- controls

    def conflict_next_poll(self, n: int = 1) -> None:
        """The next ``n`` ``getUpdates`` answer 409 'terminated by other getUpdates request'."""
        self._conflicts_left += n

    def conflict_forever(self) -> None:
        """Every ``getUpdates`` (including parked ones) answers 409 until :meth:`stop_conflicts`."""
        self._conflict_forever = True
        self._terminate_polls(CONFLICT_POLLING)

    def stop_conflicts(self) -> None:
        self._conflict_forever = False
        self._conflicts_left = 0

    def hang_polls(self, count: int | None = None) -> None:
        """``getUpdates`` stops answering (other methods keep working) until :meth:`release_polls` or stop.

        The polls parked now hang, and so do the next ``count`` new ones (every new one when None).
        A released poll answers at once with whatever is pending (possibly ``[]``).
        """
        for poll in self._polls:
            poll.hung = True
        self._hang_all = count is None
        self._hang_budget = 0 if count is None else count
        self._notify()

    def release_polls(self) -> None:
        for poll in self._polls:
            poll.hung = False
        self._hang_all = False
        self._hang_budget = 0
        self._notify()

    def rate_limit_next(self, method: str = "sendMessage", retry_after: float = 1, *, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` get 429 with ``parameters.retry_after`` (PTB: RetryAfter)."""
        body = {
            "ok": False,
            "error_code": 429,
            "description": f"Too Many Requests: retry after {retry_after:g}",
            "parameters": {"retry_after": retry_after},
        }
        self.fail_next(method, 429, body, {"Retry-After": str(math.ceil(retry_after))}, times=times)

    def rate_limit_chat(
        self, chat: Any, retry_after: float = 1, *, times: int = 1, methods: Sequence[str] = STREAM_METHODS
    ) -> None:
        """Flood control in one chat: its next ``times`` calls of ``methods`` (edits and drafts by
        default) get 429 ``Too Many Requests: retry after N`` and are not applied. Calls in other chats,
        and of other methods, go through."""
        cid = self._resolve_chat(chat)["id"]
        names = frozenset(m.lower() for m in methods)
        self._chat_floods.setdefault(cid, []).extend([(names, float(retry_after))] * times)

    def chat_min_interval(
        self,
        chat: Any,
        seconds: float | None,
        *,
        methods: Sequence[str] = STREAM_METHODS,
        whole_seconds: bool = True,
    ) -> None:
        """Flood control in one chat: a call of ``methods`` sooner than ``seconds`` after the last one
        it accepted gets 429, with ``retry_after`` the time left (rounded up to whole seconds like
        Telegram's, unless ``whole_seconds`` is false). None lifts the limit."""
        cid = self._resolve_chat(chat)["id"]
        if seconds is None:
            self._chat_intervals.pop(cid, None)
            return
        self._chat_intervals[cid] = (seconds, frozenset(m.lower() for m in methods), whole_seconds)

    def draft_states(self, chat: Any, *, draft_id: int | None = None) -> list[str]:
        """The texts (as rendered) of every draft accepted in ``chat`` (optionally one ``draft_id``), in order."""
        cid = self._resolve_chat(chat)["id"]
        return [
            d["rendered"]
            for d in self.drafts
            if d["chat_id"] == cid and (draft_id is None or d["draft_id"] == draft_id)
        ]

    def draft(self, chat: Any, *, thread: int | None = None) -> dict[str, Any] | None:
        """The draft ``chat`` (and ``thread``) shows now, or None: a message the bot sent there since, or
        ``DRAFT_TTL`` seconds without a newer draft, ended it."""
        cid = self._resolve_chat(chat)["id"]
        shown = self._live_drafts.get((cid, thread))
        if shown is None or time.monotonic() - shown["time"] > DRAFT_TTL:
            return None
        return copy.deepcopy(shown)

    def register_method(self, name: str, handler: Handler) -> None:
        """Serve Bot API method ``name`` with ``handler(params) -> result`` (sync or async).

        Raise :class:`BotApiError` for an error answer; returning a ``web.Response`` sends it as-is.
        Replaces a built-in handler of the same name.
        """
        self._handlers[name.lower()] = (name, handler)

    async def deliver_to_webhook(
        self,
        update: Any,
        *,
        secret: str | None = _USE_WEBHOOK_SECRET,
        url: str | None = None,
    ) -> int | None:
        """POST one update to the webhook once (no retries, queue untouched); returns the HTTP status
        (None on a connection error). ``secret``: default the registered secret token; None → no
        header; a string → that header value. ``url``: default the registered webhook URL."""
        hook = self._webhook
        if url is None:
            if hook is None:
                raise RuntimeError("no webhook is set and no url was given")
            url = hook.url
        if secret is _USE_WEBHOOK_SECRET:
            secret = hook.secret_token if hook is not None else None
        return await self._post_update(url, secret, update, attempt=0, manual=True)

    # ------------------------------------------------------------------------------- lifecycle

    async def _on_start(self) -> None:
        self._session = aiohttp.ClientSession(trust_env=False)
        self._webhook_task = asyncio.create_task(self._webhook_worker(), name="fake-telegram-webhook")

    async def _on_stop(self) -> None:
        if self._webhook_task is not None:
            self._webhook_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._webhook_task
            self._webhook_task = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _setup_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        self._file_routes(app)

    def _error_body(self, status: int, description: str | None) -> dict[str, Any]:
        if description is None:
            description = {
                400: "Bad Request",
                401: "Unauthorized",
                403: "Forbidden",
                404: "Not Found",
                409: "Conflict",
                429: "Too Many Requests: retry after 1",
                500: "Internal Server Error",
                502: "Bad Gateway",
            }.get(status, f"Error {status}")
        return {"ok": False, "error_code": status, "description": description}

    def _method_key(self, method: str) -> str:
        return method.lower()

    # -------------------------------------------------------------------------------- dispatch

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        token, raw_method = request.match_info["token"], request.match_info["method"]
        known = self._handlers.get(raw_method.lower())
        name = known[0] if known else raw_method
        bad_body: str | None = None
        try:
            params = await _read_params(request)
        except ValueError as exc:
            params, bad_body = {}, str(exc)
        call = self._record_call(
            name, params, http_method=request.method, path=request.path, headers=dict(request.headers)
        )
        if not _TOKEN_RE.fullmatch(token):
            return self._respond(call, 404, self._error_body(404, "Not Found"))
        if token != self._token:
            return self._respond(call, 401, self._error_body(401, "Unauthorized"))
        if known is None:
            return self._respond(call, 404, self._error_body(404, "Not Found"))
        if bad_body is not None:
            return self._respond(call, 400, self._error_body(400, f"Bad Request: {bad_body}"))
        failure = self._take_failure(name)
        if failure is not None:
            return self._failure_response(call, failure)
        flooded = self._chat_flood(name, params)
        if flooded is not None:
            retry = str(math.ceil(flooded["parameters"]["retry_after"]))
            return self._respond(call, 429, flooded, {"Retry-After": retry})
        result: Any
        try:
            if known[1] == self._poll_handler:
                result = self._m_get_updates(params, request)
            else:
                result = known[1](params)
            if inspect.isawaitable(result):
                result = await result
        except BotApiError as exc:
            body = self._error_body(exc.status, exc.description)
            if exc.parameters:
                body["parameters"] = exc.parameters
            return self._respond(call, exc.status, body)
        if isinstance(result, web.StreamResponse):
            call.status = result.status
            self._notify()
            return result
        self._note_chat_call(name, params)
        return self._respond(call, 200, {"ok": True, "result": result})

    def _call_chat(self, params: dict[str, Any]) -> int | None:
        chat_id = params.get("chat_id")
        if isinstance(chat_id, int):
            return chat_id
        if isinstance(chat_id, str) and chat_id.startswith("@"):
            with contextlib.suppress(BotApiError):
                return int(self._chat_param(params)["id"])
        return None

    def _chat_flood(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """The 429 body for a call the chat's flood control refuses, else None."""
        cid = self._call_chat(params)
        if cid is None:
            return None
        method = name.lower()
        retry_after: float | None = None
        scripted = self._chat_floods.get(cid, [])
        for i, (methods, wait) in enumerate(scripted):
            if method in methods:
                del scripted[i]
                retry_after = wait
                break
        interval = self._chat_intervals.get(cid)
        last = self._chat_last_call.get(cid)
        if retry_after is None and interval is not None and last is not None and method in interval[1]:
            left = interval[0] - (time.monotonic() - last)
            if left > 0:
                retry_after = float(math.ceil(left)) if interval[2] else round(left, 3) or 0.001
        if retry_after is None:
            return None
        return {
            "ok": False,
            "error_code": 429,
            "description": f"Too Many Requests: retry after {retry_after:g}",
            "parameters": {"retry_after": retry_after},
        }

    def _note_chat_call(self, name: str, params: dict[str, Any]) -> None:
        cid = self._call_chat(params)
        interval = self._chat_intervals.get(cid) if cid is not None else None
        if cid is not None and interval is not None and name.lower() in interval[1]:
            self._chat_last_call[cid] = time.monotonic()

    # ---------------------------------------------------------------------------------- methods

    def _m_true(self, p: dict[str, Any]) -> bool:
        return True

    def _m_get_me(self, p: dict[str, Any]) -> dict[str, Any]:
        return {
            **self.bot,
            "can_join_groups": True,
            "can_read_all_group_messages": not self.privacy_mode,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    async def _m_get_updates(self, p: dict[str, Any], request: web.Request | None = None) -> list[Any]:
        if self._webhook is not None:
            raise BotApiError(409, CONFLICT_WEBHOOK)
        if self._conflict_forever or self._conflicts_left > 0:
            if not self._conflict_forever:
                self._conflicts_left -= 1
            raise BotApiError(409, CONFLICT_POLLING)
        limit = min(max(_as_int(p.get("limit"), 100), 1), 100)
        timeout = max(_as_float(p.get("timeout"), 0.0), 0.0)
        allowed = p.get("allowed_updates")
        if isinstance(allowed, list):
            self._allowed_updates = [str(a) for a in allowed] or None
        self._acknowledge(_as_int(p.get("offset"), 0))
        if request is None:
            raise BotApiError(500, "Internal Server Error: getUpdates needs the request")
        poll = _Poll(request, hung=self._hang_all or self._hang_budget > 0)
        if not self._hang_all and self._hang_budget > 0:
            self._hang_budget -= 1
        self._terminate_polls(CONFLICT_POLLING)  # a newer poll ends the older ones, like Telegram
        self._polls.append(poll)
        self._notify()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while not self._closing:
                if poll.terminated is not None:
                    raise BotApiError(409, poll.terminated)
                if poll.hung:
                    await self._wait_changed(None)
                    continue
                if self._has_deliverable():
                    break
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                await self._wait_changed(remaining)
        finally:
            self._polls.remove(poll)
            self._notify()
        if self._closing:
            return []
        self._last_poll_answered = time.monotonic()
        return self._take_batch(limit)

    def _m_set_webhook(self, p: dict[str, Any]) -> bool:
        url = p.get("url")
        if not isinstance(url, str):
            raise BotApiError(400, "Bad Request: bad webhook: url is empty")
        if url == "":
            return self._m_delete_webhook(p)
        if not url.startswith(("http://", "https://")):
            raise BotApiError(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
        secret = p.get("secret_token")
        if secret is not None and not (isinstance(secret, str) and _SECRET_RE.fullmatch(secret)):
            raise BotApiError(400, "Bad Request: secret token contains unallowed characters")
        allowed = p.get("allowed_updates")
        self._webhook = _Webhook(
            url=url,
            secret_token=secret or None,
            max_connections=_as_int(p.get("max_connections"), 40),
            allowed_updates=[str(a) for a in allowed] if isinstance(allowed, list) else None,
        )
        if isinstance(allowed, list):
            self._allowed_updates = [str(a) for a in allowed] or None
        if p.get("drop_pending_updates") is True:
            self._updates.clear()
            self._forced.clear()
        self._webhook_last_error = None
        self._terminate_polls(CONFLICT_SET_WEBHOOK)
        self._notify()
        return True

    def _m_delete_webhook(self, p: dict[str, Any]) -> bool:
        self._webhook = None
        if p.get("drop_pending_updates") is True:
            self._updates.clear()
            self._forced.clear()
        self._notify()
        return True

    def _m_get_webhook_info(self, p: dict[str, Any]) -> dict[str, Any]:
        hook = self._webhook
        info: dict[str, Any] = {
            "url": hook.url if hook else "",
            "has_custom_certificate": False,
            "pending_update_count": len(self._forced) + len(self._updates),
        }
        if hook is not None:
            info["max_connections"] = hook.max_connections
            if hook.allowed_updates is not None:
                info["allowed_updates"] = hook.allowed_updates
            if self._webhook_last_error is not None:
                info["last_error_date"], info["last_error_message"] = self._webhook_last_error
        return info

    def _m_send_message(self, p: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat_param(p)
        self._check_blocked(chat)
        raw, rendered, entities = self._text_param(p)
        thread = self._thread_param(chat, p)
        target = self._reply_param(chat, p)
        message = self._new_message(chat, self.bot, rendered, thread=thread, entities=entities)
        self._live_drafts.pop((chat["id"], thread), None)  # the message takes the draft's place
        if target is not None:
            message["reply_to_message"] = _without_reply(target)
        if isinstance(p.get("reply_markup"), dict):
            message["reply_markup"] = p["reply_markup"]
        self._record_sent(
            {
                "method": "sendMessage",
                "chat_id": chat["id"],
                "message_id": message["message_id"],
                "text": raw,
                "rendered": rendered,
                "entities": entities,
                "thread_id": thread,
                "reply_to": target["message_id"] if target is not None else None,
                "parse_mode": p.get("parse_mode"),
                "reply_markup": p.get("reply_markup"),
                "params": p,
            }
        )
        return copy.deepcopy(message)

    def _m_edit_message_text(self, p: dict[str, Any]) -> dict[str, Any] | bool:
        if p.get("inline_message_id"):
            raw, rendered, entities = self._text_param(p)
            self._record_sent(
                {
                    "method": "editMessageText",
                    "chat_id": None,
                    "message_id": None,
                    "inline_message_id": p["inline_message_id"],
                    "text": raw,
                    "rendered": rendered,
                    "entities": entities,
                    "thread_id": None,
                    "reply_to": None,
                    "parse_mode": p.get("parse_mode"),
                    "params": p,
                }
            )
            return True
        chat = self._chat_param(p)
        message_id = p.get("message_id")
        if not isinstance(message_id, int):
            raise BotApiError(400, "Bad Request: message identifier is not specified")
        message = self._messages.get((chat["id"], message_id))
        if message is None:
            raise BotApiError(400, "Bad Request: message to edit not found")
        if message.get("from", {}).get("id") != self.bot_id or "text" not in message:
            raise BotApiError(400, "Bad Request: message can't be edited")
        raw, rendered, entities = self._text_param(p)
        markup = p.get("reply_markup") if isinstance(p.get("reply_markup"), dict) else None
        if (
            rendered == message["text"]
            and entities == message.get("entities", [])
            and markup == message.get("reply_markup")
        ):
            raise BotApiError(400, NOT_MODIFIED)
        message["text"] = rendered
        message.pop("entities", None)
        if entities:
            message["entities"] = entities
        message.pop("reply_markup", None)
        if markup is not None:
            message["reply_markup"] = markup
        message["edit_date"] = int(time.time())
        reply = message.get("reply_to_message")
        self._record_sent(
            {
                "method": "editMessageText",
                "chat_id": chat["id"],
                "message_id": message_id,
                "text": raw,
                "rendered": rendered,
                "entities": entities,
                "thread_id": message.get("message_thread_id"),
                "reply_to": reply.get("message_id") if isinstance(reply, dict) else None,
                "parse_mode": p.get("parse_mode"),
                "reply_markup": p.get("reply_markup"),
                "params": p,
            }
        )
        return copy.deepcopy(message)

    def _m_send_message_draft(self, p: dict[str, Any]) -> bool:
        chat = self._chat_param(p)
        if chat["type"] != "private":
            raise BotApiError(400, DRAFT_PEER_INVALID)
        self._check_blocked(chat)
        draft_id = p.get("draft_id")
        if not isinstance(draft_id, int) or draft_id == 0:
            raise BotApiError(400, DRAFT_ID_INVALID)
        raw, rendered, entities = self._text_param(p)
        thread = self._thread_param(chat, p)
        state = {
            "chat_id": chat["id"],
            "draft_id": draft_id,
            "text": raw,
            "rendered": rendered,
            "entities": entities,
            "thread_id": thread,
            "parse_mode": p.get("parse_mode"),
            "params": p,
            "time": time.monotonic(),
        }
        self.drafts.append(state)
        self._live_drafts[(chat["id"], thread)] = state
        self._notify()
        return True

    def _m_send_chat_action(self, p: dict[str, Any]) -> bool:
        chat = self._chat_param(p)
        self._check_blocked(chat)
        if p.get("action") not in _CHAT_ACTIONS:
            raise BotApiError(400, "Bad Request: wrong parameter action in request")
        self._thread_param(chat, p)
        return True

    def _m_create_forum_topic(self, p: dict[str, Any]) -> dict[str, Any]:
        chat = self._chat_param(p)
        if chat["type"] != "supergroup" or not chat.get("is_forum"):
            raise BotApiError(400, "Bad Request: the chat is not a forum")
        name = p.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= 128:
            raise BotApiError(
                400, "Bad Request: TOPIC_TITLE_EMPTY" if not name else "Bad Request: TOPIC_TITLE_INVALID"
            )
        color = _as_int(p.get("icon_color"), _TOPIC_ICON_COLOR)
        thread = self._create_topic(chat, name, self.bot, color)
        return {"message_thread_id": thread, "name": name, "icon_color": color}

    def _m_delete_message(self, p: dict[str, Any]) -> bool:
        chat = self._chat_param(p)
        key = (chat["id"], p.get("message_id"))
        if not isinstance(key[1], int) or key not in self._messages:
            raise BotApiError(400, "Bad Request: message to delete not found")
        del self._messages[key]
        self.deleted.append((chat["id"], key[1]))
        self._notify()
        return True

    def _m_set_my_commands(self, p: dict[str, Any]) -> bool:
        commands = p.get("commands")
        if not isinstance(commands, list):
            raise BotApiError(400, "Bad Request: can't parse commands JSON object")
        for command in commands:
            if not (
                isinstance(command, dict)
                and isinstance(command.get("command"), str)
                and _BOT_COMMAND_NAME_RE.fullmatch(command["command"])
                and isinstance(command.get("description"), str)
                and 1 <= len(command["description"]) <= 256
            ):
                raise BotApiError(400, "Bad Request: BOT_COMMAND_INVALID")
        self.my_commands[self._commands_key(p)] = [
            {"command": c["command"], "description": c["description"]} for c in commands
        ]
        return True

    def _m_get_my_commands(self, p: dict[str, Any]) -> list[dict[str, Any]]:
        return copy.deepcopy(self.my_commands.get(self._commands_key(p), []))

    def _m_delete_my_commands(self, p: dict[str, Any]) -> bool:
        self.my_commands.pop(self._commands_key(p), None)
        return True

    def _m_get_chat(self, p: dict[str, Any]) -> dict[str, Any]:
        chat = copy.deepcopy(self._chat_param(p))
        chat.update(
            {
                "accent_color_id": 0,
                "max_reaction_count": 11,
                "accepted_gift_types": {
                    "unlimited_gifts": False,
                    "limited_gifts": False,
                    "unique_gifts": False,
                    "premium_subscription": False,
                    "gifts_from_channels": False,
                },
            }
        )
        return chat

    # --------------------------------------------------------------------------- param helpers

    def _chat_param(self, p: dict[str, Any]) -> dict[str, Any]:
        chat_id = p.get("chat_id")
        if chat_id is None or chat_id == "":
            raise BotApiError(400, "Bad Request: chat_id is empty")
        if isinstance(chat_id, int) and chat_id in self._chats:
            return self._chats[chat_id]
        if isinstance(chat_id, str) and chat_id.startswith("@"):
            for chat in self._chats.values():
                if chat["type"] != "private" and chat.get("username", "").lower() == chat_id[1:].lower():
                    return chat
        raise BotApiError(400, CHAT_NOT_FOUND)

    def _check_blocked(self, chat: dict[str, Any]) -> None:
        if chat["id"] in self._blocked:
            raise BotApiError(403, BLOCKED)

    def _text_param(self, p: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
        raw = p.get("text")
        if not isinstance(raw, str) or not raw.strip():
            raise BotApiError(400, TEXT_EMPTY)
        mode = p.get("parse_mode")
        try:
            if not mode:
                given = p.get("entities")
                rendered, entities = raw, given if isinstance(given, list) else []
            elif str(mode).lower() == "markdownv2":
                rendered, entities = parse_markdown_v2(raw)
            elif str(mode).lower() == "html":
                rendered, entities = parse_html(raw)
            elif str(mode).lower() == "markdown":
                rendered, entities = raw, []  # legacy Markdown: not validated
            else:
                raise BotApiError(400, "Bad Request: unsupported parse_mode")
        except EntityParseError as exc:
            raise BotApiError(400, f"Bad Request: can't parse entities: {exc}") from None
        if not rendered.strip():
            raise BotApiError(400, TEXT_EMPTY)
        if utf16_len(rendered) > MAX_MESSAGE_LENGTH:
            raise BotApiError(400, TOO_LONG)
        return raw, rendered, entities

    def _thread_param(self, chat: dict[str, Any], p: dict[str, Any]) -> int | None:
        thread = p.get("message_thread_id")
        if thread is None:
            return None
        if not isinstance(thread, int):
            raise BotApiError(400, "Bad Request: message thread not found")
        if chat.get("is_forum") and thread != 1 and thread not in self._topics.get(chat["id"], {}):
            raise BotApiError(400, "Bad Request: message thread not found")
        return thread

    def _reply_param(self, chat: dict[str, Any], p: dict[str, Any]) -> dict[str, Any] | None:
        params = p.get("reply_parameters")
        if isinstance(params, dict):
            message_id = params.get("message_id")
            chat_id = _as_int(params.get("chat_id"), chat["id"])
            allow = bool(params.get("allow_sending_without_reply"))
        elif p.get("reply_to_message_id") is not None:
            message_id, chat_id = p["reply_to_message_id"], chat["id"]
            allow = p.get("allow_sending_without_reply") is True
        else:
            return None
        target = self._messages.get((chat_id, message_id)) if isinstance(message_id, int) else None
        if target is None and not allow:
            raise BotApiError(400, "Bad Request: message to be replied not found")
        return target

    def _commands_key(self, p: dict[str, Any]) -> tuple[str, str]:
        scope = p.get("scope")
        scope_key = json.dumps(scope, sort_keys=True) if isinstance(scope, dict) else "default"
        if isinstance(scope, dict) and set(scope) == {"type"} and scope.get("type") == "default":
            scope_key = "default"
        return scope_key, str(p.get("language_code") or "")

    # -------------------------------------------------------------------------------- internals

    def _resolve_user(self, user: Any) -> dict[str, Any]:
        if user is None:
            return self._users[self.user["id"]]
        uid: Any = user.get("id") if isinstance(user, dict) else user
        if uid == self.bot_id:
            return self.bot
        if uid not in self._users:
            if isinstance(user, dict):
                self._users[uid] = copy.deepcopy(user)
            else:
                raise KeyError(f"unknown user {user!r}: define it with add_user()")
        return self._users[uid]

    def _resolve_chat(self, chat: Any) -> dict[str, Any]:
        cid: Any = chat.get("id") if isinstance(chat, dict) else chat
        if cid not in self._chats:
            if isinstance(chat, dict) and "type" in chat:
                self._chats[cid] = copy.deepcopy(chat)
            else:
                raise KeyError(
                    f"unknown chat {chat!r}: define it with group()/supergroup()/forum()/add_user()"
                )
        return self._chats[cid]

    def _next_message_id(self, chat_id: int) -> int:
        self._last_message_id[chat_id] = self._last_message_id.get(chat_id, 0) + 1
        return self._last_message_id[chat_id]

    def _bump_message_id(self, chat_id: int, at_least: int) -> None:
        self._last_message_id[chat_id] = max(self._last_message_id.get(chat_id, 0), at_least)

    def _new_message(
        self,
        chat: dict[str, Any],
        sender: dict[str, Any],
        text: str | None,
        *,
        thread: int | None = None,
        entities: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        message: dict[str, Any] = {
            "message_id": self._next_message_id(chat["id"]),
            "date": int(time.time()),
            "chat": copy.deepcopy(chat),
            "from": copy.deepcopy(sender),
        }
        if thread is not None:
            message["message_thread_id"] = thread
            if chat.get("is_forum"):
                message["is_topic_message"] = True
        if text is not None:
            message["text"] = text
        if entities:
            message["entities"] = copy.deepcopy(entities)
        self._messages[(chat["id"], message["message_id"])] = message
        return message

    def _create_topic(self, chat: dict[str, Any], name: str, creator: dict[str, Any], color: int) -> int:
        service = self._new_message(chat, creator, None)
        thread: int = service["message_id"]
        service.update(
            {
                "message_thread_id": thread,
                "is_topic_message": True,
                "forum_topic_created": {"name": name, "icon_color": color},
            }
        )
        self._topics.setdefault(chat["id"], {})[thread] = {"name": name, "icon_color": color, "root": thread}
        return thread

    def _bot_message_to_reply(
        self, chat: dict[str, Any], thread: int | None, which: bool | int
    ) -> dict[str, Any]:
        if not isinstance(which, bool):
            found = self._messages.get((chat["id"], which))
            if found is None:
                raise KeyError(f"no message {which} in chat {chat['id']}")
            return found
        for (cid, _), message in sorted(self._messages.items(), reverse=True):
            if (
                cid == chat["id"]
                and message.get("from", {}).get("id") == self.bot_id
                and "text" in message
                and (thread is None or message.get("message_thread_id") == thread)
            ):
                return message
        return self._new_message(chat, self.bot, "(an earlier bot message)", thread=thread)

    def _take_update_id(self) -> int:
        self._next_update_id += 1
        return self._next_update_id - 1

    def _addresses_bot(self, message: dict[str, Any]) -> bool:
        """Privacy mode: does a group message reach the bot (command, @mention, reply to the bot)?"""
        if message.get("chat", {}).get("type") not in ("group", "supergroup"):
            return True
        text = message.get("text") or message.get("caption") or ""
        reply = message.get("reply_to_message") or {}
        if reply.get("from", {}).get("id") == self.bot_id and "forum_topic_created" not in reply:
            return True
        for entity in message.get("entities") or message.get("caption_entities") or []:
            piece = text.encode("utf-16-le")[2 * entity["offset"] : 2 * (entity["offset"] + entity["length"])]
            word = piece.decode("utf-16-le")
            if entity["type"] == "bot_command" and (
                "@" not in word or word.lower().endswith(f"@{self.bot_username.lower()}")
            ):
                return True
            if entity["type"] == "mention" and word.lower() == f"@{self.bot_username.lower()}":
                return True
        return False

    def _enqueue(self, update: dict[str, Any]) -> None:
        self.injected.append(copy.deepcopy(update))
        bisect.insort(self._updates, update, key=lambda u: u["update_id"])
        self._notify()

    def _acknowledge(self, offset: int) -> None:
        if offset > 0:
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
            self.acked_offset = max(self.acked_offset, offset)
        elif offset < 0:
            self._updates = self._updates[offset:]

    def _allowed(self, update: Any) -> bool:
        if not self._allowed_updates or not isinstance(update, dict):
            return True
        kinds = [k for k in update if k != "update_id"]
        return not kinds or kinds[0] in self._allowed_updates

    def _has_deliverable(self) -> bool:
        return bool(self._forced) or any(self._allowed(u) for u in self._updates)

    def _take_batch(self, limit: int) -> list[Any]:
        forced = self._forced[:limit]
        del self._forced[: len(forced)]
        self._updates = [u for u in self._updates if self._allowed(u)]
        batch = forced + self._updates[: limit - len(forced)]
        batch.sort(
            key=lambda u: u["update_id"] if isinstance(u, dict) and _is_update_id(u.get("update_id")) else 0
        )
        return copy.deepcopy(batch)

    def _terminate_polls(self, description: str) -> None:
        for poll in self._polls:
            if not poll.hung:
                poll.terminated = description
        self._notify()

    async def _webhook_worker(self) -> None:
        while not self._closing:
            await self._wait(lambda: self._webhook is not None and (self._forced or self._updates), None)
            hook = self._webhook
            if self._closing or hook is None:
                continue
            source = self._forced if self._forced else self._updates
            update = source[0]
            if not self._allowed(update):
                source.remove(update)
                continue
            delivered = False

            def hook_changed(hook: _Webhook = hook) -> bool:
                return self._webhook is not hook

            for attempt, delay in enumerate((0.0, *self.webhook_retry_delays)):
                if delay:
                    await self._wait(hook_changed, delay)
                if self._closing or self._webhook is not hook:
                    break
                status = await self._post_update(hook.url, hook.secret_token, update, attempt=attempt)
                if status is not None and 200 <= status < 300:
                    delivered = True
                    break
            if self._closing or (self._webhook is not hook and not delivered):
                continue  # stopped, or the webhook changed: the update stays pending
            if not delivered:
                self.webhook_dropped.append(update)
            with contextlib.suppress(ValueError):
                source.remove(update)
            self._notify()

    async def _post_update(
        self,
        url: str,
        secret: str | None,
        update: Any,
        *,
        attempt: int,
        manual: bool = False,
    ) -> int | None:
        if self._session is None:
            raise RuntimeError("FakeTelegram is not started")
        headers = {"Content-Type": "application/json"}
        if secret is not None:
            headers[SECRET_HEADER] = secret
        status: int | None = None
        error: str | None = None
        try:
            async with self._session.post(
                url,
                data=json.dumps(update),
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=self.webhook_timeout),
            ) as response:
                status = response.status
                await response.read()
        except (aiohttp.ClientError, TimeoutError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        self.webhook_deliveries.append(
            {
                "update_id": update.get("update_id") if isinstance(update, dict) else None,
                "url": url,
                "status": status,
                "error": error,
                "attempt": attempt,
                "secret": secret,
                "manual": manual,
                "time": time.monotonic(),
            }
        )
        if status is None or not 200 <= status < 300:
            message = error or f"Wrong response from the webhook: {status}"
            self._webhook_last_error = (int(time.time()), message)
        self._notify()
        return status


# ------------------------------------------------------------------------------------- helpers


async def _read_params(request: web.Request) -> dict[str, Any]:
    params: dict[str, Any] = dict(request.query)
    if request.can_read_body:
        ctype = request.content_type
        if ctype == "application/json":
            try:
                body = await request.json()
            except ValueError:
                raise ValueError("can't parse JSON object") from None
            if not isinstance(body, dict):
                raise ValueError("JSON object expected")
            params.update(body)
        elif ctype in ("application/x-www-form-urlencoded", "multipart/form-data"):
            form = await request.post()
            for key, value in form.items():
                if isinstance(value, web.FileField):
                    params[key] = {
                        "filename": value.filename,
                        "content_type": value.content_type,
                        "data": value.file.read(),
                    }
                else:
                    params[key] = value
        else:
            await request.read()
    return _decode_params(params)


def _decode_params(params: dict[str, Any]) -> dict[str, Any]:
    decoded: dict[str, Any] = {}
    for key, value in params.items():
        if isinstance(value, str):
            if key in _JSON_FIELDS:
                with contextlib.suppress(ValueError):
                    value = json.loads(value)
            elif key in _INT_FIELDS and re.fullmatch(r"-?\d+", value.strip()):
                value = int(value)
            elif key in _BOOL_FIELDS and value.lower() in ("true", "false", "1", "0"):
                value = value.lower() in ("true", "1")
            elif key in _FLOAT_FIELDS:
                with contextlib.suppress(ValueError):
                    value = float(value)
        decoded[key] = value
    return decoded


def _auto_entities(text: str) -> list[dict[str, Any]]:
    entities: list[dict[str, Any]] = []
    command = _COMMAND_RE.match(text)
    if command:
        entities.append({"type": "bot_command", "offset": 0, "length": utf16_len(command.group())})
    for m in _MENTION_RE.finditer(text):
        if command and m.start() < command.end():
            continue
        entities.append(
            {"type": "mention", "offset": utf16_len(text[: m.start()]), "length": utf16_len(m.group())}
        )
    return entities


def _without_reply(message: dict[str, Any]) -> dict[str, Any]:
    stripped = copy.deepcopy(message)
    stripped.pop("reply_to_message", None)
    return stripped


def _is_update_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _as_int(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _as_float(value: Any, default: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default
