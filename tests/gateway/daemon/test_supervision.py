"""The runner keeps adapters alive and reports on them; the ledger and the
dedupe sweep do their bookkeeping in the real state.db.

The daemon runs in-process as in ``run_gateway``, with extra adapters whose
connection attempts are scripted by the test (each ``connect()`` takes the
next outcome from a queue), so restarts happen exactly when the test says.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
from structlog.testing import capture_logs

from adapters.base import (
    Adapter,
    ChatType,
    Disposition,
    FatalAdapterError,
    InboundMessage,
    OutboundMessage,
    SendKind,
    SendResult,
)
from gateway.config import load_config
from gateway.daemon.runner import Gateway
from gateway.daemon.shutdown import disconnect_all
from gateway.routing.services import Services
from gateway.status import read_state_file
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import free_port, write_config

TIMEOUT = 15.0
ROOT = Path(__file__).resolve().parents[3]
ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1,u2", "FLAKY_ALLOWED_USERS": "f1"}


class ScriptedAdapter(Adapter):
    """Each connect() waits for the next scripted outcome: an exception to raise, or None to connect."""

    def __init__(self, platform: str) -> None:
        super().__init__()
        self.platform = platform
        self.script: asyncio.Queue[BaseException | None] = asyncio.Queue()
        self.attempts = 0
        self.disconnects = 0
        self.sent: list[OutboundMessage] = []
        self._stopped = asyncio.Event()

    async def connect(self) -> None:
        self.attempts += 1
        outcome = await self.script.get()
        if outcome is not None:
            raise outcome
        self._stopped.clear()
        self.ready.set()
        await self._stopped.wait()

    async def disconnect(self) -> None:
        self.disconnects += 1
        self.ready.clear()
        self._stopped.set()

    async def send(self, message: OutboundMessage) -> SendResult:
        self.sent.append(message)
        return SendResult((f"{self.platform}-{len(self.sent)}",))


async def until(predicate: Callable[[], bool], timeout: float = TIMEOUT, what: str = "condition") -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}") from None


class Daemon:
    def __init__(self, gateway: Gateway, home: Path, chat: ChatAdapter, http: httpx.AsyncClient) -> None:
        self.gateway = gateway
        self.home = home
        self.chat = chat
        self.http = http

    @property
    def services(self) -> Services:
        assert self.gateway.services is not None
        return self.gateway.services

    def state(self, name: str) -> str:
        st = self.gateway.adapter_states.get(name)
        return st.state if st else "absent"

    async def health(self) -> tuple[int, dict[str, Any]]:
        resp = await self.http.get("/healthz")
        return resp.status_code, resp.json()

    async def ready(self) -> tuple[int, dict[str, Any]]:
        resp = await self.http.get("/readyz")
        return resp.status_code, resp.json()

    async def rows(self, sql: str, *params: object) -> list[tuple[Any, ...]]:
        return await self.services.store.read(lambda c: [tuple(r) for r in c.execute(sql, params).fetchall()])


@asynccontextmanager
async def serve(
    home: Path,
    base_url: str,
    extra: dict[str, Adapter],
    *,
    config: dict[str, dict[str, Any]] | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[Daemon]:
    """``run_gateway`` with more adapters beside the test chat adapter."""
    cfg: dict[str, Any] = {
        "model": {"base_url": base_url, "default": "fake-model", "max_retries": 0, "timeout": 30},
        "platforms": {"api_server": {"port": free_port()}},
        "storage": {"synchronous": "NORMAL"},
        "logging": {"format": "json", "level": "warning"},
    }
    for section, values in (config or {}).items():
        cfg.setdefault(section, {}).update(values)
    write_config(home, cfg, env)
    chat = ChatAdapter()
    gw = Gateway(load_config(home, environ={}), extra_adapters={chat.platform: chat, **extra})
    task = asyncio.create_task(gw.run())
    try:
        await until(lambda: (bool(gw.http_port) and chat.ready.is_set()) or task.done(), what="gateway start")
        if task.done():
            task.result()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.http_port}", timeout=30) as http:
            yield Daemon(gw, home, chat, http)
    finally:
        gw.request_stop()
        await asyncio.wait_for(task, 30)


def adapter_task_alive(name: str) -> bool:
    return any(t.get_name() == f"adapter:{name}" and not t.done() for t in asyncio.all_tasks())


async def chat_round_trip(d: Daemon, text: str, user: str = "u1") -> None:
    before = len([m for m in d.chat.to(user) if m.kind is SendKind.REPLY])
    assert await d.chat.say(text, user=user) is Disposition.ACCEPTED
    await until(
        lambda: len([m for m in d.chat.to(user) if m.kind is SendKind.REPLY]) > before, what=f"reply to {text!r}"
    )
    assert [m for m in d.chat.to(user) if m.kind is SendKind.REPLY][-1].text == f"echo: {text}"


# -------------------------------------------------------------- supervision


async def test_crashing_adapter_is_restarted_while_others_keep_serving(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    flaky = ScriptedAdapter("flaky")
    async with serve(gateway_home, fake_openai.base_url, {"flaky": flaky}, env=ALLOW) as d:
        await until(lambda: flaky.attempts == 1, what="first connect attempt")
        assert d.state("flaky") == "starting"
        await chat_round_trip(d, "while flaky is still starting")

        flaky.script.put_nowait(ConnectionError("network down #1"))
        await until(lambda: d.gateway.adapter_states["flaky"].restarts == 1, what="first restart")
        assert d.state("flaky") == "restarting"
        assert "network down #1" in (d.gateway.adapter_states["flaky"].last_error or "")
        await chat_round_trip(d, "while flaky restarts once")

        await until(lambda: flaky.attempts == 2, what="second connect attempt (after backoff)")
        flaky.script.put_nowait(OSError("network down #2"))
        await until(lambda: d.gateway.adapter_states["flaky"].restarts == 2, what="second restart")
        assert d.state("flaky") == "restarting"
        await chat_round_trip(d, "while flaky restarts twice")

        await until(lambda: flaky.attempts == 3, what="third connect attempt (after backoff)")
        flaky.script.put_nowait(None)
        await until(lambda: d.state("flaky") == "connected", what="flaky connected")
        st = d.gateway.adapter_states["flaky"]
        assert st.restarts >= 2 and st.state == "connected"
        assert flaky.disconnects >= 2  # the runner cleaned up after each crash

        # The restarted adapter is wired to the router: its users get answers.
        disposition = await flaky.dispatch(
            InboundMessage(platform="flaky", chat_id="f1", chat_type=ChatType.DM, user_id="f1",
                           text="hello from flaky", message_id="fm1")
        )
        assert disposition is Disposition.ACCEPTED
        await until(lambda: any(m.text == "echo: hello from flaky" for m in flaky.sent), what="flaky reply")
        await chat_round_trip(d, "after flaky recovered")


async def test_fatal_adapter_error_is_not_retried_and_daemon_keeps_serving(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    doomed = ScriptedAdapter("doomed")
    doomed.script.put_nowait(FatalAdapterError("the bot token was revoked"))
    doomed.script.put_nowait(None)  # would connect if it were (wrongly) retried
    async with serve(gateway_home, fake_openai.base_url, {"doomed": doomed}, env=ALLOW) as d:
        await until(lambda: d.state("doomed") == "failed", what="doomed failed")
        st = d.gateway.adapter_states["doomed"]
        assert st.restarts == 0 and st.last_error == "the bot token was revoked"
        # Its supervisor is finished for good; the others are still supervised.
        await until(lambda: not adapter_task_alive("doomed"), what="doomed supervisor to finish")
        assert adapter_task_alive("testchat") and adapter_task_alive("api-server")
        assert doomed.attempts == 1 and doomed.script.qsize() == 1
        await chat_round_trip(d, "still here?")
        # Alive (healthz) but not ready (readyz): a restart would not bring the token back.
        status, body = await d.health()
        assert status == 200 and body["status"] == "ok"
        assert body["adapters"]["doomed"] == "failed" and body["adapters"]["testchat"] == "connected"
        status, body = await d.ready()
        assert status == 503 and body["status"] == "not_ready"
        assert body["adapters"]["doomed"] == {"state": "failed", "reason": "the bot token was revoked"}
        assert d.state("doomed") == "failed"


async def test_healthz_stays_ok_while_readyz_waits_for_every_adapter(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    slow = ScriptedAdapter("slow")
    async with serve(gateway_home, fake_openai.base_url, {"slow": slow}, env=ALLOW) as d:
        await until(lambda: all(d.state(n) == "connected" for n in ("api-server", "testchat", "cli")),
                    what="built-in adapters connected")
        status, body = await d.health()
        assert (status, body["status"]) == (200, "ok")
        assert body["adapters"] == {"api-server": "connected", "testchat": "connected", "cli": "connected",
                                    "slow": "starting"}
        status, body = await d.ready()
        assert (status, body["adapters"]["slow"]["state"]) == (503, "starting")

        slow.script.put_nowait(ConnectionError("refused"))
        await until(lambda: d.state("slow") == "restarting", what="slow restarting")
        status, body = await d.health()
        assert (status, body["status"], body["adapters"]["slow"]) == (200, "ok", "restarting")
        status, body = await d.ready()
        assert (status, body["adapters"]["slow"]["state"]) == (503, "degraded")
        assert "refused" in body["adapters"]["slow"]["reason"]

        await until(lambda: slow.attempts == 2, what="slow retried")
        slow.script.put_nowait(None)
        await until(lambda: d.state("slow") == "connected", what="slow connected")
        status, body = await d.health()
        assert status == 200 and body["status"] == "ok"
        assert set(body["adapters"].values()) == {"connected"}
        assert {"queue_depth", "commits", "busy_retries"} <= set(body["storage"])
        assert body["turns"] == {"running": 0, "waiting": 0}
        status, body = await d.ready()
        assert status == 200 and body["status"] == "ready"


class HeldOnDisconnect(ScriptedAdapter):
    """Connects at once; disconnect() waits for ``release`` (never, unless the test sets it)."""

    def __init__(self, platform: str) -> None:
        super().__init__(platform)
        self.script.put_nowait(None)
        self.release = asyncio.Event()
        self.disconnect_started = asyncio.Event()

    async def disconnect(self) -> None:
        self.disconnects += 1
        self.disconnect_started.set()
        await self.release.wait()
        await super().disconnect()


async def test_healthz_is_503_while_the_daemon_stops(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    held = HeldOnDisconnect("held")
    async with serve(gateway_home, fake_openai.base_url, {"held": held}, env=ALLOW,
                     config={"gateway": {"disconnect_timeout": 120}}) as d:
        await until(lambda: d.state("held") == "connected", what="held connected")
        assert (await d.health())[0] == 200
        d.gateway.request_stop()
        await asyncio.wait_for(held.disconnect_started.wait(), TIMEOUT)  # the stop is under way
        status, body = await d.health()
        assert (status, body["status"]) == (503, "stopping")
        status, body = await d.ready()
        assert (status, body["status"]) == (503, "stopping")
        held.release.set()


# ------------------------------------------------------------------ shutdown


async def test_shutdown_disconnects_adapters_together_within_one_bound(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    """Two adapters whose disconnect never returns: one after the other, the stop would never end."""
    stuck = {name: HeldOnDisconnect(name) for name in ("stuck-a", "stuck-b")}
    with capture_logs() as logs:
        async with serve(gateway_home, fake_openai.base_url, dict(stuck), env=ALLOW,
                         config={"gateway": {"disconnect_timeout": 0.2}}) as d:
            await until(lambda: all(d.state(n) == "connected" for n in stuck), what="stuck adapters connected")
            await chat_round_trip(d, "something for the WAL")
        # serve() asked for the stop and waited for run() to return.
    assert [a.disconnects for a in stuck.values()] == [1, 1]  # both were asked at once
    assert not any(a.release.is_set() for a in stuck.values())  # and neither ever finished
    [cut] = [e for e in logs if e["event"] == "gateway.disconnect_cut"]
    assert cut["adapters"] == ["stuck-a", "stuck-b"] and cut["log_level"] == "warning"
    # What comes after the adapters still ran: the writer drained and checkpointed (TRUNCATE) the WAL.
    wal = gateway_home / "state.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    conn = sqlite3.connect(gateway_home / "state.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM messages WHERE content = 'echo: something for the WAL'"
                            ).fetchone() == (1,)
    finally:
        conn.close()


class StubbornAdapter(HeldOnDisconnect):
    """Swallows the first cancellation of its disconnect (as a careless library might)."""

    async def disconnect(self) -> None:
        self.disconnects += 1
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            await self.release.wait()


async def test_disconnect_all_moves_on_from_a_disconnect_that_ignores_cancellation() -> None:
    quick, stubborn = ScriptedAdapter("quick"), StubbornAdapter("stubborn")
    with capture_logs() as logs:
        cut = await disconnect_all({"quick": quick, "stubborn": stubborn}, 0.05)
    assert cut == ["stubborn"] and quick.disconnects == 1 and stubborn.disconnects == 1
    assert [e["adapters"] for e in logs if e["event"] == "gateway.disconnect_cut"] == [["stubborn"]]
    stubborn.release.set()  # let its task end before the loop closes
    await asyncio.sleep(0)


# ------------------------------------------------------------------ status


async def test_status_shows_the_same_adapter_states_over_the_socket_and_from_the_state_file(
    gateway_home: Path, fake_openai: FakeOpenAI
) -> None:
    flaky = ScriptedAdapter("flaky")
    async with serve(gateway_home, fake_openai.base_url, {"flaky": flaky}, env=ALLOW) as d:
        await until(lambda: flaky.attempts == 1, what="first connect attempt")
        flaky.script.put_nowait(ConnectionError("network down"))
        await until(lambda: d.state("flaky") == "restarting", what="flaky restarting")

        def published() -> bool:
            state = read_state_file(gateway_home)
            return state is not None and state["adapters"].get("flaky", {}).get("supervision") == "restarting"

        await until(published, what="the state file to show the restart")

        async def status() -> tuple[str, dict[str, Any]]:
            env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
            env.update(HERMES_HOME=str(gateway_home), PYTHONPATH=str(ROOT))
            outs = []
            for args in (["status"], ["status", "--json"]):
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "gateway.cli", *args, env=env, stdout=asyncio.subprocess.PIPE)
                out, _ = await asyncio.wait_for(proc.communicate(), 60)
                assert proc.returncode == 0, out
                outs.append(out.decode())
            return outs[0], json.loads(outs[1])

        text_socket, json_socket = await status()
        (gateway_home / "gateway.sock").unlink()  # now only the state file answers
        text_file, json_file = await status()

    assert json_socket["source"] == "control socket" and json_file["source"].endswith("gateway.state.json")
    assert json_socket["adapters"] == json_file["adapters"]
    assert json_socket["adapters"]["flaky"]["state"] == "degraded"
    assert json_socket["adapters"]["flaky"]["supervision"] == "restarting"
    assert set(json_socket) == set(json_file)

    def adapter_lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("  ")]

    assert adapter_lines(text_socket) == adapter_lines(text_file)
    assert any(line.split()[:2] == ["flaky", "degraded"] for line in adapter_lines(text_socket))


# ------------------------------------------------------------------ ledger


async def test_failed_reply_send_is_marked_failed_in_the_ledger(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with serve(gateway_home, fake_openai.base_url, {}, env=ALLOW) as d:
        d.chat.fail_sends = 1
        assert await d.chat.say("please remember this", user="u1") is Disposition.ACCEPTED
        await until(lambda: bool(d.chat.to("u1")) or d.chat.fail_sends == 0, what="the failing send")
        sql = ("SELECT status, attempts, sent_at, text, platform, chat_id, session_key, session_id "
               "FROM gateway_outbound ORDER BY id")
        for _ in range(500):
            ledger = await d.rows(sql)
            if ledger and ledger[0][0] != "pending":
                break
            await asyncio.sleep(0.01)
        assert len(ledger) == 1
        status, attempts, sent_at, text, platform, chat_id, key, sid = ledger[0]
        assert (status, attempts, sent_at) == ("failed", 1, None)
        assert (text, platform, chat_id) == ("echo: please remember this", "testchat", "u1")
        assert key == "agent:main:testchat:dm:u1"
        bound = await d.rows("SELECT session_id FROM gateway_session_index WHERE session_key = ?", key)
        assert bound == [(sid,)]
        # The answer is in the transcript even though the platform refused it.
        contents = await d.rows("SELECT content FROM messages WHERE session_id = ? ORDER BY id", sid)
        assert contents == [("please remember this",), ("echo: please remember this",)]
        assert d.chat.to("u1") == []

        # The next reply goes out and is marked sent.
        await chat_round_trip(d, "and now?")
        for _ in range(500):
            ledger = await d.rows("SELECT status, sent_at FROM gateway_outbound ORDER BY id")
            if len(ledger) == 2 and ledger[1][0] != "pending":
                break
            await asyncio.sleep(0.01)
        assert ledger[0] == ("failed", None)
        assert ledger[1][0] == "sent" and ledger[1][1] is not None


# ------------------------------------------------------------------ dedupe


async def _insert_seen(d: Daemon, platform: str, delivery_key: str, seen_at: float) -> None:
    await d.services.store.write(
        lambda c: c.execute(
            "INSERT INTO gateway_inbound_seen (platform, delivery_key, seen_at) VALUES (?, ?, ?)",
            (platform, delivery_key, seen_at),
        )
    )


async def test_dedupe_sweep_removes_rows_older_than_retention(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    async with serve(gateway_home, fake_openai.base_url, {},
                     config={"gateway": {"dedupe_retention_hours": 1}}, env=ALLOW) as d:
        now = time.time()
        await _insert_seen(d, "testchat", "u1:old-1", now - 2 * 3600)
        await _insert_seen(d, "testchat", "u1:old-2", now - 30 * 86400)
        await _insert_seen(d, "otherchat", "x:old-3", now - 3 * 3600)
        await _insert_seen(d, "testchat", "u1:recent-1", now - 30 * 60)
        assert await d.chat.say("fresh", user="u1", message_id="fresh-1") is Disposition.ACCEPTED
        await d.chat.wait_sent(1, chat="u1", timeout=TIMEOUT)

        assert await d.services.dedupe.sweep() == 3
        left = await d.rows("SELECT platform, delivery_key FROM gateway_inbound_seen ORDER BY delivery_key")
        assert left == [("testchat", "u1:fresh-1"), ("testchat", "u1:recent-1")]
        assert await d.services.dedupe.sweep() == 0

        # What is still remembered is still a duplicate; what was swept counts as new.
        assert await d.chat.say("again", user="u1", message_id="recent-1") is Disposition.DUPLICATE
        assert await d.chat.say("again", user="u1", message_id="fresh-1") is Disposition.DUPLICATE
        assert await d.chat.say("old but new", user="u1", message_id="old-1") is Disposition.ACCEPTED
        await d.chat.wait_sent(2, chat="u1", timeout=TIMEOUT)


async def test_background_sweeper_runs_the_dedupe_sweep(gateway_home: Path, fake_openai: FakeOpenAI) -> None:
    config = {"gateway": {"dedupe_retention_hours": 1, "sweep_interval_seconds": 0.05}}
    async with serve(gateway_home, fake_openai.base_url, {}, config=config, env=ALLOW) as d:
        await _insert_seen(d, "testchat", "u1:ancient", time.time() - 5 * 3600)
        await _insert_seen(d, "testchat", "u1:young", time.time())

        async def remaining() -> list[tuple[Any, ...]]:
            return await d.rows("SELECT delivery_key FROM gateway_inbound_seen ORDER BY delivery_key")

        for _ in range(1000):
            if await remaining() == [("u1:young",)]:
                break
            await asyncio.sleep(0.01)
        assert await remaining() == [("u1:young",)]
