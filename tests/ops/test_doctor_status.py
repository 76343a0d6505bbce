"""`hermes-gateway status` and `hermes-gateway doctor` as real processes, on a real home and daemon."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI

from ._proc import ROOT, ask, daemon_env, free_port, run_daemon, write_home

TOKEN = "123456:AAbbCCddEEffGGhhIIjjKKllMMnnOOppQQ"


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in daemon_env(home).items() if not k.startswith(("XDG_", "TELEGRAM_"))}
    full.update(env)
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=full)


def lines_about(out: str, name: str) -> list[str]:
    return [line for line in out.splitlines() if f"] {name}" in line]


async def seeded_home(tmp_path: Path, fake_openai: FakeOpenAI) -> Path:
    """A home a daemon has run in and stopped: state.db with a conversation, .env with a token
    and the user allowed to use it."""
    home, port = tmp_path / "home", free_port()
    write_home(home, port, fake_openai.base_url, platforms={"api_server": {"port": port},
                                                            "telegram": {"enabled": False}})
    (home / ".env").write_text(f"TELEGRAM_BOT_TOKEN={TOKEN}\nTELEGRAM_ALLOWED_USERS=42\n")
    (home / ".env").chmod(0o600)
    with run_daemon(home, port) as d:
        await d.wait_healthy()
        assert await asyncio.to_thread(ask, port, "seed") == (200, "echo: seed")
        d.proc.send_signal(signal.SIGTERM)
        assert await d.wait_exit() == 0
    return home


# ------------------------------------------------------------------------ status


def test_status_without_a_daemon_exits_3(tmp_path: Path) -> None:
    proc = cli(tmp_path / "nothing", "status")
    assert proc.returncode == 3 and "not running" in proc.stdout


def test_status_json_without_a_daemon_is_json_only(tmp_path: Path) -> None:
    home = tmp_path / "nothing"
    proc = cli(home, "status", "--json")
    assert proc.returncode == 3 and proc.stderr == ""
    assert json.loads(proc.stdout) == {"running": False, "home": str(home), "last_seen": None, "last_error": None}


def test_status_works_with_a_broken_config_and_says_so_on_stderr(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("gateway:\n  drain_timeout: soon\n")
    proc = cli(home, "status", "--json")
    assert proc.returncode == 3 and json.loads(proc.stdout)["running"] is False
    [warning] = proc.stderr.splitlines()
    assert warning.startswith("hermes-gateway status: warning: configuration error") and "drain_timeout" in warning


async def test_status_of_a_running_daemon_over_the_socket_then_the_state_file(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home, port = tmp_path / "home", free_port()
    write_home(home, port, fake_openai.base_url)
    with run_daemon(home, port) as d:
        await d.wait_healthy()
        proc = await asyncio.to_thread(cli, home, "status")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"running (pid {d.proc.pid}, up " in proc.stdout and "control socket" in proc.stdout
        assert "api-server" in proc.stdout and "Last error: none" in proc.stdout

        data = json.loads((await asyncio.to_thread(cli, home, "status", "--json")).stdout)
        assert data["pid"] == d.proc.pid and "api-server" in data["adapters"]

        # The socket is gone (deleted by hand, or another user's daemon): the published file answers.
        (home / "gateway.sock").unlink()

        async def published_live() -> None:
            while True:
                state = json.loads((home / "gateway.state.json").read_text())
                if state["adapters"].get("api-server", {}).get("state") == "live":
                    return
                await asyncio.sleep(0.05)

        await asyncio.wait_for(published_live(), 30)
        proc = await asyncio.to_thread(cli, home, "status")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"running (pid {d.proc.pid}" in proc.stdout and "gateway.state.json" in proc.stdout
        assert "api-server   live" in proc.stdout

        d.proc.send_signal(signal.SIGTERM)
        assert await d.wait_exit() == 0
    proc = await asyncio.to_thread(cli, home, "status")
    assert proc.returncode == 3 and "not running" in proc.stdout and "last seen" in proc.stdout
    proc = await asyncio.to_thread(cli, home, "status", "--json")
    down = json.loads(proc.stdout)
    assert proc.returncode == 3 and down["running"] is False and down["home"] == str(home)
    assert isinstance(down["last_seen"], float) and down["last_error"] is None


# ------------------------------------------------------------------------ doctor


async def test_doctor_passes_on_a_sound_home_without_printing_the_token(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home = await seeded_home(tmp_path, fake_openai)
    # Telegram on: the token is checked (present) but never shown.
    (home / "config.yaml").write_text((home / "config.yaml").read_text().replace("enabled: false", "enabled: true"))
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert TOKEN not in out and TOKEN.split(":")[1][:6] not in out
    assert lines_about(out, "token TELEGRAM_BOT_TOKEN") == ["[ok  ] token TELEGRAM_BOT_TOKEN: set"]
    assert lines_about(out, "allowlist telegram") == ["[ok  ] allowlist telegram: 1 user id(s) may chat"]
    assert "PRAGMA quick_check: ok" in out and "FTS5 and the trigram tokenizer" in out
    assert "[ok  ] permissions .env: 0600" in out and "[ok  ] permissions state.db: 0600" in out
    assert "[ok  ] wal:" in out and "All checks passed." in out


async def test_doctor_fails_on_loose_permissions_and_a_corrupt_db_and_prints_fixes(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    home = await seeded_home(tmp_path, fake_openai)
    (home / ".env").chmod(0o644)
    db = home / "state.db"
    with db.open("r+b") as f:  # wreck the header: no longer a database
        f.write(b"not a sqlite database at all!!!")
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    out = proc.stdout
    assert proc.returncode == 1
    assert f"[FAIL] permissions .env: {home / '.env'} is 0644" in out and f"fix: chmod 600 {home / '.env'}" in out
    assert lines_about(out, "integrity")[0].startswith("[FAIL] integrity")
    assert "check(s) failed" in out


def test_doctor_reports_a_broken_config_and_a_missing_db(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("gateway:\n  drain_timeout: soon\n")
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    assert proc.returncode == 1
    assert "[FAIL] config:" in proc.stdout and "gateway.drain_timeout" in proc.stdout
    assert "[--  ] state.db:" in proc.stdout


def test_doctor_names_the_reference_keys_a_config_uses_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("group_sessions_per_user: false\ndisplay:\n  resume_display: minimal\n")
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    assert lines_about(proc.stdout, "config") == [
        f"[ok  ] config: {home / 'config.yaml'} is valid; "
        "also accepted: group_sessions_per_user (= gateway.group_sessions_per_user)"]
    assert proc.stdout.count("also accepted") == 1


def test_doctor_without_config_yaml_says_defaults_are_in_use_and_counts_its_warnings(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    assert lines_about(proc.stdout, "config") == [
        f"[ok  ] config: no config.yaml, defaults in use ({home / 'config.yaml'} does not exist)"]
    # No model: a warning, so not "All checks passed.", but no failure either.
    assert "[WARN] model:" in proc.stdout and "All checks passed." not in proc.stdout
    assert proc.stdout.splitlines()[-1] == "No check failed, but 1 warning(s) above." and proc.returncode == 0


def test_doctor_warns_when_a_platform_has_a_token_but_nobody_may_chat(tmp_path: Path) -> None:
    home, xdg = tmp_path / "home", str(tmp_path / "xdg")
    home.mkdir()
    env = home / ".env"

    def doctor(dotenv: str, **environ: str) -> subprocess.CompletedProcess[str]:
        env.write_text(f"TELEGRAM_BOT_TOKEN={TOKEN}\n{dotenv}")
        env.chmod(0o600)
        return cli(home, "doctor", XDG_CONFIG_HOME=xdg, **environ)

    proc = doctor("")
    assert lines_about(proc.stdout, "allowlist telegram") == [
        "[WARN] allowlist telegram: telegram has a token but nobody may chat: no allowlist, no allow-all"]
    assert f"fix: add TELEGRAM_ALLOWED_USERS=<your telegram user id> (or GATEWAY_ALLOWED_USERS) to {env}" in proc.stdout
    assert proc.returncode == 0 and "All checks passed." not in proc.stdout and TOKEN not in proc.stdout
    assert lines_about(doctor("GATEWAY_ALLOWED_USERS=7, 8\n").stdout, "allowlist telegram") == [
        "[ok  ] allowlist telegram: 2 user id(s) may chat"]
    assert lines_about(doctor("", TELEGRAM_ALLOW_ALL_USERS="true").stdout, "allowlist telegram") == [
        "[ok  ] allowlist telegram: anyone may chat (allow-all is on)"]


def test_doctor_warns_about_linger_when_a_user_unit_is_installed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    xdg = tmp_path / "xdg"
    (xdg / "systemd" / "user").mkdir(parents=True)
    (xdg / "systemd" / "user" / "hermes-gateway.service").write_text("[Service]\n")
    loginctl = tmp_path / "loginctl"
    loginctl.write_text('#!/bin/sh\necho "Linger=no"\n')
    loginctl.chmod(loginctl.stat().st_mode | stat.S_IXUSR)
    proc = cli(home, "doctor", "--loginctl", str(loginctl), XDG_CONFIG_HOME=str(xdg))
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    assert "[WARN] linger:" in proc.stdout and f"fix: sudo loginctl enable-linger {user}" in proc.stdout
    assert proc.returncode == 0  # a warning, not a failure
    assert "All checks passed." not in proc.stdout


def test_doctor_checks_db_on_a_copy_made_by_sqlite(tmp_path: Path) -> None:
    """quick_check runs read-only: a healthy db made by another tool passes and is not modified."""
    home = tmp_path / "home"
    home.mkdir()
    db = home / "state.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    os.chmod(db, 0o600)
    before = db.read_bytes()
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    assert "[ok  ] integrity: PRAGMA quick_check: ok" in proc.stdout
    assert db.read_bytes() == before


def test_doctor_reads_a_db_whose_path_looks_like_a_uri(tmp_path: Path) -> None:
    """'#', '?' and '%41' in the home would cut or rewrite an unquoted file: URI."""
    home = tmp_path / "my home #1 ?x=%41"
    home.mkdir()
    db = home / "state.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    os.chmod(db, 0o600)
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    assert "[ok  ] integrity: PRAGMA quick_check: ok" in proc.stdout, proc.stdout
    assert proc.returncode == 0, proc.stdout
    assert sorted(p.name for p in home.iterdir()) == ["state.db"]  # read-only: no journal, no WAL files
    # Unquoted, '#' ends the path: SQLite would create (and "check") an empty file named "my home ".
    assert [p.name for p in tmp_path.iterdir()] == [home.name]


def test_doctor_warns_when_the_installed_unit_stops_too_soon_for_the_config(tmp_path: Path) -> None:
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    home.mkdir()
    (home / "config.yaml").write_text("gateway:\n  drain_timeout: 20\n")
    install = ["service", "install", "--systemd-run-dir", str(tmp_path / "no-systemd")]
    assert cli(home, *install, XDG_CONFIG_HOME=str(xdg)).returncode == 0
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(xdg))
    assert lines_about(proc.stdout, "user unit TimeoutStopSec") == [
        "[ok  ] user unit TimeoutStopSec: 45 s >= the 45 s this configuration needs"]

    # A longer drain later: the unit written at install time would be SIGKILLed mid-drain.
    (home / "config.yaml").write_text("gateway:\n  drain_timeout: 60\n")
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(xdg))
    [line] = lines_about(proc.stdout, "user unit TimeoutStopSec")
    assert line.startswith("[WARN]") and "45 s" in line and "need 85 s" in line
    assert f"fix: re-run: hermes-gateway service install --user --home {home}" in proc.stdout
    assert proc.returncode == 0  # a warning: the daemon still runs

    assert cli(home, *install, XDG_CONFIG_HOME=str(xdg)).returncode == 0
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(xdg))
    assert lines_about(proc.stdout, "user unit TimeoutStopSec")[0].startswith("[ok  ]")


# ------------------------------------------------------------------ open files


def doctor_with_fd_limit(home: Path, limit: int, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in daemon_env(home).items() if not k.startswith(("XDG_", "TELEGRAM_"))}
    full.update(env)

    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    return subprocess.run([sys.executable, "-m", "gateway.cli", "doctor"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=full, preexec_fn=lower)


def test_doctor_warns_about_a_low_open_file_limit_of_this_shell(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    low = doctor_with_fd_limit(home, 1024, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    [line] = lines_about(low.stdout, "open files")
    assert line.startswith("[WARN]") and "started from this shell may open 1024 files" in line
    assert "LimitNOFILE=65536" in low.stdout and "ulimit -n 65536" in low.stdout
    assert low.returncode == 0  # a warning
    enough = doctor_with_fd_limit(home, 8192, XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    assert lines_about(enough.stdout, "open files") == ["[ok  ] open files: a daemon started from this shell "
                                                        "may open 8192 files"]


async def test_doctor_reads_the_running_daemons_own_limit(tmp_path: Path, fake_openai: FakeOpenAI) -> None:
    home, port = tmp_path / "home", free_port()
    write_home(home, port, fake_openai.base_url)
    with run_daemon(home, port, fd_limit=512) as d:
        await d.wait_healthy()
        proc = cli(home, "doctor", XDG_CONFIG_HOME=str(tmp_path / "xdg"))  # this shell's limit is higher
        [line] = lines_about(proc.stdout, "open files")
        assert line.startswith("[WARN]") and f"the daemon (pid {d.proc.pid}) may open 512 files" in line


def test_doctor_warns_when_the_installed_unit_sets_no_open_file_limit(tmp_path: Path) -> None:
    home, xdg = tmp_path / "home", tmp_path / "xdg"
    home.mkdir()
    install = ["service", "install", "--systemd-run-dir", str(tmp_path / "no-systemd")]
    assert cli(home, *install, XDG_CONFIG_HOME=str(xdg)).returncode == 0
    assert lines_about(cli(home, "doctor", XDG_CONFIG_HOME=str(xdg)).stdout, "open files")[0].startswith("[ok  ]")
    unit = xdg / "systemd" / "user" / "hermes-gateway.service"
    unit.write_text(unit.read_text().replace("LimitNOFILE=65536\n", ""))  # as units installed before it
    proc = cli(home, "doctor", XDG_CONFIG_HOME=str(xdg))
    [line] = lines_about(proc.stdout, "open files")
    assert line.startswith("[WARN]") and "sets no LimitNOFILE" in line
    assert "re-run `hermes-gateway service install`" in proc.stdout
