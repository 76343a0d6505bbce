"""The root of ``hermes-gateway`` as a user runs it (a real ``python -m gateway.cli`` process):
``--version``, the global ``--home``, and help screens without type noise."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import typer
from typer.testing import CliRunner

from gateway.cli import app
from storage import StateStore, WriterSettings

ROOT = Path(__file__).resolve().parents[3]


def run(*args: str, cwd: Path = ROOT, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "TELEGRAM_", "XDG_"))}
    full.update(PYTHONPATH=str(ROOT), COLUMNS="200", NO_COLOR="1", **env)
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd, env=full)


def test_version_option_prints_the_package_version() -> None:
    proc = run("--version")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"hermes-gateway {version('hermes-gateway')}\n", "")
    assert run("version").stdout == f"{version('hermes-gateway')}\n"  # the sub-command as before


async def _seed(home: Path, n: int) -> None:
    async with StateStore(home / "state.db", writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        for i in range(n):
            await store.create_session(f"20250101_00000{i}_abcdef0{i}", "cli")


def test_global_home_reaches_every_kind_of_command(tmp_path: Path) -> None:
    home, elsewhere = tmp_path / "mine", tmp_path / "elsewhere"
    asyncio.run(_seed(home, 2))
    asyncio.run(_seed(elsewhere, 1))
    env = {"HERMES_HOME": str(elsewhere), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}

    assert run("--home", str(home), "doctor", **env).stdout.startswith(f"hermes-gateway doctor — {home}\n")
    status = run("--home", str(home), "status", **env)
    assert status.returncode == 3 and f"not running for {home}" in status.stdout
    assert "Total sessions: 2" in run("--home", str(home), "sessions", "stats", **env).stdout
    # A --home after the command wins, as it always did.
    assert "Total sessions: 1" in run("--home", str(home), "sessions", "stats", "--home", str(elsewhere),
                                      **env).stdout
    # The unit `service install` writes runs the daemon on that home.
    units = tmp_path / "units"
    install = run("--home", str(home), "service", "install", "--unit-dir", str(units),
                  "--systemd-run-dir", str(tmp_path / "no-systemd"), "--loginctl", str(tmp_path / "none"), **env)
    assert install.returncode == 0, install.stderr
    assert f'Environment="HERMES_HOME={home}"' in (units / "hermes-gateway.service").read_text()


def test_a_relative_global_home_is_taken_from_where_the_command_runs(tmp_path: Path) -> None:
    proc = run("--home", "rel", "doctor", cwd=tmp_path, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    assert proc.stdout.startswith(f"hermes-gateway doctor — {tmp_path / 'rel'}\n")


def _command_paths(command: object, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = [prefix]
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        paths += _command_paths(sub, (*prefix, name))
    return paths


# What typer prints beside a parameter when left alone: Python types (0.2x) or click's names.
TYPE_NOISE = re.compile(r"<(str|int|float|bool|path|list\[[^>]*\]|int range|float range)>"
                        r"|\b(TEXT|PATH|INTEGER|FLOAT|BOOLEAN)\b|\[x>=|x<=")


def test_help_screens_show_no_types() -> None:
    for path in (("--help",), ("sessions", "list", "--help")):  # as a user sees them
        proc = run(*path)
        assert proc.returncode == 0 and "Usage: hermes-gateway" in proc.stdout, proc.stderr
        assert not TYPE_NOISE.findall(proc.stdout), proc.stdout
    # Every command and group of the tree (in this process: one start-up, not twenty).
    paths = _command_paths(typer.main.get_command(app))
    assert ("sessions", "export") in paths and ("service", "install") in paths and len(paths) > 15
    runner = CliRunner()
    for path in paths:
        result = runner.invoke(app, [*path, "--help"], prog_name="hermes-gateway", env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert "Usage: hermes-gateway" in result.output and not TYPE_NOISE.findall(result.output), result.output
    # Placeholders a reader needs stay.
    assert re.search(r"--home\s+DIR\s", run("status", "--help").stdout)
    assert re.search(r"--limit\s+N\s", run("sessions", "list", "--help").stdout)


def test_the_command_line_loads_no_platform_library_and_no_agent() -> None:
    """Every command starts by importing ``gateway.cli``: it must not load what only the daemon uses
    (the platforms' libraries, the agent, the router's services, the chat commands), which took
    most of a second of every command's start before."""
    heavy = ("aiohttp", "telegram", "discord", "slack_bolt", "slack_sdk", "httpx", "PIL", "pypdf", "jsonschema",
             "asyncpg", "psycopg", "core.agent", "core.llm", "core.tools._registry", "gateway.routing.services",
             "gateway.commands", "gateway.daemon.runner", "gateway.media")
    code = f"import sys, gateway.cli; print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
