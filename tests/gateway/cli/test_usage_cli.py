"""``hermes-gateway usage`` as a user runs it (the console script in a subprocess) on the state.db a
real daemon wrote while the scripted model reported its ``usage``: the figures are exact sums."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import typer

from gateway.cli.usage import parse_since
from tests.fakes.openai_server import FakeOpenAI
from tests.gateway._chat_adapter import ChatAdapter
from tests.gateway._console import ROOT, SCRIPT, TIMEOUT, Result, console_env
from tests.gateway.conftest import run_gateway

MODELS = {"allowed": ["fake-model", {"name": "big-model", "prices": {"prompt": 3, "completion": 15}}]}


def usage_cli(home: Path, *args: str) -> Result:
    proc = subprocess.run([str(SCRIPT), "usage", *args], env=console_env(home), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def _used(prompt: int, completion: int, cached: int = 0) -> dict[str, object]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


async def test_per_user_sums_of_what_the_model_reported(gateway_home: Path) -> None:
    chat = ChatAdapter()
    async with FakeOpenAI() as fake, run_gateway(gateway_home, fake.base_url, config={"models": MODELS},
                                                  env={"TESTCHAT_ALLOWED_USERS": "u1,u2"}, chat=chat) as run:
        async def say(text: str, user: str) -> None:
            before = len(chat.to(user))
            await chat.say(text, user=user)
            await chat.wait_sent(before + 1, chat=user)

        fake.reply("a", usage=_used(100, 10, 30))
        await say("one", "u1")
        await say("/model big-model", "u1")
        fake.reply("b", usage=_used(2000, 100, 500))
        await say("two", "u1")
        await say("/new", "u1")  # a second session of the same person
        fake.reply("c", usage=_used(50, 5))
        await say("three", "u1")
        fake.reply("d", usage=_used(7, 3))
        await say("hello", "u2")
        assert run.db_path.exists()
    r = usage_cli(gateway_home, "--json")
    assert r.code == 0, r.err
    by_user = {row["user_id"]: row for row in json.loads(r.out)}
    assert by_user["u1"] == {"platform": "testchat", "user_id": "u1", "sessions": 2, "model_calls": 3,
                             "prompt_tokens": 2150, "cached_tokens": 530, "completion_tokens": 115,
                             "cost_usd": pytest.approx((2000 * 3 + 100 * 15) / 1e6)}
    assert by_user["u2"]["model_calls"] == 1 and by_user["u2"]["prompt_tokens"] == 7
    assert by_user["u2"]["cost_usd"] is None
    table = usage_cli(gateway_home)
    assert table.code == 0, table.err
    line = next(x for x in table.out.splitlines() if x.startswith("testchat:u1"))
    assert line.split() == ["testchat:u1", "2", "3", "2,150", "530", "115", "$0.0075"]
    assert "testchat:u2" in table.out
    later = usage_cli(gateway_home, "--since", "2099-01-01")
    assert later.code == 0 and later.out.startswith("No sessions started since 2099-01-01")
    bad = usage_cli(gateway_home, "--since", "last tuesday")
    assert bad.code == 2 and "neither a duration" in bad.err


def test_since_takes_durations_and_dates() -> None:
    now = 1_000_000.0
    assert parse_since("7d", now=now) == now - 7 * 86400
    assert parse_since("12h", now=now) == now - 12 * 3600
    assert parse_since("2w", now=now) == now - 14 * 86400
    assert parse_since("2026-11-01") == time.mktime((2026, 11, 1, 0, 0, 0, 0, 0, -1))
    with pytest.raises(typer.BadParameter):
        parse_since("soon")
