"""``hermes-gateway insights`` as a user runs it: the console script in a subprocess, on a
state.db whose token columns were written through StateStore."""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from storage import StateStore, WriterSettings
from tests.gateway._console import ROOT, SCRIPT, TIMEOUT, Result, console_env

DAY = 86400.0
PRICES = {"m-priced": {"input": 1.0, "output": 10.0, "cache_read": 0.1}}


def insights(home: Path, *args: str) -> Result:
    proc = subprocess.run([str(SCRIPT), "insights", *args], env=console_env(home), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT)
    return Result(proc.returncode, proc.stdout, proc.stderr)


async def _seed(db: Path) -> None:
    now = time.time()
    sessions: list[tuple[str, str, str, float, dict[str, Any]]] = [
        ("s-cli", "cli", "m-priced", now - 60, {"input_tokens": 1_000_000, "cache_read_tokens": 200_000,
                                                "output_tokens": 100_000, "api_call_count": 3}),
        ("s-tg-free", "telegram", "m-free", now - 30, {"input_tokens": 500, "output_tokens": 50,
                                                       "api_call_count": 1}),
        ("s-tg-old", "telegram", "m-priced", now - 3 * DAY, {"input_tokens": 2_000_000, "api_call_count": 2}),
        ("s-ancient", "cli", "m-priced", now - 40 * DAY, {"input_tokens": 9_000_000, "api_call_count": 9}),
    ]
    async with StateStore(db, writer_settings=WriterSettings(synchronous="NORMAL")) as store:
        for sid, source, model, started, used in sessions:
            await store.create_session(sid, source, model=model, started_at=started)
            await store.record_usage(sid, **used)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "hermes"
    asyncio.run(_seed(h / "state.db"))
    (h / "config.yaml").write_text(yaml.safe_dump({"pricing": PRICES}))
    return h


def _line(out: str, start: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(start))


def test_tokens_calls_and_cost_per_day_source_and_model(home: Path) -> None:
    r = insights(home)
    assert r.code == 0, r.err
    # The last 30 days: the 40-day-old session is not counted.
    assert "3 sessions, 6 model calls, 3,000,500 input and 100,050 output tokens" in r.out
    # 800k fresh input at $1 + 200k cache reads at $0.10 + 100k output at $10, and 2M input at $1;
    # m-free has no price, so the total is a lower bound.
    assert "Estimated cost: $3.8200+" in r.out
    assert _line(r.out, "cli ").split()[-1] == "$1.8200"
    assert _line(r.out, "telegram ").split()[-1] == "$2.0000+"
    assert _line(r.out, "m-free ").split()[-1] == "—"
    assert _line(r.out, "m-priced ").split()[1:3] == ["2", "5"]  # sessions, calls
    days = [line.split()[0] for line in r.out.split("Day", 1)[1].split("Source", 1)[0].splitlines()[2:] if line]
    assert len(days) == 2 and days == sorted(days)
    assert "No price for: m-free" in r.out


def test_days_and_source_narrow_it(home: Path) -> None:
    r = insights(home, "--days", "1", "--source", "telegram")
    assert r.code == 0, r.err
    assert "Usage in the last 1 day, telegram only: 1 sessions, 1 model calls" in r.out
    assert "No cost: set pricing.<model> in config.yaml" in r.out
    assert insights(home, "--days", "0").code == 2
    assert "No sessions in the last 30 days, discord only." in insights(home, "--source", "discord").out


def test_an_invalid_price_is_named_and_the_tokens_still_shown(home: Path) -> None:
    (home / "config.yaml").write_text(yaml.safe_dump({"pricing": {"m-priced": {"input": -1, "output": 10}}}))
    r = insights(home)
    assert r.code == 0
    assert "pricing.m-priced.input" in r.err
    assert "3 sessions" in r.out and "Estimated cost" not in r.out
