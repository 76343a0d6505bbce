"""gateway.logs: JSON lines, bound context, secret redaction — on its own and
through a real turn of the in-process daemon (stdout captured with capsys).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog

from adapters.base import Disposition, SendKind
from core.agent import TurnRequest, TurnResult
from core.errors import ModelError
from gateway import logs
from gateway.config import load_config
from gateway.daemon.build import default_agent_maker
from gateway.daemon.runner import Gateway
from gateway.logs import configure_logging, register_secrets
from gateway.routing.services import Services
from gateway.routing.turns import AgentMaker
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway.conftest import free_port, run_gateway, write_config

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-live-0f1e2d3c4b5a69788796"
MODEL_KEY = "sk-model-key-aa11bb22cc33dd44"
ALLOW = {"TESTCHAT_ALLOWED_USERS": "u1"}


@pytest.fixture(autouse=True)
def logging_sandbox() -> Iterator[None]:
    """configure_logging() changes process-wide state; put it all back afterwards."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    noisy = {name: logging.getLogger(name).level for name in logging.root.manager.loggerDict}
    secrets = set(logs._secrets)
    structlog.contextvars.clear_contextvars()
    try:
        yield
    finally:
        structlog.configure(**saved)
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, lvl in noisy.items():
            logging.getLogger(name).setLevel(lvl)
        logs.forget_secrets()
        register_secrets(secrets)
        structlog.contextvars.clear_contextvars()


def json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def json_events(out: str) -> list[dict[str, Any]]:
    """The JSON objects in a stream (for runs where other lines may appear)."""
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


# ------------------------------------------------------------------ format


def test_json_format_is_one_object_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    log = structlog.get_logger("hermes.test")
    log.info("test.first", answer=42, text="multi\nline")
    log.debug("test.hidden")  # below the level
    log.warning("test.second", who="me")
    try:
        raise ValueError("bad thing")
    except ValueError:
        log.exception("test.third")
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 3
    first, second, third = json_lines(out)
    assert (first["event"], first["level"], first["answer"], first["text"]) == ("test.first", "info", 42, "multi\nline")
    assert (second["event"], second["level"], second["who"]) == ("test.second", "warning", "me")
    assert third["event"] == "test.third" and third["level"] == "error"
    assert "ValueError: bad thing" in third["exception"]
    for obj in (first, second, third):
        stamp = datetime.fromisoformat(obj["timestamp"].replace("Z", "+00:00"))
        assert stamp.utcoffset() is not None and stamp.utcoffset().total_seconds() == 0  # type: ignore[union-attr]


