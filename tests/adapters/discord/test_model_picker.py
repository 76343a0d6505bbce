"""/model's menu on Discord through the whole daemon: a string select (component type 3) with the
allowed models, the one in force preselected; a choice (INTERACTION_CREATE with ``data.values``)
switches the session, the menu is edited into the outcome, and the next turn reaches the model
server with the new model. In a channel, ``channel_models`` sets the model below a session's own
choice; someone else's choice in a person's menu is refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.choices import choice_data
from tests.emulators.fake_discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI

from .._approval_tool import QUIET_AGENT
from .test_adapter import run_discord_gateway
from .test_approvals_e2e import wait_said, wait_settled

WAIT = 20.0
MODELS = {"allowed": ["fake-model", {"name": "big-model", "label": "Big one"}, "tiny-model"]}


async def wait_menu(fake: FakeDiscord, channel: str, n: int = 1) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        menus = [m for m in fake.channel_messages(channel) if m["author"]["id"] == fake.bot["id"]
                 and m.get("components")]
        return menus[n - 1] if len(menus) >= n else None

    shown: dict[str, Any] = await fake.wait_for(found, WAIT, what=f"a model menu in {channel}")
    return shown


def the_select(menu: dict[str, Any]) -> dict[str, Any]:
    [row] = menu["components"]
    [select] = row["components"]
    return dict(select)


def gateway(tmp_path: Path, fake: FakeDiscord, fake_openai: FakeOpenAI, users: list[dict[str, Any]],
            **discord: Any) -> Any:
    allowed = ",".join([fake.user["id"], *(u["id"] for u in users)])
    return run_discord_gateway(tmp_path / "h", fake, fake_openai.base_url, discord=discord,
                               env={"DISCORD_ALLOWED_USERS": allowed}, config={**QUIET_AGENT, "models": MODELS})


async def test_a_dm_choice_switches_the_model(tmp_path: Path, fake_openai: FakeOpenAI,
                                              fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    async with gateway(tmp_path, fake, fake_openai, []):
        dm = (await fake.user_says("/model"))["channel_id"]
        menu = await wait_menu(fake, dm)
        select = the_select(menu)
        mid = select["custom_id"].split(":")[2]
        assert select["type"] == 3 and select["custom_id"] == f"chs:model:{mid}"
        assert [(o["label"], o["value"], o["default"]) for o in select["options"]] == [
            ("fake-model", choice_data("model", mid, 0), True), ("Big one", choice_data("model", mid, 1), False),
            ("tiny-model", choice_data("model", mid, 2), False)]
        choice = await fake.user_selects(menu["id"], select["custom_id"], [choice_data("model", mid, 1)])
        await wait_settled(fake, menu, "This session now uses Big one (was fake-model)")
        assert choice.response_type == 6 and not choice.failed
        await fake.user_says("hello there")
        await wait_said(fake, dm, "echo: hello there")
        assert [r.body["model"] for r in fake_openai.chat_requests] == ["big-model"]


async def test_in_a_channel_its_model_applies_and_another_persons_choice_is_refused(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> None:
    fake = fake_discord
    bob = fake.add_user("bob")
    async with gateway(tmp_path, fake, fake_openai, [bob], channel_models={fake.general: "tiny-model"}):
        await fake.user_says("hi", chat="general", mention=True)
        await wait_said(fake, fake.general, "echo:")
        assert [r.body["model"] for r in fake_openai.chat_requests] == ["tiny-model"]
        await fake.user_says("/model", chat="general", mention=True)
        menu = await wait_menu(fake, fake.general)
        assert "Model: tiny-model (this channel's" in menu["content"]
        select = the_select(menu)
        mid = select["custom_id"].split(":")[2]
        await fake.user_selects(menu["id"], select["custom_id"], [choice_data("model", mid, 1)], user=bob)
        refusal = await wait_said(fake, fake.general, "This model menu is Alice")
        assert refusal["message_reference"]["message_id"] == menu["id"]
        assert fake.find_message(menu["id"])["components"] != []
        await fake.user_selects(menu["id"], select["custom_id"], [choice_data("model", mid, 1)])
        await wait_settled(fake, menu, "now uses Big one (was tiny-model)")
        await fake.user_says("and now", chat="general", mention=True)
        await wait_said(fake, fake.general, "echo: and now")
        # Bob's session in this channel still follows the channel's model.
        await fake.user_says("me too", chat="general", mention=True, user=bob)
        await wait_said(fake, fake.general, "echo: me too")
        assert [r.body["model"] for r in fake_openai.chat_requests] == ["tiny-model", "big-model", "tiny-model"]
