"""FakeSlack retries an unacknowledged event like Slack: over HTTP (a non-2xx answer, or none within
3 s) and over Socket Mode (no ack within 3 s), three times, then gives up. Driven by a real aiohttp
server and a real websocket client on 127.0.0.1 (no gateway code involved)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp import web
from slack_sdk.signature import SignatureVerifier

from tests.emulators.fake_slack import APP_TOKEN, SIGNING_SECRET, SLACK_RETRY_DELAYS, FakeSlack

Answer = Callable[[web.Request, dict[str, Any]], Any]


@asynccontextmanager
async def events_server(fake: FakeSlack, answer: Answer, got: list[dict[str, Any]]) -> AsyncIterator[None]:
    """An Events API endpoint that checks the signature, records each request, and answers ``answer``."""
    verifier = SignatureVerifier(SIGNING_SECRET)

    async def handle(request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        assert verifier.is_valid(raw.decode(), request.headers["X-Slack-Request-Timestamp"],
                                 request.headers["X-Slack-Signature"])
        seen = {"body": json.loads(raw), "retry_num": request.headers.get("X-Slack-Retry-Num"),
                "retry_reason": request.headers.get("X-Slack-Retry-Reason")}
        got.append(seen)
        status = await answer(request, seen)
        return web.Response(status=status)

    app = web.Application()
    app.router.add_post("/slack/events", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.events_url = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
    try:
        yield
    finally:
        await runner.cleanup()


def test_slacks_own_schedule_is_the_default() -> None:
    fake = FakeSlack()
    assert fake.retry_delays == SLACK_RETRY_DELAYS == (0.0, 60.0, 300.0)
    assert fake.ack_timeout == 3.0


async def test_an_http_error_is_retried_with_the_retry_headers_until_a_2xx(fake_slack: FakeSlack) -> None:
    fake, got = fake_slack, []
    fake.retry_delays = (0.0, 0.05, 0.05)

    async def answer(request: web.Request, seen: dict[str, Any]) -> int:
        return 503 if len(got) < 3 else 200

    async with events_server(fake, answer, got):
        body = await fake.user_says("hello?")
        assert await fake.wait_for(lambda: len(fake.deliveries_of(body["event_id"])) == 3
                                   and fake.deliveries_of(body["event_id"])[-1]["outcome"] == 200, 5)
    assert [(g["retry_num"], g["retry_reason"]) for g in got] == [(None, None), ("1", "http_error"),
                                                                 ("2", "http_error")]
    assert {g["body"]["event_id"] for g in got} == {body["event_id"]}
    assert [d["outcome"] for d in fake.deliveries_of(body["event_id"])] == [503, 503, 200]
    assert not fake.events_given_up


async def test_no_answer_within_the_ack_timeout_is_an_http_timeout_and_slack_gives_up_after_three(
    fake_slack: FakeSlack
) -> None:
    fake, got = fake_slack, []
    fake.retry_delays, fake.ack_timeout = (0.0, 0.0, 0.0), 0.3
    release = asyncio.Event()

    async def answer(request: web.Request, seen: dict[str, Any]) -> int:
        await release.wait()  # never within the ack timeout
        return 200

    async with events_server(fake, answer, got):
        body = await fake.user_says("anyone?")
        await fake.wait_for(lambda: body["event_id"] in fake.events_given_up, 10)
        release.set()
    assert [(g["retry_num"], g["retry_reason"]) for g in got] == [
        (None, None), ("1", "http_timeout"), ("2", "http_timeout"), ("3", "http_timeout")]
    assert [d["outcome"] for d in fake.deliveries_of(body["event_id"])] == ["timeout"] * 4


async def test_a_retry_waits_out_its_pause_unless_told_to_go_now(fake_slack: FakeSlack) -> None:
    fake, got = fake_slack, []
    fake.retry_delays = (3600.0, 3600.0, 3600.0)

    async def answer(request: web.Request, seen: dict[str, Any]) -> int:
        return 200 if seen["retry_num"] == "1" else 500

    async with events_server(fake, answer, got):
        body = await fake.user_says("later")
        assert [d["outcome"] for d in fake.deliveries_of(body["event_id"])] == [500]
        fake.retry_now()
        await fake.wait_for(lambda: [d["outcome"] for d in fake.deliveries_of(body["event_id"])] == [500, 200], 5)
    assert [g["retry_num"] for g in got] == [None, "1"]


async def test_an_envelope_not_acked_is_redelivered_in_a_new_envelope(fake_slack: FakeSlack) -> None:
    fake = fake_slack
    fake.retry_delays, fake.ack_timeout = (0.0, 0.0, 0.0), 0.3
    async with aiohttp.ClientSession() as http:
        opened = await (await http.post(f"{fake.api_base_url}apps.connections.open",
                                        headers={"Authorization": f"Bearer {APP_TOKEN}"})).json()
        async with http.ws_connect(opened["url"]) as ws:
            assert (await ws.receive_json(timeout=5))["type"] == "hello"
            body = await fake.user_says("over the socket")
            envelopes = [await ws.receive_json(timeout=5) for _ in range(3)]  # the first two not acked
            await ws.send_json({"envelope_id": envelopes[2]["envelope_id"]})
            await fake.wait_for(lambda: fake.deliveries_of(body["event_id"])[-1]["outcome"] == "acked", 5)
    assert [(e["retry_attempt"], e["retry_reason"]) for e in envelopes] == [(0, ""), (1, "timeout"), (2, "timeout")]
    assert len({e["envelope_id"] for e in envelopes}) == 3
    assert {e["payload"]["event_id"] for e in envelopes} == {body["event_id"]}
    assert [d["outcome"] for d in fake.deliveries_of(body["event_id"])] == ["timeout", "timeout", "acked"]
    assert not fake.events_given_up


async def test_an_event_while_no_socket_is_connected_is_retried_over_the_next_one(fake_slack: FakeSlack) -> None:
    """Socket Mode with nothing connected (a node died, the next not yet there): the delivery fails
    and is retried like an unacked one, never posted over HTTP nor waited on for ever."""
    fake = fake_slack
    fake.retry_delays, fake.ack_timeout = (0.0, 60.0, 60.0), 0.3
    body = await asyncio.wait_for(fake.user_says("while nobody listens"), 5)
    # the first delivery and the first retry (at once) fail: nothing is connected
    await fake.wait_for(lambda: [d["outcome"] for d in fake.deliveries_of(body["event_id"])] == ["timeout"] * 2, 5)
    async with aiohttp.ClientSession() as http:
        opened = await (await http.post(f"{fake.api_base_url}apps.connections.open",
                                        headers={"Authorization": f"Bearer {APP_TOKEN}"})).json()
        async with http.ws_connect(opened["url"]) as ws:
            assert (await ws.receive_json(timeout=5))["type"] == "hello"
            fake.retry_now()  # the second retry goes now, over this socket
            envelope = await ws.receive_json(timeout=5)
            await ws.send_json({"envelope_id": envelope["envelope_id"]})
            await fake.wait_for(lambda: fake.deliveries_of(body["event_id"])[-1]["outcome"] == "acked", 5)
    assert envelope["payload"]["event_id"] == body["event_id"]
    assert (envelope["retry_attempt"], envelope["retry_reason"]) == (2, "timeout")
    assert {d["transport"] for d in fake.deliveries_of(body["event_id"])} == {"socket"}
