"""Fuzzed Slack event payloads through the real daemon: nothing crashes, nothing is lost.

Arbitrary (signed, so trusted-transport) bodies and event shapes go to the Events API route
and over the socket; afterwards the adapter still answers a well-formed message in order.
Kept modest (``max_examples``) so the file runs well under 30 s on CI.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.slack._inbound import BotIdentity, to_inbound
from tests.emulators.fake_slack import BOT_USER, FakeSlack
from tests.fakes.openai_server import FakeOpenAI

from .test_adapter import USER, WAIT, run_slack_gateway

_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
_json = st.recursive(_scalars, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                                      st.dictionaries(st.text(max_size=8), kids, max_size=4)),
                     max_leaves=12)
_ts = st.one_of(st.from_regex(r"\d{10}\.\d{6}", fullmatch=True), st.text(max_size=12), st.integers())
_events = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["message", "app_mention", "reaction_added", ""]) | _scalars,
        "subtype": st.sampled_from(["bot_message", "message_changed", "thread_broadcast"]) | _scalars,
        "user": st.sampled_from([USER, BOT_USER, "U0OTHER"]) | _scalars,
        "text": st.text(max_size=60) | _json,
        "ts": _ts,
        "thread_ts": _ts,
        "channel": st.sampled_from(["D0DM0001", "C0CHAN001", "G0PRIV001"]) | _scalars,
        "channel_type": st.sampled_from(["im", "channel", "group", "mpim"]) | _scalars,
        "bot_id": _scalars,
        "parent_user_id": _scalars,
    },
)


@settings(max_examples=300, deadline=None)
@given(event=st.one_of(_events, _json))
def test_to_inbound_never_raises(event: Any) -> None:
    msg = to_inbound(event, BotIdentity(BOT_USER), free_response=frozenset({"C0CHAN001"}))
    if msg is not None:
        assert msg.user_id not in (None, BOT_USER)
        assert msg.dedupe_id == f"{msg.chat_id}:{msg.message_id}"
        assert isinstance(msg.text, str)


async def test_fuzzed_payloads_never_crash_the_daemon(
    tmp_path: Path, fake_openai: FakeOpenAI, fake_slack: FakeSlack
) -> None:
    fake = fake_slack
    bodies: list[Any] = []

    @settings(max_examples=60, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(body=st.one_of(st.builds(fake.event_body, _events), _json,
                          st.builds(lambda e, x: {**fake.event_body(e), **x}, _events,
                                    st.dictionaries(st.sampled_from(["type", "event_id", "event"]), _json))))
    def collect(body: Any) -> None:
        bodies.append(body)

    collect()
    # Users allowed, but only plain DMs from USER are meant to be answered; count what reached turns.
    for mode in ("http", "socket"):
        async with run_slack_gateway(tmp_path / mode, fake, fake_openai.base_url, mode=mode) as gw:
            envelopes: list[str] = []
            for body in bodies:
                if mode == "http":
                    raw = body if isinstance(body, dict) else {"payload": body}
                    status = await fake.post_event(json.dumps(raw).encode())
                    assert status < 500
                else:
                    envelopes.append(await fake.send_envelope(body if isinstance(body, dict) else {"payload": body}))
            # Raw garbage (not JSON at all) on the HTTP route, signed.
            if mode == "http":
                assert await fake.post_event(b"\xff\xfenot json{") < 500
            await fake.user_says(f"still alive over {mode}")
            await fake.wait_reply("D0DM0001", None, text=f"echo: still alive over {mode}", timeout=WAIT)
            # Every envelope was acknowledged, even those Bolt could not take (else Slack resends them).
            await fake.wait_for(partial(set(envelopes).issubset, fake.acks), WAIT, what="every envelope acked")
            assert gw.state() == "connected"
            assert gw.adapter.health == "live"
