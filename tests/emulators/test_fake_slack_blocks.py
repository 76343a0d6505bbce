"""FakeSlack's Block Kit checks and presses, with the real slack-sdk client: what the adapter tests rely on."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from tests.emulators.fake_slack import BOT_TOKEN, FakeSlack


def button(action_id: str = "a", text: str = "A", value: str = "v", **extra: Any) -> dict[str, Any]:
    return {"type": "button", "action_id": action_id, "text": {"type": "plain_text", "text": text}, "value": value,
            **extra}


def actions(*elements: dict[str, Any]) -> dict[str, Any]:
    return {"type": "actions", "elements": list(elements)}


SECTION = {"type": "section", "text": {"type": "plain_text", "text": "q"}}
INVALID: list[list[dict[str, Any]]] = [
    [SECTION] * 51,
    [actions(*[button(str(i)) for i in range(26)])],
    [actions()],
    [actions(button(text="x" * 76))],
    [actions(button(value="v" * 2001))],
    [actions(button("same")), actions(button("same"))],
    [actions(button(style="green"))],
    [{"type": "section", "text": {"type": "plain_text", "text": "x" * 3001}}],
]


async def test_blocks_are_kept_replaced_and_validated() -> None:
    async with FakeSlack() as fake:
        client = AsyncWebClient(token=BOT_TOKEN, base_url=fake.api_base_url)
        resp = await client.chat_postMessage(channel="C1", blocks=[SECTION, actions(button("a"), button("b"))])
        ts = resp["ts"]
        assert [b["type"] for b in fake.messages[("C1", ts)]["blocks"]] == ["section", "actions"]
        for blocks in INVALID:
            with pytest.raises(SlackApiError) as caught:
                await client.chat_postMessage(channel="C1", text="t", blocks=blocks)
            assert caught.value.response["error"] == "invalid_blocks" and caught.value.response["errors"]
        await client.chat_update(channel="C1", ts=ts, text="edited")
        assert len(fake.messages[("C1", ts)]["blocks"]) == 2  # not given: kept
        await client.chat_update(channel="C1", ts=ts, text="done", blocks=[SECTION])
        assert fake.messages[("C1", ts)]["blocks"] == [SECTION]
        with pytest.raises(AssertionError):
            await fake.user_presses("C1", ts, "a")  # no such button any more
        with pytest.raises(AssertionError):
            await fake.user_presses("C1", ts, "a", stale=True)  # stale, but no socket and no events_url
        payload = fake.press_payload("C1", ts, "a", stale=True, value="old", user="U2")
        assert payload["type"] == "block_actions" and payload["user"]["id"] == "U2"
        assert payload["container"] == {"type": "message", "message_ts": ts, "channel_id": "C1", "is_ephemeral": False}
        assert payload["actions"][0]["value"] == "old" and payload["actions"][0]["action_ts"]
