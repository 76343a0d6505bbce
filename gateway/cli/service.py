"""``hermes-gateway service install [--user|--system] | status | uninstall``: the systemd unit.

The unit is rendered for this machine (the real home, the real interpreter or
console script) and holds no secrets: they stay in ``<home>/.env``, which the
daemon reads itself and which the installer makes 0600.
When systemd runs (``/run/systemd/system`` exists and ``systemctl`` answers)
the installer reloads it and enables the service; otherwise it prints the
commands. For a user unit it checks lingering, without which the service
stops at logout, and prints the exact fix. A system unit (run with sudo) runs
as ``--run-as``, else as the person who ran sudo (``$SUDO_USER``), never as
root by accident; its default home is that account's ``~/.hermes``, and a
home the installer creates belongs to that account. The unit's text and its
quoting rules live in ``_systemd_unit``.
"""

from __future__ import annotations

import getpass
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from gateway.cli.systemd_unit import UnitOptions, exec_start_line, render_unit, stop_timeout
from gateway.config import GatewayConfig, load_config
from gateway.errors import ConfigError, UnitPathError

__all__ = ["SYSTEM_UNIT_DIR", "UNIT_NAME", "UnitOptions", "render_unit", "required_stop_timeout", "service_app"]

UNIT_NAME = "hermes-gateway.service"
SYSTEM_UNIT_DIR = Path("/etc/systemd/system")

service_app = typer.Typer(help="Run hermes-gateway as a systemd service.", no_args_is_help=True)


def required_stop_timeout(gateway: GatewayConfig) -> int:
    """The TimeoutStopSec this configuration needs (doctor compares an installed unit with it)."""
    return stop_timeout(gateway.drain_timeout, gateway.disconnect_timeout)


def _exec_start(home: Path) -> str:
    script = Path(sys.executable).with_name("hermes-gateway")
    found = str(script) if script.exists() else shutil.which("hermes-gateway")
    cmd = [found] if found else [sys.executable, "-m", "gateway.cli"]
    return exec_start_line([*cmd, "run", "--home", str(home)])


def _unit_dir(system: bool, unit_dir: Path | None) -> Path:
    if unit_dir is not None:
        return unit_dir
    if system:
        return SYSTEM_UNIT_DIR
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "systemd" / "user"


