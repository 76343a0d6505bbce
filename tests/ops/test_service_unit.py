"""The systemd unit: the shipped file and what `service install` renders pass `systemd-analyze verify`;
the installer, status and uninstall run as real processes against stand-in systemctl/loginctl."""

from __future__ import annotations

import math
import os
import pwd
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.cli.service import UnitOptions, _default_home, render_unit, required_stop_timeout
from gateway.cli.systemd_unit import LIMIT_NOFILE, exec_start_line, installed_limit_nofile
from gateway.config import GatewayConfig

from ._proc import ROOT

SHIPPED = ROOT / "systemd" / "hermes-gateway.service"


def _analyze() -> str | None:
    found = shutil.which("systemd-analyze")
    if found or os.geteuid() != 0 or shutil.which("apt-get") is None:
        return found
    # Debian's package brings systemd-analyze; it does not start systemd.
    subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "systemd"],
                   capture_output=True, timeout=600, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    return shutil.which("systemd-analyze")


@pytest.fixture(scope="session")
def systemd_analyze() -> str:
    found = _analyze()
    if found is None:
        pytest.skip("systemd-analyze is not installed and could not be installed (needs root and apt-get)")
    return found


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A fake $HOME with the console script where the shipped unit expects it, and a user runtime dir."""
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "hermes-gateway").symlink_to(Path(sys.executable).with_name("hermes-gateway")
                                                            if Path(sys.executable).with_name("hermes-gateway").exists()
                                                            else Path(sys.executable))
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    yield {"home": home, "runtime": runtime}


def verify(analyze: str, unit: Path, sandbox: dict[str, Path], *, user: bool) -> str:
    env = {**os.environ, "HOME": str(sandbox["home"]), "XDG_RUNTIME_DIR": str(sandbox["runtime"]),
           "SYSTEMD_LOG_LEVEL": "notice"}
    args = [analyze, *(["--user"] if user else []), "verify", str(unit)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    # verify exits 0 on unknown keys and unparsable values (it only warns): any output is a finding.
    assert proc.returncode == 0, proc.stderr
    return (proc.stdout + proc.stderr).strip()


def unit_fields(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


def test_shipped_unit_passes_systemd_analyze_verify(systemd_analyze: str, sandbox: dict[str, Path]) -> None:
    assert verify(systemd_analyze, SHIPPED, sandbox, user=True) == ""


def test_verify_would_catch_a_broken_unit(systemd_analyze: str, sandbox: dict[str, Path], tmp_path: Path) -> None:
    broken = tmp_path / "hermes-gateway.service"
    broken.write_text(SHIPPED.read_text().replace("KillMode=mixed", "KilMode=mixed\nWatchdogSec=soon"))
    out = verify(systemd_analyze, broken, sandbox, user=True)
    assert "KilMode" in out and "soon" in out


def test_shipped_unit_has_the_required_settings() -> None:
    f = unit_fields(SHIPPED.read_text())
    assert f["Type"] == "notify" and f["Restart"] == "on-failure" and f["KillMode"] == "mixed"
    assert f["RestartPreventExitStatus"] == "78" and int(f["WatchdogSec"]) > 0 and int(f["RestartSec"]) > 0
    # What `service install` would write for the default gateway.drain_timeout and disconnect_timeout.
    assert int(f["TimeoutStopSec"]) == required_stop_timeout(GatewayConfig()) == 45
    assert f["NoNewPrivileges"] == "true" and f["ProtectSystem"] == "strict" and f["PrivateTmp"] == "true"
    assert f["ProtectHome"] == "read-only" and f["ReadWritePaths"] == "%h/.hermes" and f["UMask"] == "0077"
    # The daemon reads .env itself: systemd's EnvironmentFile= would parse its quotes by other rules.
    assert "EnvironmentFile" not in f
    assert f["LimitNOFILE"] == str(LIMIT_NOFILE) == "65536"  # a few thousand connections fit
    assert not any(k.endswith(("TOKEN", "KEY", "SECRET")) for k in f.get("Environment", "").split())


@pytest.mark.parametrize("system", [False, True])
def test_rendered_units_pass_verify(systemd_analyze: str, sandbox: dict[str, Path], tmp_path: Path,
                                    system: bool) -> None:
    home = Path("/home/someone/.hermes") if system else sandbox["home"] / ".hermes"
    text = render_unit(UnitOptions(home, f"{sys.executable} -m gateway.cli run --home {home}", system=system,
                                   user="root" if system else None, drain_timeout=120, disconnect_timeout=30))
    unit = tmp_path / "hermes-gateway.service"
    unit.write_text(text)
    assert verify(systemd_analyze, unit, sandbox, user=not system) == ""
    f = unit_fields(text)
    assert int(f["TimeoutStopSec"]) == 120 + 30 + 15  # drain + disconnect + the writer's margin
    assert f["ReadWritePaths"] == f'"{home}"' and "EnvironmentFile" not in f
    assert ("User" in f) is system
    assert f["LimitNOFILE"] == "65536" and installed_limit_nofile(text) == 65536


HOSTILE = 'my home 100% "q" $x'


def naive_unit(home: Path) -> str:
    """What the installer used to write: paths pasted in as they are."""
    return "\n".join(["[Service]", "Type=notify", f"Environment=HERMES_HOME={home}", f"EnvironmentFile=-{home}/.env",
                      f"WorkingDirectory={home}", f"ExecStart={sys.executable} -m gateway.cli run",
                      f"ReadWritePaths={home}", ""])


@pytest.mark.parametrize("system", [False, True])
def test_a_home_with_spaces_quotes_dollar_and_percent_passes_verify(
    systemd_analyze: str, sandbox: dict[str, Path], tmp_path: Path, system: bool
) -> None:
    home = tmp_path / HOSTILE
    home.mkdir()
    unit = tmp_path / "hermes-gateway.service"
    # The check is real: pasted in raw, this home breaks ReadWritePaths= and reads as a specifier.
    unit.write_text(naive_unit(home))
    env = {**os.environ, "HOME": str(sandbox["home"]), "XDG_RUNTIME_DIR": str(sandbox["runtime"])}
    raw = subprocess.run([systemd_analyze, *([] if system else ["--user"]), "verify", str(unit)],
                         capture_output=True, text=True, timeout=120, env=env)
    assert raw.returncode != 0 or "not absolute" in raw.stderr, raw.stderr

    text = render_unit(UnitOptions(home, exec_start_line([sys.executable, "-m", "gateway.cli", "run", "--home",
                                                          str(home)]),
                                   system=system, user="root" if system else None))
    unit.write_text(text)
    assert verify(systemd_analyze, unit, sandbox, user=not system) == ""
    f = unit_fields(text)
    escaped = str(home).replace("%", "%%")
    assert f["WorkingDirectory"] == escaped and "EnvironmentFile" not in f
    inner = escaped.replace('"', '\\"')
    assert f["ReadWritePaths"] == f'"{inner}"' and f["Environment"] == f'"HERMES_HOME={inner}"'
    assert f["ExecStart"].endswith(f'--home "{inner.replace("$", "$$")}"')


def test_a_home_with_a_newline_is_refused(tmp_path: Path, install_env: dict[str, str]) -> None:
    proc = cli("service", "install", "--home", str(tmp_path / "a\nb"), "--unit-dir", str(tmp_path / "u"),
               env=install_env)
    assert proc.returncode == 1 and "control character" in proc.stderr
    assert not (tmp_path / "u").exists() and not (tmp_path / "a\nb").exists()


# ------------------------------------------------------------------ the installer as a process


def fake_tool(bin_dir: Path, name: str, log: Path, stdout: str = "") -> str:
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho "{name} $*" >> "{log}"\nprintf "%s" "{stdout}"\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=env)


@pytest.fixture
def install_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "TELEGRAM_", "XDG_"))}
    env.update(PYTHONPATH=str(ROOT), XDG_CONFIG_HOME=str(tmp_path / "xdg"), HERMES_HOME=str(tmp_path / "hh"))
    return env


def test_install_without_systemd_writes_the_unit_secures_env_and_prints_the_commands(
    tmp_path: Path, install_env: dict[str, str], systemd_analyze: str, sandbox: dict[str, Path]
) -> None:
    home = tmp_path / "hh"
    home.mkdir()
    secret = "123456:AAbbCCddEEffGGhhIIjjKKllMMnnOOppQQ"
    (home / ".env").write_text(f"TELEGRAM_BOT_TOKEN={secret}\n")
    (home / ".env").chmod(0o644)
    log = tmp_path / "calls.log"
    bins = tmp_path / "bin"
    bins.mkdir()
    loginctl = fake_tool(bins, "loginctl", log, "Linger=no")
    proc = cli("service", "install", "--loginctl", loginctl, "--systemd-run-dir", str(tmp_path / "absent"),
               env=install_env)
    assert proc.returncode == 0, proc.stderr
    unit = tmp_path / "xdg" / "systemd" / "user" / "hermes-gateway.service"
    text = unit.read_text()
    assert secret not in text and secret not in proc.stdout + proc.stderr
    f = unit_fields(text)
    assert f["Environment"] == f'"HERMES_HOME={home}"' and "EnvironmentFile" not in f
    assert f["ExecStart"].endswith(f"run --home {home}")
    assert stat.S_IMODE((home / ".env").stat().st_mode) == 0o600
    assert "systemctl --user daemon-reload && systemctl --user enable --now hermes-gateway.service" in proc.stdout
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    assert f"sudo loginctl enable-linger {user}" in proc.stdout
    assert log.read_text().splitlines() == [f"loginctl show-user {user} -p Linger"]
    assert verify(systemd_analyze, unit, sandbox, user=True) == ""


def test_install_status_uninstall_with_systemd_running(tmp_path: Path, install_env: dict[str, str]) -> None:
    log = tmp_path / "calls.log"
    bins = tmp_path / "bin"
    bins.mkdir()
    systemctl = fake_tool(bins, "systemctl", log, "active (running)")
    loginctl = fake_tool(bins, "loginctl", log, "Linger=yes")
    run_dir = tmp_path / "run-systemd"
    run_dir.mkdir()
    common = ["--systemctl", systemctl, "--systemd-run-dir", str(run_dir)]
    unit_dir = tmp_path / "units"

    proc = cli("service", "install", "--unit-dir", str(unit_dir), "--loginctl", loginctl, *common, env=install_env)
    assert proc.returncode == 0, proc.stderr
    assert (unit_dir / "hermes-gateway.service").exists()
    assert "enable-linger" not in proc.stdout
    calls = log.read_text().splitlines()
    assert calls[:3] == ["systemctl --user show-environment", "systemctl --user daemon-reload",
                         "systemctl --user enable --now hermes-gateway.service"]

    proc = cli("service", "status", "--unit-dir", str(unit_dir), *common, env=install_env)
    assert proc.returncode == 0 and "active (running)" in proc.stdout
    assert log.read_text().splitlines()[-1] == "systemctl --user status --no-pager hermes-gateway.service"

    proc = cli("service", "uninstall", "--unit-dir", str(unit_dir), *common, env=install_env)
    assert proc.returncode == 0, proc.stderr
    assert not (unit_dir / "hermes-gateway.service").exists()
    assert log.read_text().splitlines()[-2:] == ["systemctl --user disable --now hermes-gateway.service",
                                                 "systemctl --user daemon-reload"]

    proc = cli("service", "status", "--unit-dir", str(unit_dir), *common, env=install_env)
    assert proc.returncode == 3 and "Not installed" in proc.stdout


def test_install_refuses_a_broken_config_with_78(tmp_path: Path, install_env: dict[str, str]) -> None:
    home = tmp_path / "hh"
    home.mkdir()
    (home / "config.yaml").write_text("gateway:\n  drain_timeout: soon\n")
    proc = cli("service", "install", "--unit-dir", str(tmp_path / "u"), env=install_env)
    assert proc.returncode == 78 and "gateway.drain_timeout" in proc.stderr
    assert not (tmp_path / "u").exists()


def test_install_takes_the_stop_timeout_from_the_config(tmp_path: Path, install_env: dict[str, str]) -> None:
    home = tmp_path / "hh"
    home.mkdir()
    (home / "config.yaml").write_text("gateway:\n  drain_timeout: 50\n  disconnect_timeout: 25\n")
    proc = cli("service", "install", "--unit-dir", str(tmp_path / "u"), "--systemd-run-dir", str(tmp_path / "no"),
               env=install_env)
    assert proc.returncode == 0, proc.stderr
    assert unit_fields((tmp_path / "u" / "hermes-gateway.service").read_text())["TimeoutStopSec"] == "90"


# ------------------------------------------------------------------ system units under sudo


@pytest.fixture
def sudo_env(install_env: dict[str, str]) -> dict[str, str]:
    """As after `sudo`: HOME is root's, HERMES_HOME is gone, SUDO_USER names who ran it."""
    env = {k: v for k, v in install_env.items() if k != "HERMES_HOME"}
    return {**env, "SUDO_USER": "nobody", "HOME": "/root"}


