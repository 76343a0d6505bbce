"""``hermes-gateway doctor``: checks what breaks a gateway in practice and prints a fix for each
problem; it never prints a secret and exits non-zero when a check failed."""

from __future__ import annotations

import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import typer

from adapters.settings import PlatformSettings
from gateway.cli.ops import FD_LIMIT_WARN, WAL_WARN_BYTES, HomeOption, _pid_alive
from gateway.cli.service import (
    SYSTEM_UNIT_DIR,
    UNIT_NAME,
    _Systemd,
    _unit_dir,
    linger_advice,
    required_stop_timeout,
)
from gateway.cli.systemd_unit import LIMIT_NOFILE, STOP_MARGIN, installed_limit_nofile, installed_stop_timeout
from gateway.config import PAIRING_KEY_ENV, LoadedConfig, default_home, load_config
from gateway.config.models import PAIRING_PLATFORMS
from gateway.errors import ConfigError
from gateway.http import fd_usage, open_file_limit
from gateway.routing.owners import Owners
from gateway.routing.pairing import PAIRING_KEY_FILE
from gateway.status import read_state_file
from storage import Reader, check_sqlite_features, pairing, quick_check
from storage.errors import GatewayError, StorageError

__all__ = ["Check", "doctor", "run_checks"]

Level = Literal["ok", "warn", "fail", "skip"]


@dataclass
class Check:
    name: str
    level: Level
    detail: str
    fix: str | None = None


def _check_config(home: Path) -> tuple[Check, LoadedConfig | None]:
    try:
        config = load_config(home)
    except ConfigError as exc:
        return Check("config", "fail", str(exc), f"edit {home / 'config.yaml'} (or .env) as the message says"), None
    if not config.config_file.exists():
        return Check("config", "ok", f"no config.yaml, defaults in use ({config.config_file} does not exist)"), config
    # The reference's names for our settings work, but say once what they stand for.
    also = "; also accepted: " + ", ".join(map(str, config.aliases_used)) if config.aliases_used else ""
    return Check("config", "ok", f"{config.config_file} is valid{also}"), config


_Paired = tuple[list[pairing.RecordedOwner], list[pairing.AllowedUser]]


def _paired(config: LoadedConfig) -> _Paired:
    """The owners pairing recorded and the users it let in (read-only; none without a database)."""
    url = config.storage_url
    if url.backend == "postgresql":
        from storage.postgres import read_once

        try:
            return read_once(url, lambda c: (pairing.owners(c), pairing.allowed(c)))
        except StorageError:  # unreachable: the storage check says so
            return [], []
    db = url.path or config.db_path
    if not db.exists():
        return [], []
    reader = Reader(db, workers=1)
    try:
        return reader.run_sync(lambda c: (pairing.owners(c), pairing.allowed(c)))
    except sqlite3.OperationalError:  # a state.db no daemon of this version has opened yet
        return [], []
    finally:
        reader.close()


def _check_allowlist(config: LoadedConfig, platform: str, paired: _Paired) -> Check:
    """A platform with a token but nobody allowed answers no one: default deny (routing/auth.py)."""
    ids, allow_all = config.platform_allowlist(platform)
    if allow_all:
        return Check(f"allowlist {platform}", "ok", "anyone may chat (allow-all is on)")
    let_in = sum(u.platform == platform for u in paired[1])
    by_pairing = f", {let_in} let in by pairing" if let_in else ""
    if ids:
        return Check(f"allowlist {platform}", "ok", f"{len(ids)} user id(s) may chat{by_pairing}")
    if let_in:
        return Check(f"allowlist {platform}", "ok", f"{let_in} user id(s) let in by pairing (hermes-gateway "
                     "pairing list)")
    prefix = platform.upper()
    return Check(f"allowlist {platform}", "warn", f"{platform} has a token but nobody may chat: "
                 "no allowlist, no allow-all",
                 f"add {prefix}_ALLOWED_USERS=<your {platform} user id> (or GATEWAY_ALLOWED_USERS) to "
                 f"{config.home / '.env'}; {prefix}_ALLOW_ALL_USERS=true lets anyone in; or DM the bot and "
                 "approve the code you get with `hermes-gateway pairing approve CODE`")


