"""Inline keyboards and their presses on ``FakeTelegram``: ``reply_markup`` checked as the Bot API checks
it, a person pressing a button (a ``callback_query`` update), ``answerCallbackQuery`` and
``editMessageReplyMarkup``.

* ``reply_markup`` of ``sendMessage``, ``editMessageText`` and ``editMessageReplyMarkup`` with an
  ``inline_keyboard``: a list of rows, each a list of buttons with a non-empty ``text`` and exactly
  one action; a ``callback_data`` must be 1-64 bytes of UTF-8, else 400 ``Bad Request:
  BUTTON_DATA_INVALID``; a keyboard that is not a list of lists is 400 ``Bad Request: can't parse
  inline keyboard button: ...``. (``editMessageText`` without ``reply_markup`` takes a message's
  keyboard away, as Telegram does; that is the fake's own handler.)
* ``await user_presses(message, data, user=)``: the person presses the button whose ``callback_data``
  is ``data`` on ``message`` (a message dict, a ``sent`` record, or ``(chat, message_id)``), as it is
  shown now: a button that is not there cannot be pressed (``AssertionError``) unless ``stale=True``
  (a client that has not seen the edit yet). The update carries ``callback_query`` ``{id, from,
  message, chat_instance, data}``; the press is recorded in :attr:`Buttons.presses`.
* ``answerCallbackQuery``: ``callback_query_id`` of a press; an unknown one, one answered before, or
  one older than ``QUERY_TTL`` (15 minutes; ``user_presses(age=)`` makes a press old) is 400 ``Bad
  Request: query is too old and response timeout expired or query ID is invalid``. Recorded in
  :attr:`Buttons.answers` (``{id, text, show_alert, time}``).
* ``editMessageReplyMarkup``: ``chat_id`` + ``message_id`` (``reply_markup`` absent: the keyboard
  goes); the same markup again is "message is not modified". Recorded in :attr:`Buttons.markup_edits`.
"""

from __future__ import annotations

import copy
import itertools
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fake_telegram import FakeTelegram

__all__ = ["BUTTON_DATA_INVALID", "QUERY_INVALID", "QUERY_TTL", "Buttons"]

BUTTON_DATA_INVALID = "Bad Request: BUTTON_DATA_INVALID"
QUERY_INVALID = "Bad Request: query is too old and response timeout expired or query ID is invalid"
#: a callback query can be answered for this long (Telegram's documented 15 minutes)
QUERY_TTL = 15 * 60.0
_ACTIONS = ("callback_data", "url", "switch_inline_query", "switch_inline_query_current_chat", "web_app",
            "login_url", "pay", "copy_text", "callback_game", "switch_inline_query_chosen_chat")


