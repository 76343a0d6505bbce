"""/model's menu on Slack through the whole daemon: a Block Kit ``static_select`` with the allowed
models (the one in force preselected); a choice (``block_actions`` with ``selected_option``, over
Socket Mode or, in HTTP mode, a signed form POST) switches the session, the menu is edited into the
outcome, and the next turn reaches the model server with the new model. Someone else's choice in a
person's menu is refused and changes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.choices import choice_data
from tests.emulators.fake_slack import BOT_USER, FakeSlack
from tests.fakes.openai_server import FakeOpenAI

from .._approval_tool import QUIET_AGENT
from .test_adapter import USER, run_slack_gateway
from .test_approvals_e2e import BOB, DM, wait_said, wait_settled

WAIT = 20.0
MODELS = {"allowed": ["fake-model", {"name": "big-model", "label": "Big one"}, "tiny-model"]}


def gateway(tmp_path: Path, fake: FakeSlack, fake_openai: FakeOpenAI, mode: str) -> Any:
    return run_slack_gateway(tmp_path / "h", fake, fake_openai.base_url, mode=mode,
                             env={"SLACK_ALLOWED_USERS": f"{USER},{BOB}"}, config={**QUIET_AGENT, "models": MODELS})


async def wait_menu(fake: FakeSlack, channel: str) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        return next((m for (c, _), m in fake.messages.items() if c == channel and m.get("user") == BOT_USER
                     and any(b.get("type") == "actions" for b in m.get("blocks") or [])), None)

    shown: dict[str, Any] = await fake.wait_for(found, WAIT, what=f"a model menu in {channel}")
    [actions] = [b for b in shown["blocks"] if b["type"] == "actions"]
    [select] = actions["elements"]
    return {**shown, "channel": channel, "select": select, "menu_id": actions["block_id"].removeprefix("hermes_menu_")}


async def choose(fake: FakeSlack, menu: dict[str, Any], index: int, *, user: str | None = None) -> None:
    chosen = await fake.user_selects(menu["channel"], menu["ts"], menu["select"]["action_id"],
                                     choice_data("model", menu["menu_id"], index), user=user)
    if "envelope_id" in chosen:
        await fake.wait_ack(chosen["envelope_id"], 3.0)
    else:
        assert chosen["status"] == 200


async def test_a_choice_over_socket_mode_switches_the_model(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    async with gateway(tmp_path, fake, fake_openai, "socket"):
        await fake.slash_command("/model", "", chat=DM)
        menu = await wait_menu(fake, DM)
        select = menu["select"]
        assert select["type"] == "static_select" and select["action_id"] == "hermes_menu_model"
        assert [(o["text"]["text"], o["value"]) for o in select["options"]] == [
            ("fake-model", choice_data("model", menu["menu_id"], 0)),
            ("Big one", choice_data("model", menu["menu_id"], 1)),
            ("tiny-model", choice_data("model", menu["menu_id"], 2))]
        assert select["initial_option"] == select["options"][0]
        assert "Model: fake-model" in menu["blocks"][0]["text"]["text"]
        await choose(fake, menu, 1)
        await wait_settled(fake, menu, "This session now uses Big one (was fake-model)")
        await fake.user_says("hello there", chat=DM)
        await wait_said(fake, DM, "echo: hello there")
        assert [r.body["model"] for r in fake_openai.chat_requests] == ["big-model"]


async def test_in_http_mode_someone_elses_choice_is_refused(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    async with gateway(tmp_path, fake, fake_openai, "http"):
        await fake.user_says("/model", chat=DM)
        menu = await wait_menu(fake, DM)
        await choose(fake, menu, 2, user=BOB)
        await wait_said(fake, DM, "This model menu is")
        assert any(b["type"] == "actions" for b in fake.messages[(DM, menu["ts"])]["blocks"])
        # A forged choice (a wrong signature) is refused by the adapter and changes nothing.
        forged = await fake.user_selects(DM, menu["ts"], "hermes_menu_model", choice_data("model", menu["menu_id"], 2),
                                         secret="wrong")
        assert forged["status"] == 401
        await choose(fake, menu, 2)
        await wait_settled(fake, menu, "now uses tiny-model")
        await fake.user_says("and now", chat=DM)
        await wait_said(fake, DM, "echo: and now")
        assert [r.body["model"] for r in fake_openai.chat_requests] == ["tiny-model"]