def _check_owners(config: LoadedConfig, platform: str, paired: _Paired) -> Check:
    """Who approves pairings and tools' questions on ``platform``: named, never guessed."""
    owners = Owners(config.settings.auth.owners)
    configured = owners.configured_for(platform)
    recorded = sorted({o.user_id for o in paired[0] if o.platform == platform} - set(configured))
    named = [f"{uid} (auth.owners)" for uid in configured] + [f"{uid} (first approved by pairing)"
                                                              for uid in recorded]
    if named:
        return Check(f"owners {platform}", "ok", ", ".join(named))
    return Check(f"owners {platform}", "ok", "none yet: the first person approved with `hermes-gateway pairing "
                 "approve` becomes the owner (or set auth.owners)")


def _check_approvals(config: LoadedConfig) -> Check:
    """``tools.approvals: off`` lets the agent act unasked: said loudly, every time."""
    tools = config.settings.tools
    if tools.approvals == "off":
        return Check("approvals", "warn", "tools.approvals is OFF: the agent runs dangerous commands and writes "
                     "outside its folders WITHOUT ASKING ANYONE, in every chat it serves",
                     f"set tools.approvals: ask (or deny) in {config.config_file}")
    if tools.approvals == "deny":
        return Check("approvals", "ok", "dangerous actions are refused (tools.approvals: deny)")
    return Check("approvals", "ok", f"dangerous actions wait for a yes in the chat ({tools.approval_timeout:g} s, "
                 "then no)")


def _check_tokens(config: LoadedConfig) -> list[Check]:
    """Only whether each secret is there: never its value, not even a prefix."""
    p = config.settings.platforms
    checks: list[Check] = []
    active: list[tuple[str, str, object]] = []
    for key in type(p).model_fields:
        section = getattr(p, key)
        if not isinstance(section, PlatformSettings) or not section.active:
            continue
        env = section.env_names()[section.credential_key]
        active.append((key, env, getattr(section, section.credential_key)))
    for platform, env, value in active:
        checks.append(Check(f"token {env}", "ok", "set") if value is not None else
                      Check(f"token {env}", "fail", "missing", f"add {env}=<token> to {config.home / '.env'}"))
        if value is not None:
            paired = _paired(config)
            checks.append(_check_allowlist(config, platform, paired))
            if platform in PAIRING_PLATFORMS:
                checks.append(_check_owners(config, platform, paired))
    api = p.api_server
    if api.enabled and api.host not in ("127.0.0.1", "localhost", "::1"):
        checks.append(Check("token API_SERVER_KEY", "ok", "set") if api.key is not None else
                      Check("token API_SERVER_KEY", "fail", f"the API listens on {api.host} without a key",
                            f"add API_SERVER_KEY=<secret> to {config.home / '.env'}"))
    if not active and not api.enabled:
        checks.append(Check("platforms", "warn", "no platform is enabled",
                            "set TELEGRAM_BOT_TOKEN (or another platform's token) in .env"))
    m = config.settings.model
    if not (m.base_url and m.default):
        checks.append(Check("model", "warn", "model.base_url / model.default are not set",
                            f"set them in {config.config_file}"))
    return checks


def _check_sqlite() -> Check:
    try:
        check_sqlite_features()
    except GatewayError as exc:
        return Check("sqlite", "fail", str(exc), "install a Python whose sqlite3 has FTS5 (SQLite >= 3.34)")
    return Check("sqlite", "ok", f"SQLite {sqlite3.sqlite_version} with FTS5 and the trigram tokenizer")


def _check_postgres(config: LoadedConfig) -> Check:
    from storage.postgres import probe

    url = config.storage_url
    try:
        found = probe(url)
    except StorageError as exc:
        return Check("postgresql", "fail", str(exc),
                     "check storage.url (HERMES_STORAGE_URL): host, port, database, user and password")
    if found.newer:
        return Check("postgresql", "fail", f"{url.redacted} was migrated by a newer hermes-gateway "
                     f"(migrations {list(found.newer)})", "upgrade this node to the release the others run")
    pending = f"; {len(found.pending)} migration(s) to apply at the next start" if found.pending else ""
    return Check("postgresql", "ok", f"{url.redacted}: PostgreSQL {found.server_version}, "
                 f"{len(found.applied)} migration(s) applied{pending}")