def test_level_filters(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("warning", "json")
    log = structlog.get_logger("hermes.test")
    log.info("test.info")
    log.warning("test.warning")
    log.error("test.error")
    assert [e["event"] for e in json_lines(capsys.readouterr().out)] == ["test.warning", "test.error"]


def test_stdlib_records_come_out_as_redacted_json(capsys: pytest.CaptureFixture[str]) -> None:
    """Libraries (aiohttp, asyncio, httpx) log through the standard library; in
    JSON mode their records must be JSON lines too, and redacted like ours."""
    configure_logging("info", "json")
    register_secrets([SECRET])
    logging.getLogger("some.library").warning("request failed: token=%s", SECRET)
    out = capsys.readouterr().out
    assert SECRET not in out
    (record,) = json_lines(out)
    assert record["level"] == "warning" and "[redacted]" in record["event"]


def test_context_variables_are_merged(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    log = structlog.get_logger("hermes.test")
    with structlog.contextvars.bound_contextvars(platform="telegram", session_key="agent:main:telegram:dm:1"):
        log.info("test.inside", session_id="20240101_000000_abcdef01")
    log.info("test.outside")
    inside, outside = json_lines(capsys.readouterr().out)
    assert inside["platform"] == "telegram" and inside["session_key"] == "agent:main:telegram:dm:1"
    assert inside["session_id"] == "20240101_000000_abcdef01"
    assert "platform" not in outside and "session_key" not in outside


# --------------------------------------------------------------- redaction


def test_registered_secrets_are_redacted_everywhere_in_an_event(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")
    register_secrets([SECRET, None, ""])
    log = structlog.get_logger("hermes.test")
    log.info("test.field", detail=f"calling with key={SECRET}&x=1")
    log.info(f"test.event-name {SECRET}")
    log.error("test.exc_object", error=RuntimeError(f"denied for {SECRET}"))
    try:
        try:
            raise KeyError(f"inner {SECRET}")
        except KeyError as inner:
            raise RuntimeError(f"provider said: invalid key {SECRET}") from inner
    except RuntimeError:
        log.exception("test.traceback")
    with structlog.contextvars.bound_contextvars(token=SECRET):
        log.info("test.bound")
    out = capsys.readouterr().out
    assert SECRET not in out
    events = {e["event"].split(" ")[0]: e for e in json_lines(out)}
    assert events["test.field"]["detail"] == "calling with key=[redacted]&x=1"
    assert "[redacted]" in next(e for k, e in events.items() if k.startswith("test.event-name"))["event"]
    assert "[redacted]" in events["test.exc_object"]["error"]
    tb = events["test.traceback"]["exception"]
    assert "RuntimeError: provider said: invalid key [redacted]" in tb and "inner [redacted]" in tb
    assert events["test.bound"]["token"] == "[redacted]"


def test_short_secrets_are_redacted_as_whole_tokens_only() -> None:
    """A short secret (an API key someone set to "pw1") is still a secret; but as a
    substring it would eat ordinary words, so it is redacted only where it stands alone."""
    register_secrets(["abc", "pw1", "x"])
    assert logs.redact("abc") == "[redacted]"
    assert logs.redact("key=abc&next=1 token: pw1. (x)") == "key=[redacted]&next=1 token: [redacted]. ([redacted])"
    assert logs.redact('{"key": "abc"} Bearer pw1') == '{"key": "[redacted]"} Bearer [redacted]'
    # Inside longer words, identifiers, ids and names it is left alone.
    untouched = "abcdef xabc abc_1 my-abc-key pw12 apw1 max x1 index box-x"
    assert logs.redact(untouched) == untouched


def test_long_secrets_are_redacted_inside_words_too() -> None:
    register_secrets(["abcdef"])
    assert logs.redact("abc 12345 abcdef xabcdefx") == "abc 12345 [redacted] x[redacted]x"


def test_a_secret_holding_a_shorter_one_is_redacted_whole() -> None:
    # Replaced shortest first, "sk-abc" would become "sk-[redacted]" and the rest would leak.
    register_secrets(["abc", "sk-abc-0f1e2d3c", "0f1e2d"])
    assert logs.redact("key sk-abc-0f1e2d3c, abc") == "key [redacted], [redacted]"


def test_whitespace_is_never_a_secret() -> None:
    register_secrets([" ", "\t", ""])
    assert logs.redact("a b\tc") == "a b\tc"


def test_secrets_inside_structures_are_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    """A secret nested in a dict, a list or an object's repr is still a secret."""
    configure_logging("info", "json")
    register_secrets([SECRET])
    log = structlog.get_logger("hermes.test")
    log.info("test.dict", headers={"Authorization": f"Bearer {SECRET}"})
    log.info("test.list", argv=["--api-key", SECRET])
    log.info("test.object", url=httpx.URL(f"https://api.example/v1?key={SECRET}"))
    out = capsys.readouterr().out
    assert len(json_lines(out)) == 3
    assert SECRET not in out


# ------------------------------------------------------- through the daemon


async def test_turn_logs_carry_platform_session_key_and_session_id(
    gateway_home: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    configure_logging("info", "json")
    chat = ChatAdapter()
    async with run_gateway(gateway_home, fake_openai.base_url, env=ALLOW, chat=chat,
                           config={"logging": {"level": "info", "format": "json"}}) as gw:
        assert await chat.say("hello logs", user="u1") is Disposition.ACCEPTED
        await chat.wait_sent(1, chat="u1")
    conn = sqlite3.connect(f"file:{gw.db_path}?mode=ro", uri=True)
    try:
        ((session_id,),) = conn.execute("SELECT id FROM sessions").fetchall()
    finally:
        conn.close()
    events = json_events(capsys.readouterr().out)
    started = [e for e in events if e["event"] == "router.session_started"]
    assert len(started) == 1, [e["event"] for e in events]
    line = started[0]
    assert line["platform"] == "testchat"
    assert line["session_key"] == "agent:main:testchat:dm:u1"
    assert line["session_id"] == session_id
    assert line["level"] == "info" and "timestamp" in line
    # The binding is scoped to the message: daemon-wide events do not carry it.
    stopping = [e for e in events if e["event"] == "gateway.stopping"]
    assert stopping and all("session_id" not in e and "session_key" not in e for e in stopping)


class _ExplodingAgent:
    def __init__(self, exc: BaseException) -> None:
        self._exc = exc

    async def run_turn(self, request: TurnRequest) -> TurnResult:
        raise self._exc


def _exploding(exc: BaseException) -> Any:
    def maker(_client: Any) -> AgentMaker:
        def make(services: Services, request: TurnRequest) -> _ExplodingAgent:
            return _ExplodingAgent(exc)

        return make  # type: ignore[return-value]

    return maker


@asynccontextmanager
async def _daemon(home: Path, base_url: str, agent_maker: Any, chat: ChatAdapter) -> AsyncIterator[Gateway]:
    cfg = {
        "model": {"base_url": base_url, "default": "fake-model", "max_retries": 0, "timeout": 30,
                  "api_key": MODEL_KEY},
        "platforms": {"api_server": {"port": free_port()}},
        "storage": {"synchronous": "NORMAL"},
        "logging": {"format": "json", "level": "info"},
    }
    write_config(home, cfg, ALLOW)
    gw = Gateway(load_config(home, environ={}), extra_adapters={chat.platform: chat}, agent_maker=agent_maker)
    task = asyncio.create_task(gw.run())
    try:
        async def started() -> None:
            while not (gw.http_port and chat.ready.is_set()) and not task.done():
                await asyncio.sleep(0.01)

        await asyncio.wait_for(started(), 15)
        if task.done():
            task.result()
        yield gw
    finally:
        gw.request_stop()
        await asyncio.wait_for(task, 30)


@pytest.mark.parametrize(
    "failure",
    ["crash", "gateway_error", "provider_echo"],
)
async def test_failed_turn_never_leaks_the_model_key(
    gateway_home: Path, fake_openai: FakeOpenAI, capsys: pytest.CaptureFixture[str], failure: str
) -> None:
    configure_logging("info", "json")
    if failure == "crash":
        maker: Any = _exploding(RuntimeError(f"upstream rejected Authorization: Bearer {MODEL_KEY}"))
    elif failure == "gateway_error":
        maker = _exploding(ModelError(f"The provider said the key {MODEL_KEY} is over quota."))
    else:  # the real client against a provider that echoes the key back
        maker = default_agent_maker
        fake_openai.fail(400, {"error": {"message": f"Invalid request made with key {MODEL_KEY}"}})
    chat = ChatAdapter()
    async with _daemon(gateway_home, fake_openai.base_url, maker, chat):
        assert await chat.say("trigger the failure", user="u1") is Disposition.ACCEPTED
        (reply,) = await chat.wait_sent(1, chat="u1")
    out = capsys.readouterr().out
    assert reply.kind is SendKind.NOTICE
    assert MODEL_KEY not in reply.text
    assert MODEL_KEY not in out
    events = json_events(out)
    failures = [e for e in events if e["event"] in ("router.turn_crashed", "router.turn_error")]
    assert len(failures) == 1, [e["event"] for e in events]
    if failure == "crash":
        assert "Sorry, something went wrong (RuntimeError)" in reply.text
        assert "[redacted]" in failures[0]["exception"]
    elif failure == "gateway_error":
        assert reply.text.startswith("⚠️") and "[redacted]" in reply.text
        assert "[redacted]" in failures[0]["error"]
    else:
        assert reply.text.startswith("⚠️") and "HTTP 400" in reply.text
        assert fake_openai.chat_requests[-1].headers["Authorization"] == f"Bearer {MODEL_KEY}"
    # Nor does it end up in the database.
    conn = sqlite3.connect(f"file:{gateway_home / 'state.db'}?mode=ro", uri=True)
    try:
        dumped = "\n".join(conn.iterdump())
    finally:
        conn.close()
    assert MODEL_KEY not in dumped


# ------------------------------------------------------------ journald priority

_LOG_EVERY_LEVEL = """
import logging, sys, structlog
from gateway.logs import configure_logging
configure_logging("debug", sys.argv[1])
log = structlog.get_logger("hermes.test")
log.debug("test.debug")
log.info("test.info")
log.warning("test.warning")
log.error("test.error")
try:
    raise ValueError("boom")
except ValueError:
    log.exception("test.exception")
log.critical("test.critical")
logging.getLogger("some.library").error("library error")
"""


def _log_to_file(tmp_path: Path, fmt: str, journal: str | None) -> str:
    """A real process logging to a file as its stdout; ``journal``: "match" makes
    $JOURNAL_STREAM name that file (as systemd does for a service), "other" another file."""
    out = tmp_path / f"out-{fmt}-{journal}.log"
    out.touch()
    env = {k: v for k, v in os.environ.items() if k != "JOURNAL_STREAM"}
    env["PYTHONPATH"] = str(ROOT)
    if journal is not None:
        st = (out if journal == "match" else tmp_path).stat()
        env["JOURNAL_STREAM"] = f"{st.st_dev}:{st.st_ino}"
    with out.open("w") as stdout:
        subprocess.run([sys.executable, "-c", _LOG_EVERY_LEVEL, fmt], stdout=stdout, env=env, check=True,
                       timeout=60, cwd=ROOT)
    return out.read_text()


def test_json_lines_carry_the_syslog_priority_for_journald(tmp_path: Path) -> None:
    lines = _log_to_file(tmp_path, "json", "match").splitlines()
    priorities = [line[:line.index(">") + 1] for line in lines]
    events = [json.loads(line[line.index(">") + 1:])["event"] for line in lines]
    assert list(zip(events, priorities, strict=True)) == [
        ("test.debug", "<7>"), ("test.info", "<6>"), ("test.warning", "<4>"), ("test.error", "<3>"),
        ("test.exception", "<3>"), ("test.critical", "<2>"), ("library error", "<3>")]


def test_without_journald_json_lines_and_the_console_format_are_unchanged(tmp_path: Path) -> None:
    for journal in (None, "other"):  # no journal, or stdout is not the journal's stream
        lines = _log_to_file(tmp_path, "json", journal).splitlines()
        assert len(lines) == 7 and all(json.loads(line)["event"] for line in lines)
    pretty = _log_to_file(tmp_path, "pretty", "match")
    assert "test.error" in pretty and not any(line.startswith("<") for line in pretty.splitlines())


# ------------------------------------------------------------ repeated lines


def test_repeated_identical_lines_are_dropped_beyond_the_burst_and_counted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A flood of one line (asyncio's accept error when descriptors run out came at thousands of lines
    a second) leaves a few lines, and the next one after the window says how many were dropped."""
    configure_logging("info", "json")
    now = [1000.0]
    logs.install_repeat_limit(logs.RepeatLimit(burst=3, window=60.0, clock=lambda: now[0]))
    log = structlog.get_logger("hermes.test")
    loop = asyncio.new_event_loop()
    try:
        def accept_error() -> None:  # what asyncio's accept loop reports on EMFILE
            loop.call_exception_handler({"message": "socket.accept() out of system resource",
                                         "exception": OSError(24, "Too many open files")})

        def retry_failed(i: int) -> None:  # its retries after the server closed: only the handle differs
            loop.call_exception_handler({"message": "Exception in callback BaseSelectorEventLoop._start_serving()",
                                         "exception": OSError(9, "Bad file descriptor"),
                                         "handle": f"<TimerHandle when={i}.5 _start_serving()>"})

        for i in range(100):
            log.error("test.flood", port=8642)
            accept_error()
            retry_failed(i)
            log.info("test.counted", n=i)  # differs every time: not a repeat
        first = json_lines(capsys.readouterr().out)
        now[0] += 61
        log.error("test.flood", port=8642)
        accept_error()
        later = json_lines(capsys.readouterr().out)
    finally:
        loop.close()
    assert [e["event"] for e in first].count("test.flood") == 3
    assert sum(1 for e in first if e["event"].startswith("socket.accept() out of system resource")) == 3
    assert sum(1 for e in first if e["event"].startswith("Exception in callback")) == 3
    assert [e["n"] for e in first if e["event"] == "test.counted"] == list(range(100))
    flood, accept = later
    assert flood["event"] == "test.flood" and flood["repeats_dropped"] == 97
    assert accept["logger"] == "asyncio" and "[97 identical lines dropped]" in accept["event"]
    assert "Too many open files" in accept["exception"]


def test_repeat_limit_counts_per_line_and_forgets_the_oldest_kinds() -> None:
    now = [0.0]
    limit = logs.RepeatLimit(burst=2, window=10.0, max_keys=2, clock=lambda: now[0])
    assert [limit.admit("a") for _ in range(4)] == [0, 0, None, None]
    assert [limit.admit("b") for _ in range(3)] == [0, 0, None]
    now[0] = 5.0
    assert limit.admit("a") is None  # same window
    now[0] = 10.0
    assert limit.admit("a") == 3  # a new window: the three dropped are reported once
    assert limit.admit("a") == 0
    assert limit.admit("c") == 0  # a third kind: "b", the oldest, is forgotten with its count
    assert limit.admit("b") == 0
