"""Skills as commands, /whoami and /restart's refusal on Telegram: the real daemon (in-process) and
python-telegram-bot against ``FakeTelegram``, real skill folders in a temporary HERMES_HOME, the
scripted ``FakeOpenAI`` (it echoes the last user message, and records what it received)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from tests.emulators.fake_telegram import FakeTelegram
from tests.fakes.openai_server import FakeOpenAI

from .test_commands import command

WAIT = 15.0


def write_skill(home: Path, name: str, description: str = "", body: str = "", category: str | None = None,
                files: dict[str, str] | None = None) -> Path:
    folder = home / "skills" / (category or "") / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description or 'Do ' + name}\n---\n"
                                     f"{body or '# ' + name + chr(10) + '1. Step one of ' + name}\n")
    for rel, text in (files or {}).items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def last_user_message(model: FakeOpenAI) -> str:
    messages = model.chat_requests[-1].body["messages"]
    users = [m for m in messages if m["role"] == "user"]
    content = users[-1]["content"]
    return content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)


async def menu_set(fake: FakeTelegram, calls: int = 1) -> list[dict[str, Any]]:
    await fake.wait_for(lambda: len([c for c in fake.command_menu.calls if c["ok"]]) >= calls, WAIT,
                        what="setMyCommands")
    return fake.command_menu.default()


async def test_a_skill_is_a_command_the_model_gets_with_its_instructions(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    from ..conftest import run_telegram_gateway

    home = tmp_path / "h"
    write_skill(home, "deploy-docker", "Deploy a service with docker compose",
                "# Deploy\n1. Build the image.\n2. Run `docker compose up -d` on the host.",
                category="devops", files={"references/hosts.md": "staging: 10.0.0.5"})
    write_skill(home, "help", "A skill that clashes with /help")
    write_skill(home, "v1.2-notes", "A name no command can carry")
    async with run_telegram_gateway(home, fake_telegram, fake_openai.base_url):
        menu = await menu_set(fake_telegram)
        names = [c["command"] for c in menu]
        # built-ins first, then the skills; the clash and the dotted name are not in it
        assert names[:3] == ["help", "status", "stop"] and "whoami" in names and "restart" in names
        assert names[-1] == "deploy_docker" and names.count("help") == 1
        assert {"command": "deploy_docker", "description": "Deploy a service with docker compose"} in menu
        assert not any("v1" in n for n in names)

        help_text = await command(fake_telegram, "/help")
        assert "/deploy_docker — Deploy a service with docker compose" in help_text
        assert "A skill that clashes" not in help_text  # the built-in /help won

        reply = await command(fake_telegram, "/deploy-docker the billing service to staging")
        assert reply.startswith("echo: [The user called the skill \"deploy-docker\" with /deploy_docker")
        sent = last_user_message(fake_openai)
        assert "1. Build the image.\n2. Run `docker compose up -d` on the host." in sent
        assert "description:" not in sent  # the frontmatter stays out: the instructions go in
        assert "references/hosts.md" in sent
        assert sent.rstrip().endswith("The user's request: the billing service to staging")

        # the same through the menu's spelling, without arguments
        await command(fake_telegram, "/deploy_docker")
        assert "carry out the skill as it describes" in last_user_message(fake_openai)


async def test_skills_installed_and_removed_while_the_daemon_runs(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    from ..conftest import run_telegram_gateway

    home = tmp_path / "h"
    old = write_skill(home, "weekly-report", "Write the weekly report")
    async with run_telegram_gateway(home, fake_telegram, fake_openai.base_url):
        await menu_set(fake_telegram)
        calls = len(fake_openai.chat_requests)
        shutil.rmtree(old)
        reply = await command(fake_telegram, "/weekly_report for team A")
        assert reply == ("The skill 'weekly-report' (/weekly_report) was removed. Send /help for the commands "
                         "and skills there are now.")
        assert len(fake_openai.chat_requests) == calls  # no turn ran
        # once the list no longer has it, the command is still known as a removed skill's
        assert (await command(fake_telegram, "/weekly-report")).startswith("The skill behind /weekly_report was "
                                                                            "removed.")

        write_skill(home, "standup", "Summarise yesterday for the standup")
        reply = await command(fake_telegram, "/standup")  # a miss looks again: callable at once
        assert reply.startswith('echo: [The user called the skill "standup"')
        assert "/standup — Summarise yesterday" in await command(fake_telegram, "/help")
        assert "Unknown command /nothing_here" in await command(fake_telegram, "/nothing_here")


async def test_the_menu_follows_skills_installed_while_the_daemon_runs(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    from ..conftest import run_telegram_gateway

    home = tmp_path / "h"
    old = write_skill(home, "weekly-report", "Write the weekly report")
    async with run_telegram_gateway(home, fake_telegram, fake_openai.base_url) as gw:
        assert "weekly_report" in [c["command"] for c in await menu_set(fake_telegram)]
        menus = gw.gateway.runtime.menus if gw.gateway.runtime is not None else None
        assert menus is not None and menus.refresh_seconds == 60.0
        menus.refresh_seconds = 0.0  # the bound between updates, out of this test's way
        shutil.rmtree(old)
        write_skill(home, "standup", "Summarise yesterday")
        await command(fake_telegram, "/help")  # the look that finds the change
        names = [c["command"] for c in await menu_set(fake_telegram, calls=2)]
        assert "standup" in names and "weekly_report" not in names
        await command(fake_telegram, "/help")  # nothing changed: no third update
        await command(fake_telegram, "/status")
        assert len(fake_telegram.command_menu.calls) == 2


async def test_more_than_a_hundred_skills_fill_the_menu_to_its_limit(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    from ..conftest import run_telegram_gateway

    home = tmp_path / "h"
    for i in range(120):
        write_skill(home, f"skill-{i:03d}", f"Skill number {i}")
    write_skill(home, "x" * 40, "A name longer than Telegram takes")
    async with run_telegram_gateway(home, fake_telegram, fake_openai.base_url) as gw:
        menu = await menu_set(fake_telegram)
        assert len(menu) == 100
        assert [c for c in fake_telegram.command_menu.calls if not c["ok"]] == []
        assert gw.gateway.runtime is not None and gw.gateway.runtime.menus is not None
        warnings = gw.gateway.runtime.menus.warnings["telegram"]
        assert any("/skill_119" in w and "at most 100" in w for w in warnings)
        assert any("x" * 40 in w and "1-32 characters" in w for w in warnings)
        # left out of the menu, still a command when typed
        assert (await command(fake_telegram, "/skill_119 now")).startswith('echo: [The user called the skill "skill-119"')
        assert (await command(fake_telegram, "/" + "x" * 40)).startswith("echo: [The user called the skill")


async def test_the_emulator_refuses_more_than_a_hundred_commands(fake_telegram: FakeTelegram) -> None:
    import httpx

    url = f"{fake_telegram.base_url}{fake_telegram.token}/setMyCommands"
    many = [{"command": f"c{i}", "description": "d"} for i in range(101)]
    async with httpx.AsyncClient() as http:
        too_many = (await http.post(url, json={"commands": many})).json()
        bad_name = (await http.post(url, json={"commands": [{"command": "Bad-Name", "description": "d"}]})).json()
        ok = (await http.post(url, json={"commands": many[:100]})).json()
    assert too_many == {"ok": False, "error_code": 400, "description": "Bad Request: BOT_COMMANDS_TOO_MUCH"}
    assert bad_name["description"] == "Bad Request: BOT_COMMAND_INVALID"
    assert ok["ok"] is True and len(fake_telegram.command_menu.default()) == 100


async def test_whoami_for_an_owner_and_for_someone_else(
        tmp_path: Path, fake_openai: FakeOpenAI, fake_telegram: FakeTelegram) -> None:
    from ..conftest import run_telegram_gateway

    fake = fake_telegram
    bob = fake.add_user("Bob")
    home = tmp_path / "h"
    write_skill(home, "standup", "Summarise yesterday")
    owner_id = fake.user["id"]
    async with run_telegram_gateway(home, fake, fake_openai.base_url,
                                    env={"TELEGRAM_ALLOWED_USERS": f"{owner_id},{bob['id']}"},
                                    config={"auth": {"owners": [f"telegram:{owner_id}"]}}):
        mine = await command(fake, "/whoami")
        assert "Platform: telegram" in mine and f"Your id: {owner_id}" in mine and "Owner: yes" in mine
        assert "/restart" in mine and "/standup" in mine and "/help" in mine

        theirs = await command(fake, "/whoami", chat=bob["id"], user=bob)
        assert f"Your id: {bob['id']}" in theirs and "Owner: no" in theirs
        assert "/restart" not in theirs and "/standup" in theirs

        refused = await command(fake, "/restart", chat=bob["id"], user=bob)
        assert refused.startswith("⛔ /restart is for the gateway's owners")