def _check_db(db: Path) -> list[Check]:
    if not db.exists():
        return [Check("state.db", "skip", f"{db} does not exist yet (the daemon creates it)")]
    checks: list[Check] = []
    try:
        rows = quick_check(db)
    except StorageError as exc:
        checks.append(Check("integrity", "fail", f"cannot read {db}: {exc}",
                            "stop the daemon and restore state.db from a backup"))
    else:
        if rows == ["ok"]:
            checks.append(Check("integrity", "ok", "PRAGMA quick_check: ok"))
        else:
            checks.append(Check("integrity", "fail", "; ".join(map(str, rows[:3])),
                                f"stop the daemon, back up {db}, then try: sqlite3 {db} '.recover' | sqlite3 new.db"))
    wal = db.with_name(db.name + "-wal")
    size = wal.stat().st_size if wal.exists() else 0
    if size > WAL_WARN_BYTES:
        checks.append(Check("wal", "warn", f"{wal.name} is {size / 2**20:.0f} MiB",
                            "a long-running reader keeps checkpoints from finishing; stop it, or restart the daemon"))
    else:
        checks.append(Check("wal", "ok", f"{wal.name} is {size / 2**20:.1f} MiB"))
    return checks


def _check_mode(path: Path, what: str) -> Check:
    if not path.exists():
        return Check(f"permissions {path.name}", "skip", f"no {what}")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        return Check(f"permissions {path.name}", "fail", f"{path} is {mode:04o}: others can read it",
                     f"chmod 600 {path}")
    return Check(f"permissions {path.name}", "ok", f"{mode:04o}")


def _check_linger(systemd: _Systemd) -> Check:
    unit = _unit_dir(False, None) / UNIT_NAME
    if not unit.exists():
        return Check("linger", "skip", "no user unit installed")
    import getpass

    user = getpass.getuser()
    advice = linger_advice(user, systemd.linger(user))
    if advice is None:
        return Check("linger", "ok", f"{user} lingers: the service runs while logged out")
    return Check("linger", "warn", advice.split(": ")[0], f"sudo loginctl enable-linger {user}")


def _check_stop_timeout(config: LoadedConfig, unit: Path, system: bool) -> Check | None:
    """TimeoutStopSec is written at install time: a later, longer drain needs the unit rewritten."""
    if not unit.exists():
        return None
    name = f"{'system' if system else 'user'} unit TimeoutStopSec"
    reinstall = f"{'sudo ' if system else ''}hermes-gateway service install {'--system' if system else '--user'} " \
                f"--home {config.home}"
    try:
        have = installed_stop_timeout(unit.read_text())
    except OSError as exc:
        return Check(name, "warn", f"cannot read {unit}: {exc.strerror or exc}")
    g = config.settings.gateway
    need = required_stop_timeout(g)
    if have is None:
        return Check(name, "warn", f"cannot read the TimeoutStopSec of {unit}", f"re-run: {reinstall}")
    if have < need:
        return Check(name, "warn",
                     f"{unit} lets a stop take {have:g} s, but gateway.drain_timeout ({g.drain_timeout:g} s) + "
                     f"gateway.disconnect_timeout ({g.disconnect_timeout:g} s) + {STOP_MARGIN:g} s need {need} s: "
                     "systemd would kill the daemon before state.db is checkpointed",
                     f"re-run: {reinstall}")
    return Check(name, "ok", f"{have:g} s >= the {need} s this configuration needs")


def _check_open_files(home: Path, units: list[tuple[Path, bool]]) -> Check:
    """The open-file limit the daemon has (read from it when it runs; else the one it would get from
    this shell) and how much of it is in use; and whether an installed unit raises it."""
    fix = (f"the systemd unit sets LimitNOFILE={LIMIT_NOFILE}: re-run `hermes-gateway service install`; "
           f"started by hand, raise it first: ulimit -n {LIMIT_NOFILE}")
    for unit, _ in units:
        if unit.exists() and installed_limit_nofile(unit.read_text(errors="replace")) is None:
            return Check("open files", "warn", f"{unit} sets no LimitNOFILE: systemd's default (1024) applies", fix)
    state = read_state_file(home) or {}
    pid = state.get("pid")
    running = isinstance(pid, int) and _pid_alive(pid) and bool(state.get("running"))
    usage = fd_usage(pid) if running and isinstance(pid, int) else None
    limit = open_file_limit(pid) if running and isinstance(pid, int) else open_file_limit()
    who = f"the daemon (pid {pid})" if running else "a daemon started from this shell"
    if limit is None:
        return Check("open files", "ok", f"{who} has no open-file limit")
    if usage is not None and usage.low:
        return Check("open files", "warn", f"{who}: {usage.describe()}; it stops accepting at the limit",
                     f"find what holds them (ls -l /proc/{pid}/fd), or raise the limit: {fix}")
    if limit < FD_LIMIT_WARN:
        return Check("open files", "warn", f"{who} may open {limit} files: a few thousand connections use "
                                           f"that up (want at least {FD_LIMIT_WARN})", fix)
    in_use = f", {usage.open} open" if usage is not None else ""
    return Check("open files", "ok", f"{who} may open {limit} files{in_use}")