class Buttons:
    def __init__(self, fake: FakeTelegram) -> None:
        self._fake = fake
        self._ids = itertools.count(4_400_000_000_000_000_001)
        #: every press: ``{id, data, user_id, chat_id, message_id, time, update_id}``
        self.presses: list[dict[str, Any]] = []
        #: every accepted answerCallbackQuery: ``{id, text, show_alert, time}``
        self.answers: list[dict[str, Any]] = []
        #: every accepted editMessageReplyMarkup: ``{chat_id, message_id, reply_markup, time}``
        self.markup_edits: list[dict[str, Any]] = []
        self._open: dict[str, float] = {}  # press id -> when it was made (monotonic), until answered

    def install(self) -> None:
        """Check ``reply_markup`` before the fake's own sendMessage and editMessageText run; serve the
        two methods of buttons."""
        from .fake_telegram import BotApiError

        for name in ("sendMessage", "editMessageText"):
            key = name.lower()
            _, inner = self._fake._handlers[key]

            def checked(p: dict[str, Any], inner: Any = inner) -> Any:
                problem = markup_problem(p.get("reply_markup"))
                if problem is not None:
                    raise BotApiError(400, problem)
                return inner(p)

            self._fake.register_method(name, checked)
        self._fake.register_method("answerCallbackQuery", self._m_answer)
        self._fake.register_method("editMessageReplyMarkup", self._m_edit_markup)

    async def user_presses(self, message: Any, data: str, *, user: Any = None, stale: bool = False,
                           age: float = 0.0) -> dict[str, Any]:
        """A person presses the button ``data`` of ``message``; returns the queued update."""
        fake = self._fake
        chat_id, message_id = _where(message)
        current = fake.message(chat_id, message_id)
        if current is None:
            raise AssertionError(f"no message {message_id} in chat {chat_id}")
        if not stale and data not in callback_datas(current):
            raise AssertionError(f"message {message_id} shows no button {data!r} now: {callback_datas(current)}")
        presser = fake._resolve_user(user)
        press_id = str(next(self._ids))
        self._open[press_id] = time.monotonic() - age
        query = {"id": press_id, "from": copy.deepcopy(presser), "message": current,
                 "chat_instance": str(abs(chat_id) * 7 + 3), "data": data}
        update = {"update_id": fake._take_update_id(), "callback_query": query}
        self.presses.append({"id": press_id, "data": data, "user_id": presser["id"], "chat_id": chat_id,
                             "message_id": message_id, "time": time.monotonic(), "update_id": update["update_id"]})
        fake._enqueue(update)
        return copy.deepcopy(update)

    def _m_answer(self, p: dict[str, Any]) -> bool:
        from .fake_telegram import BotApiError

        press_id = str(p.get("callback_query_id") or "")
        made = self._open.pop(press_id, None)
        if made is None or time.monotonic() - made > QUERY_TTL:
            raise BotApiError(400, QUERY_INVALID)
        self.answers.append({"id": press_id, "text": p.get("text"), "show_alert": bool(p.get("show_alert")),
                             "time": time.monotonic()})
        self._fake._notify()
        return True

    def _m_edit_markup(self, p: dict[str, Any]) -> dict[str, Any]:
        from .fake_telegram import NOT_MODIFIED, BotApiError

        fake = self._fake
        chat = fake._chat_param(p)
        problem = markup_problem(p.get("reply_markup"))
        if problem is not None:
            raise BotApiError(400, problem)
        message = fake._messages.get((chat["id"], p.get("message_id")))  # type: ignore[arg-type]
        if message is None:
            raise BotApiError(400, "Bad Request: message to edit not found")
        markup = p.get("reply_markup") if isinstance(p.get("reply_markup"), dict) else None
        if markup == message.get("reply_markup"):
            raise BotApiError(400, NOT_MODIFIED)
        message.pop("reply_markup", None)
        if markup is not None:
            message["reply_markup"] = markup
        self.markup_edits.append({"chat_id": chat["id"], "message_id": message["message_id"],
                                  "reply_markup": markup, "time": time.monotonic()})
        fake._notify()
        return copy.deepcopy(message)


def markup_problem(markup: Any) -> str | None:
    """Why Telegram would refuse an inline keyboard (None: it is fine, or it is not one)."""
    if not isinstance(markup, dict) or "inline_keyboard" not in markup:
        return None
    rows = markup["inline_keyboard"]
    if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
        return "Bad Request: can't parse inline keyboard button: InlineKeyboardButton must be an Object"
    for row in rows:
        for button in row:
            if not isinstance(button, dict) or not isinstance(button.get("text"), str) or not button["text"]:
                return "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"
            if sum(1 for a in _ACTIONS if a in button) != 1:
                return "Bad Request: can't parse inline keyboard button: exactly one of the optional fields must be used"
            data = button.get("callback_data")
            if "callback_data" in button and (not isinstance(data, str) or not 1 <= len(data.encode()) <= 64):
                return BUTTON_DATA_INVALID
    return None


def callback_datas(message: dict[str, Any]) -> list[str]:
    """The ``callback_data`` of every button a message shows now, in order."""
    rows = (message.get("reply_markup") or {}).get("inline_keyboard") or []
    return [b["callback_data"] for row in rows for b in row if isinstance(b, dict) and "callback_data" in b]


def _where(message: Any) -> tuple[int, int]:
    if isinstance(message, tuple):
        chat, message_id = message
        return (chat["id"] if isinstance(chat, dict) else int(chat)), int(message_id)
    chat = message.get("chat_id", message.get("chat"))
    return (chat["id"] if isinstance(chat, dict) else int(chat)), int(message["message_id"])
