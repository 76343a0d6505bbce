"""``hermes-gateway doctor`` on skills as commands: a skill named like a built-in command loses it, a
name no command can carry and one a platform's menu refuses are said, with the fix."""

from __future__ import annotations

from pathlib import Path

from tests.adapters.telegram.test_skill_commands import write_skill

from .test_doctor_status import cli, lines_about


def test_doctor_warns_of_skills_that_are_not_commands(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("TELEGRAM_BOT_TOKEN=123:abc\nTELEGRAM_ALLOWED_USERS=1\n")
    write_skill(home, "status", "Clashes with the built-in /status")
    write_skill(home, "deploy-docker", "Fine")
    write_skill(home, "9lives", "Starts with a digit")
    write_skill(home, "a" * 40, "Too long for Telegram's menu")
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    [line] = lines_about(proc.stdout, "skill commands")
    assert line.startswith("[WARN] skill commands: 2 skill(s) callable as /<skill-name>; ")
    assert "skill 'status' is not callable as /status: the built-in /status wins" in line
    assert "skill '9lives' has no command" in line
    assert f"/{'a' * 40} is not in the telegram command menu: a name there is 1-32 characters" in line
    assert "discord" not in line  # Discord is not enabled here
    assert f"fix: rename those skills (their folder and frontmatter name) under {home / 'skills'}" in proc.stdout


def test_doctor_is_quiet_when_every_skill_is_a_command(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    write_skill(home, "standup", "Fine")
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    assert lines_about(proc.stdout, "skill commands") == ["[ok  ] skill commands: 1 skill(s) callable as /<skill-name>"]