def _check_skill_commands(config: LoadedConfig) -> Check:
    """A skill that clashes with a built-in command loses it; one a platform's menu refuses is left out there."""
    p = config.settings.platforms
    enabled = [k for k in type(p).model_fields
               if isinstance(getattr(p, k), PlatformSettings) and getattr(p, k).active]
    from gateway.cli.doctor_skills import skill_command_problems  # here: it loads every chat command

    count, problems = skill_command_problems(config, enabled)
    if not problems:
        return Check("skill commands", "ok", f"{count} skill(s) callable as /<skill-name>")
    return Check("skill commands", "warn", f"{count} skill(s) callable as /<skill-name>; " + "; ".join(problems),
                 f"rename those skills (their folder and frontmatter name) under {config.home / 'skills'}")


def _check_shared_pairing_key(config: LoadedConfig) -> Check:
    """Several nodes share one database: a pairing code must be approvable through any of them."""
    if config.pairing_key is not None:
        return Check("pairing key", "ok", f"{PAIRING_KEY_ENV} is set (every node with this .env checks the same codes)")
    return Check("pairing key", "warn", f"{PAIRING_KEY_ENV} is not set: each node keeps its own pairing.key, so a "
                 "code one node gave is approved only through that node",
                 f"add {PAIRING_KEY_ENV}=$(openssl rand -hex 32) to the .env every node shares")


def run_checks(home: Path, loginctl: str = "loginctl") -> list[Check]:
    config_check, config = _check_config(home)
    checks = [config_check]
    units = [(_unit_dir(False, None) / UNIT_NAME, False), (SYSTEM_UNIT_DIR / UNIT_NAME, True)]
    if config is not None:
        checks += _check_tokens(config)
        checks.append(_check_approvals(config))
        checks.append(_check_skill_commands(config))
        for unit, system in units:
            if (found := _check_stop_timeout(config, unit, system)) is not None:
                checks.append(found)
    checks.append(_check_open_files(home, units))
    if config is not None and config.storage_url.backend == "postgresql":
        checks.append(_check_postgres(config))
        checks.append(_check_shared_pairing_key(config))
    else:
        checks.append(_check_sqlite())
        checks += _check_db(config.storage_url.path or home / "state.db" if config is not None else home / "state.db")
    checks.append(_check_mode(home / ".env", ".env file"))
    checks.append(_check_mode(home / "state.db", "state.db yet"))
    if (home / PAIRING_KEY_FILE).exists():  # made at the first pairing code
        checks.append(_check_mode(home / PAIRING_KEY_FILE, "pairing key"))
    checks.append(_check_linger(_Systemd("systemctl", loginctl, Path("/run/systemd/system"), system=False)))
    return checks


_MARK = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "--  "}


def doctor(
    home: HomeOption = None,
    loginctl: Annotated[str, typer.Option("--loginctl", hidden=True)] = "loginctl",
) -> None:
    """Check config, tokens, open files, SQLite, state.db, permissions and the installed unit; print fixes
    (exit 1 on a failure)."""
    home = (home or default_home()).expanduser()
    typer.echo(f"hermes-gateway doctor — {home}")
    checks = run_checks(home, loginctl)
    for c in checks:
        typer.echo(f"[{_MARK[c.level]}] {c.name}: {c.detail}")
        if c.fix and c.level in ("warn", "fail"):
            typer.echo(f"       fix: {c.fix}")
    failed = [c for c in checks if c.level == "fail"]
    warned = [c for c in checks if c.level == "warn"]
    also = f" and {len(warned)} warning(s)" if warned else ""
    if failed:
        typer.echo(f"{len(failed)} check(s) failed{also}.")
        raise typer.Exit(1)
    if warned:
        typer.echo(f"No check failed, but {len(warned)} warning(s) above.")
        return
    typer.echo("All checks passed.")