@dataclass
class _Systemd:
    systemctl: str
    loginctl: str
    run_dir: Path
    system: bool

    def running(self) -> bool:
        if not self.run_dir.is_dir() or shutil.which(self.systemctl) is None:
            return False
        # Answers only when the (user or system) manager itself is reachable.
        return self._ctl("show-environment").returncode == 0

    def _ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        scope = [] if self.system else ["--user"]
        try:
            return subprocess.run([self.systemctl, *scope, *args], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return subprocess.CompletedProcess([self.systemctl, *args], 1, "", str(exc))

    def ctl(self, *args: str) -> bool:
        proc = self._ctl(*args)
        shown = " ".join(["systemctl", *([] if self.system else ["--user"]), *args])
        if proc.returncode != 0:
            typer.echo(f"  {shown}: failed ({(proc.stderr or proc.stdout).strip()})", err=True)
            return False
        typer.echo(f"  {shown}: ok")
        return True

    def linger(self, user: str) -> bool | None:
        """True/False from ``loginctl show-user``; None when it cannot tell."""
        if shutil.which(self.loginctl) is None:
            return None
        try:
            proc = subprocess.run([self.loginctl, "show-user", user, "-p", "Linger"], capture_output=True,
                                  text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        value = proc.stdout.strip().partition("=")[2]
        return {"yes": True, "no": False}.get(value) if proc.returncode == 0 else None


UserOpt = Annotated[bool, typer.Option("--user/--system", help="A user unit (default) or a system unit.")]
HomeOpt = Annotated[Path | None, typer.Option(
    "--home", metavar="DIR", help="HERMES_HOME (default: $HERMES_HOME, else ~/.hermes of the account the service runs as)")]
UnitDirOpt = Annotated[Path | None, typer.Option(
    "--unit-dir", metavar="DIR", help="Where the unit goes (default: systemd's).")]
SystemctlOpt = Annotated[str, typer.Option("--systemctl", hidden=True)]
LoginctlOpt = Annotated[str, typer.Option("--loginctl", hidden=True)]
RunDirOpt = Annotated[Path, typer.Option("--systemd-run-dir", hidden=True)]


def _gateway_config(home: Path) -> GatewayConfig:
    try:
        return load_config(home).settings.gateway
    except ConfigError as exc:
        typer.echo(f"hermes-gateway: configuration error: {exc}", err=True)
        raise typer.Exit(78) from None


def _account(system: bool, run_as: str | None) -> str:
    """Who the service runs as: --run-as, else (system unit under sudo) the person who ran sudo, else us."""
    if run_as:
        return run_as
    sudo_user = os.environ.get("SUDO_USER")
    if system and sudo_user and sudo_user != "root":
        return sudo_user
    return getpass.getuser()


def _passwd(account: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(account)
    except KeyError:
        typer.echo(f"hermes-gateway: there is no account named {account!r} on this machine. "
                   "Create it first, or name another with --run-as.", err=True)
        raise typer.Exit(1) from None


def _default_home(system: bool, account: str) -> Path:
    # Under sudo, HOME (and so ~/.hermes) is root's: a system unit's home is its account's.
    raw = os.environ.get("HERMES_HOME")
    if raw:
        return Path(raw).expanduser()
    if system:
        return Path(_passwd(account).pw_dir) / ".hermes"
    return Path.home() / ".hermes"


def _make_home(home: Path, owner: pwd.struct_passwd | None) -> None:
    """Create the home (0700); a home created by root for another account is handed to that account."""
    existed = home.exists()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not existed and owner is not None and os.geteuid() == 0 and owner.pw_uid != 0:
        os.chown(home, owner.pw_uid, owner.pw_gid)
        typer.echo(f"Created {home} for {owner.pw_name}.")
    elif existed and owner is not None and home.stat().st_uid != owner.pw_uid:
        typer.echo(f"Warning: {home} is not owned by {owner.pw_name}, who the service runs as; it may not be "
                   f"able to write there. Fix: sudo chown -R {owner.pw_name}: {home}")


def _secure_env_file(home: Path) -> None:
    env = home / ".env"
    if env.exists() and env.stat().st_mode & 0o077:
        env.chmod(0o600)
        typer.echo(f"Made {env} readable by its owner only (0600): it holds your tokens.")


def linger_advice(user: str, linger: bool | None) -> str | None:
    if linger is False:
        return (f"Lingering is off for {user}: the service stops when you log out. Fix: "
                f"sudo loginctl enable-linger {user}")
    if linger is None:
        return (f"Could not ask loginctl whether {user} lingers; if the service stops at logout, run: "
                f"sudo loginctl enable-linger {user}")
    return None


@service_app.command()
def install(
    user: UserOpt = True,
    home: HomeOpt = None,
    unit_dir: UnitDirOpt = None,
    run_as: Annotated[str | None, typer.Option(
        "--run-as", metavar="ACCOUNT", help="System unit: the account it runs as (default: who ran sudo, else you).")] = None,
    start: Annotated[bool, typer.Option("--start/--no-start", help="Enable and start it after installing.")] = True,
    systemctl: SystemctlOpt = "systemctl",
    loginctl: LoginctlOpt = "loginctl",
    systemd_run_dir: RunDirOpt = Path("/run/systemd/system"),
) -> None:
    """Write the unit (user unit by default), then reload systemd and enable it."""
    system = not user
    account = _account(system, run_as)
    owner = _passwd(account) if system else None
    home = (home or _default_home(system, account)).expanduser().resolve()
    gateway = _gateway_config(home)
    try:
        text = render_unit(UnitOptions(home, _exec_start(home), system=system, user=account if system else None,
                                       drain_timeout=gateway.drain_timeout,
                                       disconnect_timeout=gateway.disconnect_timeout))
    except UnitPathError as exc:
        typer.echo(f"hermes-gateway: cannot install for this home: {exc}. Choose another --home.", err=True)
        raise typer.Exit(1) from None
    _make_home(home, owner)
    target_dir = _unit_dir(system, unit_dir)
    try:
        target_dir.mkdir(parents=True, exist_ok=True)
        path = target_dir / UNIT_NAME
        path.write_text(text)
        path.chmod(0o644)
    except PermissionError:
        typer.echo(f"hermes-gateway: cannot write {target_dir / UNIT_NAME}: permission denied. "
                   "A system unit needs root: run it with sudo, or install a user unit (--user).", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"Wrote {path}")
    _secure_env_file(home)
    sd = _Systemd(systemctl, loginctl, systemd_run_dir, system)
    scope = "" if system else " --user"
    if sd.running():
        ok = sd.ctl("daemon-reload")
        if start:
            ok = sd.ctl("enable", "--now", UNIT_NAME) and ok
        if not ok:
            raise typer.Exit(1)
    else:
        typer.echo("systemd is not running here; when it is, run:")
        typer.echo(f"  systemctl{scope} daemon-reload && systemctl{scope} enable --now {UNIT_NAME}")
    if not system:
        advice = linger_advice(account, sd.linger(account))
        if advice:
            typer.echo(advice)


@service_app.command()
def status(
    user: UserOpt = True,
    unit_dir: UnitDirOpt = None,
    systemctl: SystemctlOpt = "systemctl",
    systemd_run_dir: RunDirOpt = Path("/run/systemd/system"),
) -> None:
    """Show whether the unit is installed and what systemd says about it."""
    system = not user
    path = _unit_dir(system, unit_dir) / UNIT_NAME
    if not path.exists():
        typer.echo(f"Not installed ({path} does not exist). Install it with: hermes-gateway service install")
        raise typer.Exit(3)
    typer.echo(f"Unit: {path}")
    sd = _Systemd(systemctl, "loginctl", systemd_run_dir, system)
    if not sd.running():
        typer.echo("systemd is not running here: the unit is installed but not managed.")
        return
    proc = sd._ctl("status", "--no-pager", UNIT_NAME)
    typer.echo(proc.stdout.rstrip())
    # systemctl status: 0 running, 3 stopped; pass it on for scripts.
    raise typer.Exit(proc.returncode)


@service_app.command()
def uninstall(
    user: UserOpt = True,
    unit_dir: UnitDirOpt = None,
    systemctl: SystemctlOpt = "systemctl",
    systemd_run_dir: RunDirOpt = Path("/run/systemd/system"),
) -> None:
    """Stop and disable the service, remove the unit, reload systemd."""
    system = not user
    path = _unit_dir(system, unit_dir) / UNIT_NAME
    sd = _Systemd(systemctl, "loginctl", systemd_run_dir, system)
    managed = sd.running()
    if managed:
        sd.ctl("disable", "--now", UNIT_NAME)
    if path.exists():
        path.unlink()
        typer.echo(f"Removed {path}")
    else:
        typer.echo(f"Nothing to remove at {path}")
    if managed:
        sd.ctl("daemon-reload")
