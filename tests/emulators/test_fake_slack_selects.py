"""FakeSlack's ``static_select`` checks and choices, with the real slack-sdk client."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.emulators.fake_slack import BOT_TOKEN, FakeSlack

from .test_fake_slack_blocks import SECTION, actions, button


def option(value: str, text: str | None = None) -> dict[str, Any]:
    return {"text": {"type": "plain_text", "text": text or value.upper()[:10]}, "value": value}


def select(action_id: str = "menu", values: tuple[str, ...] = ("a", "b"), **extra: Any) -> dict[str, Any]:
    return {"type": "static_select", "action_id": action_id, "options": [option(v) for v in values], **extra}


INVALID: list[tuple[dict[str, Any], str]] = [
    (select(values=()), "/elements/0/options"),
    (select(values=tuple(str(i) for i in range(101))), "/elements/0/options"),
    (select(values=("a", "a")), "/elements/0/options/1/value"),
    (select(values=("v" * 151,)), "/elements/0/options/0/value"),
    ({**select(), "options": [option("a", "x" * 76)]}, "/elements/0/options/0/text/text"),
    (select(initial_option=option("c")), "/elements/0/initial_option"),
    (select(placeholder={"type": "mrkdwn", "text": "p"}), "/elements/0/placeholder"),
]


async def test_selects_are_validated_and_a_choice_carries_the_option() -> None:
    async with FakeSlack() as fake:
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_base_url)
        good = select(initial_option=option("b"), placeholder={"type": "plain_text", "text": "Pick"})
        resp = await client.chat_postMessage(channel="C1", text="t", blocks=[SECTION, {**actions(good), "block_id": "B"}])
        for element, pointer in INVALID:
            with pytest.raises(SlackApiError) as caught:
                await client.chat_postMessage(channel="C1", text="t", blocks=[actions(element)])
            assert caught.value.response["error"] == "invalid_blocks"
            assert f"[json-pointer:/blocks/0{pointer}]" in caught.value.response["errors"][0]
        with pytest.raises(SlackApiError):  # an action_id a button already has
            await client.chat_postMessage(channel="C1", text="t", blocks=[actions(button("menu"), select())])
        with pytest.raises(AssertionError):
            await fake.user_selects("C1", resp["ts"], "menu", "nope")  # not an option
        fake.events_url = None
        with pytest.raises(AssertionError):  # nowhere to deliver it: no socket, no events URL
            await fake.user_selects("C1", resp["ts"], "menu", "a")
        payload = fake.presses[-1]["payload"]
        [action] = payload["actions"]
        assert action["type"] == "static_select" and action["block_id"] == "B"
        assert action["selected_option"] == option("a") and action["placeholder"]["text"] == "Pick"
        assert payload["state"]["values"] == {"B": {"menu": {"type": "static_select", "selected_option": option("a")}}}