def test_system_unit_under_sudo_runs_as_the_sudo_user_not_root(tmp_path: Path, sudo_env: dict[str, str]) -> None:
    home = tmp_path / "srv" / "hermes"
    proc = cli("service", "install", "--system", "--home", str(home), "--unit-dir", str(tmp_path / "u"),
               "--systemd-run-dir", str(tmp_path / "no"), env=sudo_env)
    assert proc.returncode == 0, proc.stderr
    f = unit_fields((tmp_path / "u" / "hermes-gateway.service").read_text())
    assert f["User"] == "nobody" and "DynamicUser" not in f
    if os.geteuid() == 0:  # only root can create a home for someone else: then it is theirs
        nobody = pwd.getpwnam("nobody")
        assert (home.stat().st_uid, home.stat().st_gid) == (nobody.pw_uid, nobody.pw_gid)
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        assert f"Created {home} for nobody." in proc.stdout

    again = cli("service", "install", "--system", "--run-as", "root", "--home", str(home), "--unit-dir",
                str(tmp_path / "u2"), "--systemd-run-dir", str(tmp_path / "no"), env=sudo_env)
    assert again.returncode == 0, again.stderr
    assert unit_fields((tmp_path / "u2" / "hermes-gateway.service").read_text())["User"] == "root"
    if os.geteuid() == 0:  # a home someone else owns is named, with the fix
        assert "is not owned by root" in again.stdout and f"chown -R root: {home}" in again.stdout


