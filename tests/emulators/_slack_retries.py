"""Slack's retries of an event its app did not acknowledge, for ``FakeSlack``.

As Slack documents them (Events API, "Graceful retries"): a delivery fails when the HTTP answer
is not 2xx (``http_error``), does not come within 3 s (``http_timeout``; Slack does not wait for
it), or the connection fails (``connection_failed``); in Socket Mode, when the envelope is not
acked within 3 s (``timeout``). A failed delivery is retried three times, about at once, after
about 1 minute and after about 5 minutes (``SLACK_RETRY_DELAYS``); the retry carries
``X-Slack-Retry-Num`` (1..3) and ``X-Slack-Retry-Reason`` over HTTP, ``retry_attempt`` and
``retry_reason`` in a new envelope (new ``envelope_id``, same ``event_id``) over Socket Mode.
After the third, Slack gives up on the event (``events_given_up``).

Controls on the fake: ``retry_delays`` (the pause before retry 1, 2, 3; Slack's by default, a
test sets its own), ``ack_timeout`` (3 s), ``retry_now()`` (retries waiting out a pause go at
once), ``event_retries = False`` (no retries at all). ``event_deliveries`` records every
delivery: ``event_id``, ``retry``, ``reason``, ``transport``, ``envelope_id`` and ``outcome``
(None while it is out; the HTTP status; ``"acked"``; ``"timeout"``; ``"connection_failed"``), and
over HTTP the ``answer`` (the first 200 bytes of the body).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import aiohttp

__all__ = ["ACK_TIMEOUT", "SLACK_RETRY_DELAYS", "EventRetries"]

#: Slack's pauses before its retries 1, 2 and 3: at once, about a minute, about five minutes.
SLACK_RETRY_DELAYS = (0.0, 60.0, 300.0)
#: How long Slack waits for an HTTP answer or a Socket Mode ack.
ACK_TIMEOUT = 3.0


class EventRetries:
    """Mixed into ``FakeSlack``: events delivered (``deliver_retrying``) and retried like Slack."""

    #: the pause before retry 1, 2, 3 (Slack's by default)
    retry_delays: tuple[float, ...] = SLACK_RETRY_DELAYS
    ack_timeout: float = ACK_TIMEOUT
    #: False: an event is delivered once, whatever the answer
    event_retries: bool = True

    if TYPE_CHECKING:  # provided by FakeSlack and FakeServer
        acks: list[str]
        _http: aiohttp.ClientSession | None
        events_url: str | None
        signing_secret: str
        _ids: itertools.count[int]

        @property
        def open_sockets(self) -> list[Any]: ...
        def _live_socket(self) -> Any: ...
        def _notify(self) -> None: ...
        async def _wait(self, predicate: Callable[[], Any], timeout: float | None, *, poll: float | None = None,
                        closing_ok: bool = False) -> Any: ...

    def _init_retries(self) -> None:
        #: every delivery of an event (first and retries), in order
        self.event_deliveries: list[dict[str, Any]] = []
        #: the event ids Slack gave up on (its last retry failed too)
        self.events_given_up: list[str] = []
        self._retrying: set[asyncio.Task[None]] = set()
        self._retry_wake = asyncio.Event()

    def retry_now(self) -> None:
        """Retries waiting out their pause are sent at once (tests cannot wait minutes)."""
        self._retry_wake.set()
        self._retry_wake = asyncio.Event()

    def deliveries_of(self, event_id: str) -> list[dict[str, Any]]:
        return [d for d in self.event_deliveries if d["event_id"] == event_id]

    async def _stop_retries(self) -> None:
        for task in list(self._retrying):
            task.cancel()
        if self._retrying:
            await asyncio.wait(set(self._retrying), timeout=1.0)

    async def deliver_retrying(self, body: dict[str, Any], socket: bool) -> Any:
        """The first delivery of ``body`` (its status over HTTP, None if none came within
        ``ack_timeout``; its envelope id over Socket Mode); retries follow in the background."""
        first = self._record(body, 0, "", "socket" if socket else "http")
        if socket:
            first["envelope_id"] = await self._send_event_envelope(body, 0, "")
        task = asyncio.create_task(self._retry_loop(body, first, socket), name="fake-slack:retries")
        self._retrying.add(task)
        task.add_done_callback(self._retrying.discard)
        task.add_done_callback(lambda _: self._notify())
        if socket:
            return first["envelope_id"]
        await self._wait(lambda: first["outcome"] is not None or task.done(), None, closing_ok=True)
        failed = task.exception() if task.done() and not task.cancelled() else None
        if failed is not None:
            raise failed  # the delivery could not be made: say so rather than wait for its answer
        status = first["outcome"]
        return status if isinstance(status, int) else None

    def _record(self, body: dict[str, Any], retry: int, reason: str, transport: str) -> dict[str, Any]:
        delivery = {"event_id": body.get("event_id"), "retry": retry, "reason": reason, "transport": transport,
                    "envelope_id": None, "outcome": None}
        self.event_deliveries.append(delivery)
        self._notify()
        return delivery

    async def _retry_loop(self, body: dict[str, Any], delivery: dict[str, Any], socket: bool) -> None:
        retry = 0
        while True:
            reason = await self._outcome(body, delivery, socket)
            if reason is None:
                return  # acknowledged
            if not self.event_retries:
                return
            if retry >= len(self.retry_delays):
                self.events_given_up.append(str(body.get("event_id")))
                self._notify()
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._retry_wake.wait(), self.retry_delays[retry])
            retry += 1
            delivery = self._record(body, retry, reason, "socket" if socket else "http")
            if socket:
                delivery["envelope_id"] = await self._send_event_envelope(body, retry, reason)

    async def _outcome(self, body: dict[str, Any], delivery: dict[str, Any], socket: bool) -> str | None:
        """Wait for one delivery's answer: None when acknowledged, else the next retry's reason."""
        if socket:
            envelope_id = delivery["envelope_id"]
            acked = envelope_id is not None and await self._wait(lambda: envelope_id in self.acks, self.ack_timeout)
            delivery["outcome"] = "acked" if acked else "timeout"
            self._notify()
            return None if acked else "timeout"
        from ._slack_interactions import sign

        assert self._http is not None and self.events_url is not None, "set fake.events_url before delivering"
        raw = json.dumps(body).encode()
        headers = sign(raw, self.signing_secret)
        if delivery["retry"]:
            headers |= {"X-Slack-Retry-Num": str(delivery["retry"]), "X-Slack-Retry-Reason": delivery["reason"]}
        try:
            async with self._http.post(self.events_url, data=raw, headers=headers,
                                       timeout=aiohttp.ClientTimeout(total=self.ack_timeout)) as resp:
                delivery["answer"] = (await resp.read())[:200]
                delivery["outcome"] = resp.status
        except TimeoutError:
            delivery["outcome"] = "timeout"
        except aiohttp.ClientError:
            delivery["outcome"] = "connection_failed"
        self._notify()
        outcome = delivery["outcome"]
        if isinstance(outcome, int):
            return None if 200 <= outcome < 300 else "http_error"
        return "http_timeout" if outcome == "timeout" else "connection_failed"

    async def _send_event_envelope(self, body: dict[str, Any], retry: int, reason: str) -> str | None:
        """Send ``body`` in a new ``events_api`` envelope over the newest live socket (None: none is live)."""
        if not any(not s.silent for s in self.open_sockets):
            return None
        envelope_id = f"env-{next(self._ids)}"
        try:
            await self._live_socket().ws.send_json({
                "envelope_id": envelope_id, "type": "events_api", "payload": body, "accepts_response_payload": False,
                "retry_attempt": retry, "retry_reason": reason,
            })
        except (ConnectionResetError, aiohttp.ClientError):
            return None  # the client died and its socket is closing: as if none were live (Slack retries)
        return envelope_id
