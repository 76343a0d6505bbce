"""Start and stop a throwaway PostgreSQL 15 server on 127.0.0.1.

The machine image carries the server binaries under ``/usr/lib/postgresql/<v>/bin``. The
server refuses to run as root, so as root every server command runs as the ``postgres``
user (``runuser``), with its data directory handed to that user. The server listens on
127.0.0.1 only, on a free port, with password authentication (scram) for a generated
password: the tests connect the way a deployment does, and can check that the password
never shows.

``PgServer.database()`` makes a fresh database per test, cloned from a template that a
test session migrates once (``CREATE DATABASE … TEMPLATE`` copies files, not rows: tens of
milliseconds).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

PG_VERSIONS = ("17", "16", "15")


def find_bindir() -> Path | None:
    """The directory of ``initdb``/``pg_ctl``, or None where this machine has no server."""
    override = os.environ.get("HERMES_TEST_PG_BINDIR")
    if override:
        return Path(override) if (Path(override) / "pg_ctl").exists() else None
    for version in PG_VERSIONS:
        candidate = Path(f"/usr/lib/postgresql/{version}/bin")
        if (candidate / "pg_ctl").exists() and (candidate / "initdb").exists():
            return candidate
    found = shutil.which("pg_ctl")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PgServer:
    """One server: ``start()``, ``url(db)``, ``stop()``. ``fast=True`` trades durability for speed
    (fsync off): right for tests, which never crash the server itself, wrong for benchmarks."""

    bindir: Path
    fast: bool = True
    port: int = 0
    user: str = "hermes"
    password: str = field(default_factory=lambda: secrets.token_urlsafe(18))
    root: Path | None = None
    _as_postgres: bool = False

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [*args]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, check=check, capture_output=True, text=True, timeout=120)

    @property
    def datadir(self) -> Path:
        assert self.root is not None
        return self.root / "data"

    def start(self) -> None:
        self._as_postgres = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="hermes-pg-"))
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(pwfile, "postgres", "postgres")
        self.root.chmod(0o700)
        pwfile.chmod(0o600)
        self._run(
            str(self.bindir / "initdb"), "-D", str(self.datadir), "-U", self.user, "--pwfile", str(pwfile),
            "--auth=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync",
        )
        pwfile.unlink()
        self.port = self.port or _free_port()
        options = [
            f"-p {self.port}", "-c listen_addresses=127.0.0.1", f"-c unix_socket_directories={self.root}",
            "-c max_connections=300", "-c shared_buffers=64MB",
        ]
        if self.fast:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-l", str(self.root / "server.log"),
            "-o", " ".join(options), "-w", "-t", "60", "start",
        )

    def restart(self, mode: str = "fast") -> None:
        """A real restart: every connection drops, the server comes back on the same port."""
        assert self.root is not None
        # -l again: without it the server would inherit pg_ctl's pipes and the call never return
        self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-l", str(self.root / "server.log"),
            "-m", mode, "-w", "-t", "60", "restart",
        )

    def stop(self, mode: str = "immediate") -> None:
        if self.root is None:
            return
        if self.datadir.exists():
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", mode, "-w", "stop", check=False)
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}:{self.password}@127.0.0.1:{self.port}/{database}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        env = {**os.environ, "PGPASSWORD": self.password}
        out = subprocess.run(
            [str(self.bindir / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, "-d", database,
             "-v", "ON_ERROR_STOP=1", "-Atc", sql],
            check=True, capture_output=True, text=True, env=env, timeout=120,
        )
        return out.stdout.strip()

    def log(self) -> str:
        assert self.root is not None
        path = self.root / "server.log"
        return path.read_text(errors="replace") if path.exists() else ""
