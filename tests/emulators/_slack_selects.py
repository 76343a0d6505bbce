"""Block Kit ``static_select`` menus for ``FakeSlack``, as Slack's reference describes them.

* **The element** (in an ``actions`` block, beside buttons' rules for ``action_id``): ``type:
  static_select``, an optional ``placeholder`` (plain_text, at most 150 characters), ``options`` 1 to
  100, each ``{text: plain_text ≤ 75, value ≤ 150}`` with values unique, and an optional
  ``initial_option`` that must be one of the options exactly. Anything else is ``invalid_blocks``.
* **A choice** (``user_selects``) is a ``block_actions`` payload like a button press (``_slack_interactions``)
  whose action is ``{type: static_select, action_id, block_id, selected_option, placeholder, action_ts}``
  and whose ``state.values`` holds the selection under its block and action ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._slack_interactions import check_action_id

__all__ = ["SelectMethods", "check_static_select"]

MAX_OPTIONS, MAX_OPTION_TEXT, MAX_OPTION_VALUE, MAX_PLACEHOLDER = 100, 75, 150, 150


def _plain(obj: Any, at: str, limit: int) -> str | None:
    if not isinstance(obj, dict) or obj.get("type") != "plain_text" or not isinstance(obj.get("text"), str):
        return f"must be a plain_text object [json-pointer:{at}]"
    if not 1 <= len(obj["text"]) <= limit:
        return f"must be less than {limit + 1} characters [json-pointer:{at}/text]"
    return None


def check_static_select(element: dict[str, Any], at: str, action_ids: set[str]) -> str | None:
    """None when Slack takes this ``static_select``; else the ``invalid_blocks`` error."""
    if "placeholder" in element:
        problem = _plain(element["placeholder"], f"{at}/placeholder", MAX_PLACEHOLDER)
        if problem is not None:
            return problem
    options = element.get("options")
    if not isinstance(options, list) or not 1 <= len(options) <= MAX_OPTIONS:
        return f"must provide 1 to {MAX_OPTIONS} items [json-pointer:{at}/options]"
    values: set[str] = set()
    for k, option in enumerate(options):
        where = f"{at}/options/{k}"
        if not isinstance(option, dict):
            return f"must be an object [json-pointer:{where}]"
        problem = _plain(option.get("text"), f"{where}/text", MAX_OPTION_TEXT)
        if problem is not None:
            return problem
        value = option.get("value")
        if not isinstance(value, str) or not 1 <= len(value) <= MAX_OPTION_VALUE:
            return f"must be less than {MAX_OPTION_VALUE + 1} characters [json-pointer:{where}/value]"
        if value in values:
            return f"option values must be unique [json-pointer:{where}/value]"
        values.add(value)
    if "initial_option" in element and element["initial_option"] not in options:
        return f"must match one of the options [json-pointer:{at}/initial_option]"
    return check_action_id(element, at, action_ids)


class SelectMethods:
    """Mixed into ``FakeSlack`` beside ``InteractionMethods``: a user choosing in a ``static_select``."""

    messages: dict[tuple[str, str], dict[str, Any]]

    if TYPE_CHECKING:  # provided by InteractionMethods
        def press_payload(self, channel: str, ts: str, action_id: str, *, user: str | None = None,
                          stale: bool = False, value: str | None = None) -> dict[str, Any]: ...

        async def deliver_press(self, payload: Any, *, secret: str | None = None) -> dict[str, Any]: ...

    async def user_selects(self, channel: str, ts: str, action_id: str, value: str, *, user: str | None = None,
                           stale: bool = False, secret: str | None = None) -> dict[str, Any]:
        """``user`` chooses the option ``value`` of the ``static_select`` ``action_id`` on message
        ``(channel, ts)``; delivered as ``user_presses`` delivers. ``stale=True``: a client still showing
        an older version of the message chooses in a menu the message lost."""
        message = self.messages.get((channel, ts)) or {}
        selects = [(block.get("block_id"), e) for block in message.get("blocks") or []
                   for e in block.get("elements") or [] if e.get("action_id") == action_id
                   and e.get("type") == "static_select"]
        option = next((o for _, e in selects for o in e["options"] if o["value"] == value), None)
        if option is None:
            if not stale:
                raise AssertionError(f"message {channel}/{ts} offers no option {value!r} in {action_id!r}")
            option = {"text": {"type": "plain_text", "text": "?"}, "value": value}
        payload = self.press_payload(channel, ts, action_id, user=user, stale=True)
        block_id = selects[0][0] if selects else "gone"
        action = {"type": "static_select", "action_id": action_id, "block_id": block_id, "selected_option": option,
                  "action_ts": payload["actions"][0]["action_ts"]}
        if selects and "placeholder" in selects[0][1]:
            action["placeholder"] = selects[0][1]["placeholder"]
        payload["actions"] = [action]
        payload["state"] = {"values": {block_id: {action_id: {"type": "static_select", "selected_option": option}}}}
        return await self.deliver_press(payload, secret=secret)
