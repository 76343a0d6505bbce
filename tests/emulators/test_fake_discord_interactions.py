"""FakeDiscord's components and interactions, over plain HTTP: what the adapter tests rely on."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from tests.emulators.fake_discord import FakeDiscord


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def row(*buttons: dict[str, Any]) -> dict[str, Any]:
    return {"type": 1, "components": list(buttons)}


def button(custom_id: str = "a", label: str = "A", style: int = 1) -> dict[str, Any]:
    return {"type": 2, "style": style, "label": label, "custom_id": custom_id}


async def post(http: aiohttp.ClientSession, fake: FakeDiscord, path: str, body: Any,
               method: str = "POST") -> tuple[int, Any]:
    async with http.request(method, f"{fake.base_url}{path}", json=body,
                            headers={"Authorization": f"Bot {fake.token}"}) as resp:
        return resp.status, (await resp.json() if resp.status != 204 else None)


async def test_components_are_stored_edited_and_validated(http: aiohttp.ClientSession) -> None:
    async with FakeDiscord() as fake:
        path = f"/channels/{fake.general}/messages"
        status, msg = await post(http, fake, path, {"content": "q", "components": [row(button("a"), button("b"))]})
        assert status == 200 and [b["custom_id"] for b in msg["components"][0]["components"]] == ["a", "b"]
        bad: list[tuple[list[dict[str, Any]], list[str], str]] = [
            ([row(button("x" * 101))], ["components", "0", "components", "0", "custom_id"], "BASE_TYPE_BAD_LENGTH"),
            ([row(button(""))], ["components", "0", "components", "0", "custom_id"], "BASE_TYPE_BAD_LENGTH"),
            ([row(*[button(str(i)) for i in range(6)])], ["components", "0", "components"], "BASE_TYPE_BAD_LENGTH"),
            ([row(button(str(i))) for i in range(6)], ["components"], "BASE_TYPE_MAX_LENGTH"),
            ([row(button("a", "L" * 81))], ["components", "0", "components", "0", "label"], "BASE_TYPE_MAX_LENGTH"),
            ([row(button("a"), button("a"))], ["components", "0", "components", "1", "custom_id"],
             "COMPONENT_CUSTOM_ID_DUPLICATED"),
        ]
        for components, where, code in bad:
            status, body = await post(http, fake, path, {"content": "q", "components": components})
            assert status == 400 and body["code"] == 50035 and body["message"] == "Invalid Form Body"
            node = body["errors"]
            for key in where:
                node = node[key]
            assert node["_errors"][0]["code"] == code
        status, edited = await post(http, fake, f"{path}/{msg['id']}", {"content": "done", "components": []}, "PATCH")
        assert status == 200 and edited["components"] == [] and fake.find_message(msg["id"])["content"] == "done"


async def test_a_press_is_answered_once_within_the_window(http: aiohttp.ClientSession) -> None:
    async with FakeDiscord() as fake:
        status, msg = await post(http, fake, f"/channels/{fake.general}/messages",
                                 {"content": "q", "components": [row(button("yes"), button("no", style=4))]})
        with pytest.raises(AssertionError):
            await fake.user_presses(msg["id"], "maybe")  # not on the message
        press = await fake.user_presses(msg["id"], "yes")
        assert press.payload["type"] == 3 and press.payload["data"] == {"custom_id": "yes", "component_type": 2}
        assert press.payload["member"]["user"]["id"] == fake.user["id"] and press.token
        callback = f"/interactions/{press.id}/{press.token}/callback"
        assert (await post(http, fake, f"/interactions/{press.id}/wrong/callback", {"type": 6}))[0] == 404
        status, body = await post(http, fake, callback, {"type": 7, "data": {"content": "ok", "components": []}})
        assert status == 204 and fake.find_message(msg["id"])["content"] == "ok"
        status, body = await post(http, fake, callback, {"type": 6})
        assert status == 400 and body["code"] == 40060
        assert press.response_type == 7 and press.acked_after is not None and not press.failed


async def test_an_unanswered_press_fails(http: aiohttp.ClientSession) -> None:
    async with FakeDiscord() as fake:
        fake.interaction_timeout = 0.1
        status, msg = await post(http, fake, "/channels/{}/messages".format(fake.dm_channel()["id"]),
                                 {"content": "q", "components": [row(button("yes"))]})
        press = await fake.user_presses(msg["id"], "yes")
        assert "user" in press.payload and "member" not in press.payload  # a DM
        await fake.wait_for(lambda: press.failed, 5.0, what="the press to fail")
        status, body = await post(http, fake, f"/interactions/{press.id}/{press.token}/callback", {"type": 6})
        assert status == 404 and body["code"] == 10062
        status, body = await post(http, fake, f"/channels/{fake.general}/messages", {"content": "q"})
        press4 = await fake.user_presses(msg["id"], "yes")
        status, _ = await post(http, fake, f"/interactions/{press4.id}/{press4.token}/callback",
                               {"type": 4, "data": {"content": "new"}})
        assert status == 204 and fake.sent[-1]["method"] == "interaction_message"
