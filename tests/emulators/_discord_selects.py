"""String select menus for ``FakeDiscord``: the component (type 3) on the bot's messages and a user
choosing in it, as Discord's reference describes them.

* **The component**: a string select is alone in its action row; ``custom_id`` 1 to 100 characters
  (unique within the message), ``options`` 1 to 25, each with a ``label`` and a ``value`` of 1 to 100
  characters (values unique), an optional ``description`` (≤ 100) and ``default`` (bool);
  ``placeholder`` ≤ 150; ``min_values`` 0 to 25 (default 1), ``max_values`` 1 to 25 (default 1), at most
  the number of options. Anything else is 400 ``Invalid Form Body`` (code 50035) with the errors tree.
* **A choice** (``user_selects``): a gateway ``INTERACTION_CREATE`` of type 3 (MESSAGE_COMPONENT) whose
  ``data`` is ``{custom_id, component_type: 3, values: [chosen option values]}``; the rest (id, token,
  message, channel, presser, the 3 s to respond) as a button press (``_discord_interactions``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._discord_interactions import DiscordFormError, Press

__all__ = ["SELECT", "SelectMethods", "check_select_row"]

SELECT = 3
MAX_OPTIONS, MAX_TEXT, MAX_PLACEHOLDER = 25, 100, 150


def _error(path: list[str], code: str, message: str) -> DiscordFormError:
    tree: dict[str, Any] = {"_errors": [{"code": code, "message": message}]}
    for key in reversed(path):
        tree = {key: tree}
    return DiscordFormError(tree)


def _text(value: Any, path: list[str], *, required: bool = True, limit: int = MAX_TEXT) -> None:
    if value is None and not required:
        return
    if not isinstance(value, str) or not 1 <= len(value) <= limit:
        raise _error(path, "BASE_TYPE_BAD_LENGTH", f"Must be between 1 and {limit} in length.")


def check_select_row(row: Mapping[str, Any], at: list[str], seen: set[str]) -> None:
    """An action row holding a string select, or ``DiscordFormError`` at the first fault."""
    items = row.get("components")
    if not isinstance(items, list) or len(items) != 1:
        raise _error([*at, "components"], "COMPONENT_LAYOUT_WIDTH_EXCEEDED",
                     "The specified component exceeds the maximum width")
    select, here = items[0], [*at, "components", "0"]
    if not isinstance(select, Mapping):
        raise _error(here, "DICT_TYPE_CONVERT", "Only dictionaries may be used in a DictType")
    custom_id = select.get("custom_id")
    _text(custom_id, [*here, "custom_id"])
    if custom_id in seen:
        raise _error([*here, "custom_id"], "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot be duplicated")
    seen.add(str(custom_id))
    _text(select.get("placeholder"), [*here, "placeholder"], required=False, limit=MAX_PLACEHOLDER)
    options = select.get("options")
    if not isinstance(options, list) or not 1 <= len(options) <= MAX_OPTIONS:
        raise _error([*here, "options"], "BASE_TYPE_BAD_LENGTH", f"Must be between 1 and {MAX_OPTIONS} in length.")
    values: set[str] = set()
    for i, option in enumerate(options):
        where = [*here, "options", str(i)]
        if not isinstance(option, Mapping):
            raise _error(where, "DICT_TYPE_CONVERT", "Only dictionaries may be used in a DictType")
        _text(option.get("label"), [*where, "label"])
        _text(option.get("value"), [*where, "value"])
        _text(option.get("description"), [*where, "description"], required=False)
        if "default" in option and not isinstance(option["default"], bool):
            raise _error([*where, "default"], "BASE_TYPE_BAD_TYPE", "Must be either true or false.")
        if option["value"] in values:
            raise _error([*where, "value"], "SELECT_COMPONENT_OPTION_VALUE_DUPLICATED",
                         "Select component option values must be unique")
        values.add(option["value"])
    low, high = select.get("min_values", 1), select.get("max_values", 1)
    if not isinstance(low, int) or not 0 <= low <= MAX_OPTIONS:
        raise _error([*here, "min_values"], "NUMBER_TYPE_MAX", f"int value should be between 0 and {MAX_OPTIONS}.")
    if not isinstance(high, int) or not max(1, low) <= high <= min(MAX_OPTIONS, len(options)):
        raise _error([*here, "max_values"], "BASE_TYPE_BAD_INT", "Invalid max_values: must not exceed the options")


class SelectMethods:
    """Mixed into ``FakeDiscord`` beside ``InteractionMethods``: a user choosing in a select menu."""

    if TYPE_CHECKING:  # provided by InteractionMethods
        def find_message(self, message_id: str | int) -> dict[str, Any]: ...

        async def user_presses(self, message_id: str | int, custom_id: str, *, user: Mapping[str, Any] | None = None,
                               stale: bool = False, extra: Mapping[str, Any] | None = None) -> Press: ...

    async def user_selects(self, message_id: str | int, custom_id: str, values: Sequence[str], *,
                           user: Mapping[str, Any] | None = None, stale: bool = False) -> Press:
        """``user`` chooses ``values`` in the select ``custom_id`` of message ``message_id``.

        ``stale=True``: a client still showing an older version of the message chooses in a menu the
        message no longer has (the interaction is sent all the same)."""
        msg = self.find_message(message_id)
        selects = [c for row in msg.get("components") or [] for c in row.get("components") or []
                   if c.get("type") == SELECT and c.get("custom_id") == custom_id]
        if not stale:
            if not selects or selects[0].get("disabled"):
                raise AssertionError(f"message {message_id} shows no select menu {custom_id!r}")
            offered = {o["value"] for o in selects[0]["options"]}
            low, high = selects[0].get("min_values", 1), selects[0].get("max_values", 1)
            if not set(values) <= offered or not low <= len(values) <= high:
                raise AssertionError(f"a client cannot choose {list(values)} in {custom_id!r} (offers {offered})")
        data = {"custom_id": custom_id, "component_type": SELECT, "values": list(values)}
        return await self.user_presses(message_id, custom_id, user=user, stale=True, extra={"data": data})