def test_system_unit_for_an_unknown_account_is_refused(tmp_path: Path, sudo_env: dict[str, str]) -> None:
    proc = cli("service", "install", "--system", "--run-as", "no-such-user-hermes", "--home", str(tmp_path / "h"),
               "--unit-dir", str(tmp_path / "u"), env=sudo_env)
    assert proc.returncode == 1 and "no-such-user-hermes" in proc.stderr
    assert not (tmp_path / "u").exists() and not (tmp_path / "h").exists()


def test_a_system_units_default_home_is_its_accounts(monkeypatch: pytest.MonkeyPatch) -> None:
    # Checked in-process: installing for real would create that account's ~/.hermes on this machine.
    monkeypatch.delenv("HERMES_HOME", raising=False)
    monkeypatch.setenv("HOME", "/root")
    assert _default_home(True, "nobody") == Path(pwd.getpwnam("nobody").pw_dir) / ".hermes"
    assert _default_home(False, "nobody") == Path("/root/.hermes")
    monkeypatch.setenv("HERMES_HOME", "/srv/hermes")
    assert _default_home(True, "nobody") == Path("/srv/hermes")


@pytest.mark.parametrize(("lines", "soft"), [
    ("", None), ("LimitNOFILE=4096", 4096), ("LimitNOFILE=1024:524288", 1024), ("LimitNOFILE=infinity", math.inf),
    ("LimitNOFILE=1024\nLimitNOFILE=8192", 8192),  # the last assignment wins, as in systemd
])
def test_the_installed_units_open_file_limit_is_read_back(lines: str, soft: float | None) -> None:
    assert installed_limit_nofile(f"[Unit]\nLimitNOFILE=1\n[Service]\nType=notify\n{lines}\n") == soft
