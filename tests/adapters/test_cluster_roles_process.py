"""Discord's gateway and Slack's Socket Mode on several nodes: two real daemon processes
(``hermes-gateway run``) over one real PostgreSQL server and the platform's emulator. One node
holds the connection (its role); ``kill -9`` of it moves the connection to the other node within
``cluster.failover_s``, and each message is answered once, before and after."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.emulators.fake_discord import FakeDiscord
from tests.emulators.fake_slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, FakeSlack
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway.conftest import free_port, write_config

from ._daemon_process import daemon_process
from ._telegram_process import QUIET, until
from .conftest import daemon_config
from .telegram._cluster import wait_cluster

NODES = ("n1", "n2")
SLACK_USER = "U0USER001"


@asynccontextmanager
async def node_daemon(home: Path, platform: str, section: dict[str, Any], env: dict[str, str], model: FakeOpenAI,
                      pg_url: str, node: str) -> AsyncIterator[subprocess.Popen[bytes]]:
    cfg = daemon_config(model.base_url, free_port(), platform, section,
                        {"agent": QUIET, "gateway": {"busy_ack": False, "typing_delay": 0},
                         "logging": {"level": "info"}},
                        {"storage": {"url": pg_url}, "cluster": {"node_id": node, "failover_s": 3}})
    write_config(home, cfg, env)
    async with daemon_process(home) as proc:
        yield proc


def holders(view: dict[str, Any], role: str) -> list[str]:
    return [n["node_id"] for n in view["nodes"] if n["alive"] and role in n["roles"]]


async def _role_moves_on_kill_9(tmp_path: Path, role: str, start: Callable[[str], Any],
                                connected: Callable[[], bool], say: Callable[[str], Any],
                                answers: Callable[[], list[str]]) -> None:
    async with AsyncExitStack() as stack:
        procs = {node: await stack.enter_async_context(start(node)) for node in NODES}
        view = await wait_cluster(tmp_path / "n1", f"two nodes, one holding {role}", lambda v: (
            len([n for n in v["nodes"] if n["alive"]]) == 2 and len(holders(v, role)) == 1))
        holder = holders(view, role)[0]
        await until(connected, f"the {role} connection")
        await say("before the kill")
        await until(lambda: "echo: before the kill" in answers(), "the first answer")

        procs[holder].kill()
        await asyncio.to_thread(procs[holder].wait, 30)
        survivor = next(n for n in NODES if n != holder)
        await wait_cluster(tmp_path / survivor, f"the survivor holding {role}",
                           lambda v: holders(v, role) == [survivor])
        await until(connected, f"the survivor's {role} connection")
        await say("after the kill")
        await until(lambda: "echo: after the kill" in answers(), "the answer after the kill")
    said = [t for t in answers() if t.startswith("echo: ")]
    assert said == ["echo: before the kill", "echo: after the kill"]  # once each, in order


@pytest.mark.asyncio
async def test_discords_gateway_connection_moves_to_another_node_on_kill_9(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord, pg_url: str
) -> None:
    fake = fake_discord
    section = {"base_url": fake.base_url, "gateway_url": fake.gateway_url, "guild_ready_timeout": 0.05,
               "identify_delay": 0}
    env = {"DISCORD_BOT_TOKEN": fake.token, "DISCORD_ALLOWED_USERS": str(fake.user["id"])}

    def start(node: str) -> Any:
        return node_daemon(tmp_path / node, "discord", section, env, fake_openai, pg_url, node)

    async def say(text: str) -> None:
        await fake.user_says(text, chat="dm")

    await _role_moves_on_kill_9(tmp_path, "discord", start, fake.connected, say,
                                lambda: [str(m["text"]) for m in fake.sent if m["method"] == "create_message"])
    assert len(fake.identifies) >= 2  # the survivor identified anew: a session of its own


@pytest.mark.asyncio
async def test_slacks_socket_mode_connection_moves_to_another_node_on_kill_9(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack, pg_url: str
) -> None:
    fake = fake_slack
    section = {"api_base_url": fake.api_base_url, "mode": "socket", "ping_interval": 0.5,
               "thinking_placeholder": False}
    env = {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
           "SLACK_ALLOWED_USERS": SLACK_USER}

    def start(node: str) -> Any:
        return node_daemon(tmp_path / node, "slack", section, env, fake_openai, pg_url, node)

    async def say(text: str) -> None:
        await fake.user_says(text, user=SLACK_USER)

    fake.retry_delays = (0.0, 2.0, 5.0)  # an event that met the dead node's socket comes again soon

    def socket_open() -> bool:
        # the dead node's socket may be open on the fake's side until it reads the EOF; an event
        # sent there is not acked, and Slack's retry goes over the newest socket
        return bool(fake.open_sockets)

    await _role_moves_on_kill_9(tmp_path, "slack", start, socket_open, say,
                                lambda: [str(m["text"]) for m in fake.sent])
