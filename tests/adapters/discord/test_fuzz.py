"""Fuzzed MESSAGE_CREATE payloads through the real discord.py into the real daemon: nothing crashes,
the connection is never restarted, and the bot keeps answering.

Each example dispatches one payload (mostly well-formed with odd values, sometimes with fields missing
or of the wrong type), then a DM from the allowed user; its answer proves the gateway loop read past
the fuzzed frame and the adapter is alive. Under ``CI=true`` the example count is kept small.
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.emulators.fake_discord import FakeDiscord
from tests.fakes.openai_server import FakeOpenAI

from .test_adapter import RunningDiscord, run_discord_gateway

FUZZ_EXAMPLES = 60 if os.environ.get("CI") == "true" else 150
WAIT = 15.0
_MISSING = object()
_counter = itertools.count(1)

JUNK = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                 st.text(max_size=20), st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5),
                                                                                           st.integers(), max_size=2))
SNOWFLAKE = st.integers(1, 2**63 - 1).map(str)
CONTENT = st.one_of(
    st.text(max_size=300),
    st.text(alphabet=st.sampled_from(list("<@!>#&:0123456789 `*_~|\n")), max_size=80),
    st.sampled_from(["", " ", "/help", "/status extra", "```", "\ud800 lone surrogate", "x" * 4000]),
)


def maybe(strategy: st.SearchStrategy[Any], junk_weight: int = 1) -> st.SearchStrategy[Any]:
    """Mostly ``strategy``; sometimes the field is missing or junk."""
    return st.one_of(*[strategy] * 20, *[st.just(_MISSING)] * junk_weight, *[JUNK] * junk_weight)


def payload_strategy(fake: FakeDiscord, thread_id: str) -> st.SearchStrategy[dict[str, Any]]:
    bot_user = {**fake.bot}
    people = st.sampled_from([fake.user, fake.add_user("fuzzer"), bot_user])
    author = st.one_of(
        people,
        st.fixed_dictionaries({"id": maybe(SNOWFLAKE), "username": maybe(st.text(max_size=10)),
                               "discriminator": st.just("0"), "avatar": st.none(), "bot": maybe(st.booleans())}),
    )
    channel = st.sampled_from(["dm", fake.general, thread_id, "unknown"])
    mention = st.sampled_from([[], [bot_user], [fake.user]])
    reference = st.one_of(st.none(), st.fixed_dictionaries({"message_id": maybe(SNOWFLAKE)}))
    return st.fixed_dictionaries(
        {
            "content": maybe(CONTENT),
            "author": maybe(author),
            "type": maybe(st.sampled_from([0, 0, 0, 19, 6, 7, 18, 21, 9999])),
            "mentions": maybe(mention),
            "channel": channel,
            "message_reference": reference,
            "webhook_id": st.one_of(*[st.just(_MISSING)] * 5, SNOWFLAKE),
            "attachments": maybe(st.just([])),
            "embeds": maybe(st.just([])),
            "tts": maybe(st.booleans()),
            "id": maybe(SNOWFLAKE, junk_weight=0),
            "timestamp": maybe(st.just("2026-01-01T00:00:00+00:00")),
        }
    )


def _drop_missing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_missing(v) for k, v in value.items() if v is not _MISSING}
    if isinstance(value, list):
        return [_drop_missing(v) for v in value if v is not _MISSING]
    return value


def build(fake: FakeDiscord, drawn: dict[str, Any]) -> dict[str, Any]:
    where = drawn.pop("channel")
    if where == "dm":
        channel = fake.dm_channel()
    elif where == "unknown":
        channel = {"id": str(fake.snowflake()), "guild_id": fake.guild_id}
    else:
        channel = fake.channels[where]
    base = fake.message_payload(channel, fake.user, "base")  # a well-formed starting point
    for key, value in drawn.items():
        if value is _MISSING:
            base.pop(key, None)
        elif value is not None or key != "message_reference":
            base[key] = _drop_missing(value)
    return base


@pytest.fixture
async def fuzz_gateway(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_discord: FakeDiscord
) -> AsyncIterator[RunningDiscord]:
    async with run_discord_gateway(tmp_path / "h", fake_discord, fake_openai.base_url,
                                   discord={"require_mention": True}) as gw:
        started = time.monotonic()
        yield gw
        await assert_still_answering(gw, "at the end")
        assert gw.gateway.adapter_states["discord"].restarts == 0
        assert len(fake_discord.identifies) == 1  # never reconnected
        print(f"fuzz: {FUZZ_EXAMPLES} examples in {time.monotonic() - started:.1f}s")


async def assert_still_answering(gw: RunningDiscord, tag: str) -> None:
    text = f"still answering {tag}?"
    await gw.fake.user_says(text)
    await gw.fake.wait_sent(1, timeout=WAIT, match=lambda m: m["text"] == f"echo: {text}")
    assert gw.state() == "connected"


_threads: dict[int, str] = {}


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(data=st.data())
async def test_fuzzed_message_create_never_crashes(fuzz_gateway: RunningDiscord, data: st.DataObject) -> None:
    gw = fuzz_gateway
    fake = gw.fake
    if id(fake) not in _threads:
        made = await gw.adapter.create_thread(fake.general, "fuzz thread")
        assert made is not None
        _threads[id(fake)] = made
    payload = build(fake, data.draw(payload_strategy(fake, _threads[id(fake)])))
    await fake.dispatch("MESSAGE_CREATE", payload)
    await assert_still_answering(gw, f"#{next(_counter)}")
    assert gw.adapter.health == "live"
