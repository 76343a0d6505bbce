"""Slash commands on Discord: the gateway's commands and the installed skills registered as the
application's commands (a bulk overwrite FakeDiscord checks as Discord does), and an invocation
answered within the interaction's 3 s and routed like the typed command. The real daemon (in-process),
discord.py against ``FakeDiscord``, the scripted ``FakeOpenAI``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.emulators.fake_discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI

from ..telegram.test_skill_commands import last_user_message, write_skill
from .test_adapter import WAIT, run_discord_gateway


def said(dm: str) -> Any:
    def here(m: dict[str, Any]) -> bool:
        return bool(m["chat_id"] == dm and m["method"] in ("create_message", "interaction_message"))

    return here


async def registered(fake: FakeDiscord) -> list[dict[str, Any]]:
    await fake.wait_for(lambda: any(o["status"] == 200 for o in fake.app_commands.overwrites), WAIT,
                        what="the application's commands")
    return fake.app_commands.registered[None]


async def test_skills_are_slash_commands_and_an_invocation_runs_the_skill(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    home = tmp_path / "h"
    write_skill(home, "deploy-docker", "Deploy a service with docker compose " + "and more words " * 10,
                "# Deploy\n1. Build the image.")
    write_skill(home, "Ünïcode-Name", "Refused by the name rules")  # has no command at all
    async with run_discord_gateway(home, fake, fake_openai.base_url):
        commands = await registered(fake)
        names = [c["name"] for c in commands]
        assert names[:3] == ["help", "status", "stop"] and "whoami" in names and names[-1] == "deploy_docker"
        deploy = commands[-1]
        assert len(deploy["description"]) == 100 and deploy["description"].endswith("…")  # cut to Discord's limit
        assert deploy["options"] == [{"type": 3, "name": "args", "description": "what you want done (optional)",
                                      "required": False}]
        assert [o["status"] for o in fake.app_commands.overwrites] == [200]

        dm = fake.dm_channel()["id"]
        before = len([m for m in fake.sent if said(dm)(m)])
        press = await fake.app_commands.user_invokes("deploy_docker", "billing to staging")
        sent = await fake.wait_sent(before + 2, timeout=WAIT, match=said(dm))
        assert press.response_type == 4 and not press.failed  # answered within the 3 s
        assert sent[before]["text"] == "`/deploy_docker billing to staging`"
        assert sent[before + 1]["text"].startswith('echo: [The user called the skill "deploy-docker"')
        received = last_user_message(fake_openai)
        assert "1. Build the image." in received and received.rstrip().endswith("The user's request: billing to staging")

        # a built-in through its slash command, without the option
        before = len([m for m in fake.sent if said(dm)(m)])
        await fake.app_commands.user_invokes("whoami")

        def answered() -> bool:
            shown = [m["text"] for m in fake.sent if said(dm)(m)][before:]
            return "`/whoami`" in shown and any("Platform: discord" in t and "Owner: no" in t for t in shown)

        await fake.wait_for(answered, WAIT, what="/whoami's answer")


async def test_past_a_hundred_and_names_discord_refuses_are_left_out(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord) -> None:
    home = tmp_path / "h"
    for i in range(110):
        write_skill(home, f"skill-{i:03d}", f"Skill number {i}")
    write_skill(home, "b" * 33, "One character past Discord's 32")
    async with run_discord_gateway(home, fake_discord, fake_openai.base_url) as gw:
        commands = await registered(fake_discord)
        assert len(commands) == 100 and [o["status"] for o in fake_discord.app_commands.overwrites] == [200]
        assert gw.gateway.runtime is not None and gw.gateway.runtime.menus is not None
        warnings = gw.gateway.runtime.menus.warnings["discord"]
        assert any("b" * 33 in w and "1-32 characters of a-z, 0-9, - and _" in w for w in warnings)
        assert any("/skill_109" in w and "at most 100" in w for w in warnings)


async def test_the_emulator_checks_bulk_overwrites_as_discord_does(fake_discord: FakeDiscord) -> None:
    fake = fake_discord
    url = f"{fake.base_url}/applications/{fake.application_id}/commands"
    auth = {"Authorization": f"Bot {fake.token}"}

    def cmd(name: str, description: str = "d") -> dict[str, Any]:
        return {"name": name, "description": description, "type": 1}

    async with httpx.AsyncClient() as http:
        too_many = await http.put(url, json=[cmd(f"c{i}") for i in range(101)], headers=auth)
        upper = await http.put(url, json=[cmd("Help")], headers=auth)
        long_desc = await http.put(url, json=[cmd("ok", "x" * 101)], headers=auth)
        twice = await http.put(url, json=[cmd("a"), cmd("a")], headers=auth)
        no_token = await http.put(url, json=[cmd("a")])
        ok = await http.put(url, json=[cmd(f"c{i}") for i in range(100)], headers=auth)
        listed = await http.get(url, headers=auth)
    assert too_many.status_code == 400 and too_many.json()["code"] == 30032
    assert upper.json()["errors"] == {"0": {"name": {"_errors": [{"code": "APPLICATION_COMMAND_INVALID_NAME",
                                                                  "message": "Command name is invalid"}]}}}
    assert long_desc.json()["errors"]["0"]["description"]["_errors"][0]["code"] == "BASE_TYPE_BAD_LENGTH"
    assert twice.json()["errors"]["1"]["name"]["_errors"][0]["code"] == "APPLICATION_COMMANDS_DUPLICATE_NAME"
    assert no_token.status_code == 401
    assert ok.status_code == 200 and len(listed.json()) == 100
    assert [o["status"] for o in fake.app_commands.overwrites] == [400, 400, 400, 400, 401, 200]
