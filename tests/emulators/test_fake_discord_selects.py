"""FakeDiscord's string select menus (component type 3), over plain HTTP: validation as Discord's
reference gives it, and a user's choice as the INTERACTION_CREATE the adapter reads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.emulators.fake_discord import FakeDiscord

from .test_fake_discord_interactions import button, post, row


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def select(custom_id: str = "menu", values: tuple[str, ...] = ("a", "b"), **extra: Any) -> dict[str, Any]:
    return {"type": 3, "custom_id": custom_id, "options": [{"label": v.upper()[:10], "value": v} for v in values], **extra}


async def test_selects_are_validated(http: aiohttp.ClientSession) -> None:
    async with FakeDiscord() as fake:
        path = f"/channels/{fake.general}/messages"
        status, msg = await post(http, fake, path, {"content": "q", "components": [row(select())]})
        assert status == 200 and msg["components"][0]["components"][0]["options"][1]["value"] == "b"
        at = ["components", "0", "components", "0"]
        bad: list[tuple[list[dict[str, Any]], list[str], str]] = [
            ([row(select(), button("x"))], ["components", "0", "components"], "COMPONENT_LAYOUT_WIDTH_EXCEEDED"),
            ([row(select(values=tuple(str(i) for i in range(26))))], [*at, "options"], "BASE_TYPE_BAD_LENGTH"),
            ([row(select(values=()))], [*at, "options"], "BASE_TYPE_BAD_LENGTH"),
            ([row(select(values=("a", "a")))], [*at, "options", "1", "value"],
             "SELECT_COMPONENT_OPTION_VALUE_DUPLICATED"),
            ([row(select(values=("v" * 101,)))], [*at, "options", "0", "value"], "BASE_TYPE_BAD_LENGTH"),
            ([row(select("x" * 101))], [*at, "custom_id"], "BASE_TYPE_BAD_LENGTH"),
            ([row(select(max_values=3))], [*at, "max_values"], "BASE_TYPE_BAD_INT"),
            ([row(select(placeholder="p" * 151))], [*at, "placeholder"], "BASE_TYPE_BAD_LENGTH"),
            ([row(select("m")), row(button("m"))], ["components", "1", "components", "0", "custom_id"],
             "COMPONENT_CUSTOM_ID_DUPLICATED"),
        ]
        for components, where, code in bad:
            status, body = await post(http, fake, path, {"content": "q", "components": components})
            assert status == 400 and body["code"] == 50035, (components, body)
            node = body["errors"]
            for key in where:
                node = node[key]
            assert node["_errors"][0]["code"] == code


async def test_a_choice_carries_its_values(http: aiohttp.ClientSession) -> None:
    async with FakeDiscord() as fake:
        _, msg = await post(http, fake, f"/channels/{fake.general}/messages",
                            {"content": "q", "components": [row(select())]})
        with pytest.raises(AssertionError):
            await fake.user_selects(msg["id"], "menu", ["c"])  # not an option
        with pytest.raises(AssertionError):
            await fake.user_selects(msg["id"], "menu", ["a", "b"])  # max_values is 1
        press = await fake.user_selects(msg["id"], "menu", ["b"])
        assert press.payload["type"] == 3
        assert press.payload["data"] == {"custom_id": "menu", "component_type": 3, "values": ["b"]}
        status, _ = await post(http, fake, f"/interactions/{press.id}/{press.token}/callback", {"type": 6})
        assert status == 204 and press.response_type == 6
