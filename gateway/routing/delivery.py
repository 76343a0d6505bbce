"""Outbound delivery with a durable ledger.

Every reply is recorded in state.db before it is sent and marked sent after,
so a reply cut off by a crash is sent once more after restart (if it is
recent), marked as recovered. Splitting to the platform's limit happens here. On several nodes
a node not connected to a platform relays through the ledger to one that is (``send_relayed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sqlite3
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import structlog

from adapters.base import Adapter, OutboundMessage, SendKind
from core.media import human_size
from gateway.errors import GatewayError
from gateway.logs import redact
from gateway.media import from_ledger, to_ledger
from storage import MediaStore, PendingReply, Store, outbound

if TYPE_CHECKING:
    from gateway.routing.metrics import GatewayMetrics
    from gateway.routing.streaming import StreamDriver

log = structlog.get_logger("hermes.delivery")

RECOVERED_PREFIX = "↻ (recovered after a restart) "
#: what a streamed answer that a crash cut off before it was stored shows after the restart
INTERRUPTED_NOTE = "⚠️ This answer was cut off by a restart before it was finished."
#: how long an answer nobody waits for in a lane waits for its platform to connect (``send_when_ready``)
READY_WAIT = 60.0


def record_reply(conn: sqlite3.Connection, out: OutboundMessage, session_key: str | None,
                 session_id: str | None) -> int:
    """The outbox row of a reply, inside the caller's transaction; its id.

    The router writes it in the same transaction as the agent's answer, so an
    answer is never stored without the obligation to deliver it, and the turn
    needs no commit of its own for it.
    """
    return outbound.record(conn, session_key=session_key, session_id=session_id, platform=out.platform,
                           chat_id=out.chat_id, thread_id=out.thread_id, reply_to=out.reply_to, text=out.text,
                           now=time.time(), files=to_ledger(out.files))


def record_stream(conn: sqlite3.Connection, target: OutboundMessage, session_key: str | None,
                  session_id: str | None, message_ids: tuple[str, ...], ledger_id: int | None) -> int:
    """The outbox row of an answer being streamed, with the messages it shows so far; its id.

    Written when a stream shows its first message (and again when it adds one), so a
    crash mid-stream leaves the ids a restart needs to finish or mark those messages.
    """
    if ledger_id is not None and outbound.set_message_ids(conn, ledger_id, message_ids):
        return ledger_id
    return outbound.open_stream(conn, session_key=session_key, session_id=session_id, platform=target.platform,
                                chat_id=target.chat_id, thread_id=target.thread_id, reply_to=target.reply_to,
                                message_ids=message_ids, now=time.time())


def settle_reply(conn: sqlite3.Connection, out: OutboundMessage, session_key: str | None, session_id: str | None,
                 ledger_id: int | None) -> int:
    """The outbox row of a stored answer: the stream's row when it has one, else a new one."""
    if ledger_id is not None and outbound.settle_stream(conn, ledger_id, out.text, session_id, to_ledger(out.files)):
        return ledger_id
    return record_reply(conn, out, session_key, session_id)


def _put_back(begun: int, rest: list[PendingReply], conn: sqlite3.Connection) -> None:
    """Relayed rows taken when their send stopped: the one under way may be partly out (not again)."""
    outbound.mark(conn, begun, "expired", "stopped while sending", now=time.time())
    for row in rest:
        outbound.mark(conn, row.id, "relay", None, now=time.time())


def with_file_links(adapter: Adapter, out: OutboundMessage) -> OutboundMessage:
    """``out`` as an adapter that cannot send files shows it: a line per file, with its link
    where the adapter serves files (the HTTP API), and no files left to send."""
    if not out.files or adapter.max_upload_bytes > 0:
        return out
    lines = []
    for f in out.files:
        link = adapter.file_link(f)
        lines.append(f"📎 {f.name} ({human_size(f.size)}): {link}" if link
                     else f"📎 {f.name} ({human_size(f.size)}) could not be sent here.")
    text = "\n\n".join(p for p in (out.text, "\n".join(lines)) if p)
    return dataclasses.replace(out, text=text, files=())


class Delivery:
    def __init__(self, store: Store, adapters: Mapping[str, Adapter],
                 metrics: GatewayMetrics | None = None, *, blobs: MediaStore | None = None) -> None:
        self._store = store
        self._adapters = adapters
        #: where the files of replies are kept (a retry after a crash sends them from there)
        self._blobs = blobs
        #: None in tests that build a bare Delivery
        self.metrics = metrics
        self._marks: set[asyncio.Task[None]] = set()
        #: rows written from now on are this process's own: while one is pending its sender is at
        #: work (a scheduled run at start-up, a turn while an adapter reconnects), so a recovery
        #: must not send it too; only what an earlier process left is recovered
        self._since = time.time()
        #: several nodes (PostgreSQL): which of these rows a live node still serves (their chat's
        #: lane is held); set by the daemon, which then recovers only on the ledger's role holder
        self.served_elsewhere: Callable[[Any, list[int]], set[int]] | None = None
        #: several nodes: a row younger than this may still be marked sent by its node
        self.recovery_grace = 0.0
        #: several nodes: this node hands what it sends on a platform to the node connected to it
        self.relays: Callable[[str], bool] | None = None

    def relaying(self, platform: str) -> bool:
        """Whether messages on ``platform`` go to the node connected to it: no stream, no typing here."""
        return self.relays is not None and self.relays(platform)

    def recoverable(self, platform: str) -> bool:
        """Whether replies on ``platform`` go through the ledger: they could be re-sent after a crash."""
        adapter = self._adapters.get(platform)
        return adapter is not None and adapter.supports_recovery

    async def send(self, out: OutboundMessage, *, session_key: str | None = None,
                   session_id: str | None = None, ledger_id: int | None = None) -> bool:
        """Send a message; replies go through the ledger. True when every chunk was sent.

        ``ledger_id``: the reply's outbox row, already written with the answer (``record_reply``).
        """
        adapter = self._adapters.get(out.platform)
        if adapter is None:
            log.error("delivery.no_adapter", platform=out.platform)
            return False
        if self.relaying(out.platform):
            return await self._relay(out, session_key, session_id, ledger_id)
        if out.kind is not SendKind.REPLY or not self.recoverable(out.platform):
            if out.files:  # not retried, but noted: its files are kept for media.retention_days
                await self._store.write(lambda c: outbound.mark(c, record_reply(c, out, session_key, session_id),
                                                                "sent", None, now=time.time()))
            shown = with_file_links(adapter, out)
            return await self._send_chunks(adapter, shown) is None and \
                await self._send_files(adapter, shown, None) is None
        if ledger_id is None:
            ledger_id = await self._store.write(lambda c: record_reply(c, out, session_key, session_id))
        out = with_file_links(adapter, out)
        try:
            error = await self._send_chunks(adapter, out)
            if error is None:
                error = await self._files_after_text(adapter, out, ledger_id)
        except asyncio.CancelledError:
            # Stopped mid-send (a withdrawn handoff summary, a drain cut): part may be out, so a
            # restart must not send it again.
            await asyncio.shield(self._mark(ledger_id, "expired", "stopped while sending"))
            raise
        if error is not None:
            await self._mark(ledger_id, "failed", error)  # callers read why (a failed handoff says so)
            return False
        # Noted in the background: the turn is over once the reply is out, and a message
        # arriving now must not be told to wait for bookkeeping. ``aclose`` waits for these.
        self._mark_later(ledger_id, "sent")
        return True

    async def send_when_ready(self, out: OutboundMessage, *, session_key: str | None = None,
                              session_id: str | None = None, ledger_id: int | None = None,
                              ready_wait: float = READY_WAIT) -> bool:
        """``send`` for an answer nobody waits for in a lane (a scheduled run's, a background
        turn's): its platform may still be connecting (a run right after start-up), so it waits
        for it up to ``ready_wait`` seconds; a failure is logged (and noted on its ledger row)."""
        adapter = self._adapters.get(out.platform)
        if adapter is None:
            log.warning("delivery.no_adapter", platform=out.platform)
            return False
        with contextlib.suppress(TimeoutError):  # sent anyway: a failure is noted on its ledger row
            if not self.relaying(out.platform):  # else it goes to the node connected to it now
                await asyncio.wait_for(adapter.ready.wait(), ready_wait)
        try:
            return await self.send(out, session_key=session_key, session_id=session_id, ledger_id=ledger_id)
        except Exception:
            log.exception("delivery.detached_send_failed", platform=out.platform)
            return False

    async def _relay(self, out: OutboundMessage, session_key: str | None, session_id: str | None,
                     ledger_id: int | None) -> bool:
        """Leave ``out`` (any kind) in the ledger for the node connected to its platform: True, handed over."""
        def op(conn: sqlite3.Connection) -> bool:
            return outbound.relay(conn, record_reply(conn, out, session_key, session_id) if ledger_id is None else ledger_id)

        log.info("delivery.relayed", platform=out.platform, chat_id=out.chat_id, was_pending=await self._store.write(op))
        return True

    async def send_relayed(self, platform: str, *, batch: int = 10) -> int:
        """Send what other nodes relayed to this one (connected to ``platform``), as they would
        have sent it; each row is marked sent or failed. The number sent."""
        adapter = self._adapters.get(platform)
        sent = 0
        while adapter is not None and adapter.ready.is_set():
            taken = await self._store.write(lambda c: outbound.take_relayed(c, platform, batch))
            for n, item in enumerate(taken):
                try:
                    error = await self._resend(adapter, item, "")
                except asyncio.CancelledError:  # the role lost: the rows not begun wait for its next holder
                    await asyncio.shield(self._store.write(partial(_put_back, item.id, taken[n + 1:])))
                    raise
                await self._mark(item.id, "sent" if error is None else "failed", error)
                sent += error is None
            if len(taken) < batch:
                break
        return sent

    async def finish_stream(self, driver: StreamDriver, out: OutboundMessage, *,
                            ledger_id: int | None = None) -> bool:
        """End a streamed answer with ``out`` (its text is what stays visible); True when it is out.

        ``ledger_id``: the answer's outbox row, written when the stream showed its first message.
        A stream that cannot finish (its message was deleted, the platform refuses) is
        answered anew, as a reply sent whole would be.
        """
        adapter = self._adapters.get(out.platform)
        shown = with_file_links(adapter, out) if adapter is not None else out
        try:
            await driver.finish(shown)
        except asyncio.CancelledError:
            if ledger_id is not None:
                await asyncio.shield(self._mark(ledger_id, "expired", "stopped while sending"))
            raise
        except Exception as exc:
            log.warning("delivery.stream_finish_failed", platform=out.platform, error_type=type(exc).__name__,
                        error=redact(str(exc))[:200])
            return await self.send(out, ledger_id=ledger_id)  # a notice goes without the ledger
        if self.metrics is not None:
            self.metrics.messages_out.labels(out.platform).inc()
        error = await self._files_after_text(adapter, shown, ledger_id) if adapter is not None else None
        if ledger_id is not None:
            if error is not None:
                await self._mark(ledger_id, "failed", error)
                return False
            self._mark_later(ledger_id, "sent")
        return error is None

    def _mark_later(self, ledger_id: int, status: str) -> None:
        task = asyncio.create_task(self._mark(ledger_id, status))
        self._marks.add(task)
        task.add_done_callback(self._marked)

    def _marked(self, task: asyncio.Task[None]) -> None:
        self._marks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # The row stays 'pending': at worst the reply is sent once more after a restart.
            log.warning("delivery.mark_failed", error=str(task.exception()))

    async def aclose(self) -> None:
        """Wait for the ledger notes still being written (before the store closes)."""
        if self._marks:
            await asyncio.wait(set(self._marks), timeout=10.0)

    async def withdraw(self, ledger_id: int, reason: str) -> None:
        """An outbox row whose reply will not be sent after all (the turn failed or was stopped)."""
        await self._mark(ledger_id, "expired", reason)

    async def _send_chunks(self, adapter: Adapter, out: OutboundMessage) -> str | None:
        """Send every chunk in order; the error text if one failed, else None."""
        try:
            for chunk in adapter.split(out.text) if out.text else [out.text]:
                await adapter.send(dataclasses.replace(out, text=chunk))
                if self.metrics is not None:
                    self.metrics.messages_out.labels(out.platform).inc()
        except Exception as exc:
            if self.metrics is not None:
                self.metrics.send_failures.labels(out.platform).inc()
            detail = f"{type(exc).__name__}: {exc}"[:300]
            log.error("delivery.send_failed", platform=out.platform, chat_id=out.chat_id, error=detail)
            # The reason is shown to people (a failed handoff says it): an error of ours says what
            # happened; the text of any other is a library's internals (``ContentLengthError: ...``).
            return redact(detail if isinstance(exc, GatewayError) else type(exc).__name__)
        return None

    async def _files_after_text(self, adapter: Adapter, out: OutboundMessage, ledger_id: int | None) -> str | None:
        """The text is out: note it (a retry after a crash then sends only files), then the files."""
        if not out.files:
            return None
        if ledger_id is not None:
            await self._store.write(lambda c: outbound.set_files_sent(c, ledger_id, 0))
        return await self._send_files(adapter, out, ledger_id)

    async def _send_files(self, adapter: Adapter, out: OutboundMessage, ledger_id: int | None,
                          offset: int = 0) -> str | None:
        """Send ``out.files`` after its text; the error text if that failed, else None.

        Each file the platform takes is noted in the ledger at once (``offset`` files of the
        reply went before these), so a retry after a crash sends only the rest. A file larger
        than the platform takes gets a note instead.
        """
        rest = list(enumerate(out.files))
        if not rest:
            return None
        limit = adapter.max_upload_bytes
        fits = [(i, f) for i, f in rest if f.size <= limit]
        too_big = [f for _, f in rest if f.size > limit]

        async def sent(k: int) -> None:
            if ledger_id is not None:
                done = offset + fits[k][0] + 1
                await self._store.write(lambda c: outbound.set_files_sent(c, ledger_id, done))

        try:
            if fits:
                await adapter.send_files(out, tuple(f for _, f in fits), sent=sent)
            if too_big:
                note = "\n".join(f"⚠️ {f.name} ({human_size(f.size)}) is too large to send here "
                                  f"(the limit is {human_size(limit)})." for f in too_big)
                await adapter.send(dataclasses.replace(out, text=note, kind=SendKind.NOTICE, files=()))
        except Exception as exc:
            if self.metrics is not None:
                self.metrics.send_failures.labels(out.platform).inc()
            detail = f"{type(exc).__name__}: {exc}"[:300]
            log.error("delivery.files_failed", platform=out.platform, chat_id=out.chat_id, error=redact(detail))
            return redact(detail if isinstance(exc, GatewayError) else type(exc).__name__)
        return None

    async def _resume(self, adapter: Adapter, out: OutboundMessage, message_ids: tuple[str, ...]) -> bool:
        """Edit the messages a cut-off stream left into ``out``; False when that cannot be done."""
        stream = adapter.resume_stream(out, message_ids)
        if stream is None:
            return False
        try:
            await stream.finish(out)
        except Exception as exc:  # a library's own error too: the text goes out anew
            log.info("delivery.resume_failed", platform=out.platform, error_type=type(exc).__name__)
            return False
        return True

    async def _mark(self, ledger_id: int, status: str, error: str | None = None) -> None:
        now = time.time()
        await self._store.write(lambda c: outbound.mark(c, ledger_id, status, error, now=now))

    async def recover(self, platform: str, max_age_seconds: float) -> int:
        """Send once more what a crash cut off; older leftovers are marked expired."""
        cutoff = time.time() - max_age_seconds

        def claim(conn: sqlite3.Connection) -> list[PendingReply]:
            outbound.expire_pending(conn, platform, created_before=cutoff)
            if self.served_elsewhere is None:
                rows = outbound.pending(conn, platform, created_before=self._since)
            else:
                # Another node's rows pend while it sends them: only rows of chats no live node
                # serves are left over (their node died), whenever they were written.
                rows = outbound.pending(conn, platform, created_before=time.time() - self.recovery_grace)
                served = self.served_elsewhere(conn, [r.id for r in rows])
                rows = [r for r in rows if r.id not in served]
            # Claimed before sending: a second crash must not send it twice.
            outbound.mark_recovering(conn, [r.id for r in rows])
            return rows

        pending = await self._store.write(claim)
        adapter = self._adapters.get(platform)
        sent = 0
        for item in pending:
            if adapter is None or not adapter.supports_recovery:
                await self._mark(item.id, "expired", "no recipient waiting")
                continue
            if item.interrupted:
                # The answer was never stored (its turn is answered again if its message comes
                # again): the fragment its stream showed says what happened to it.
                notice = OutboundMessage(platform, item.chat_id, INTERRUPTED_NOTE, item.thread_id, item.reply_to,
                                         SendKind.NOTICE)
                shown = item.message_ids and await self._resume(adapter, notice, item.message_ids)
                await self._mark(item.id, "expired", "cut off by a restart before the answer was stored"
                                 if shown else "cut off before the answer was stored; its fragment stays")
                continue
            error = await self._resend(adapter, item, RECOVERED_PREFIX)
            await self._mark(item.id, "recovered" if error is None else "failed", error)
            sent += error is None
            if self.metrics is not None:
                self.metrics.deliveries_retried.labels(platform).inc()
        if pending:
            log.info("delivery.recovered", platform=platform, replies=sent, claimed=len(pending))
        return sent

    async def _resend(self, adapter: Adapter, item: PendingReply, prefix: str) -> str | None:
        """Send a ledger row's reply (what of it did not go out yet) with ``prefix``; the error, or None."""
        start = item.files_sent or 0  # the files before it went out before the crash
        files = from_ledger(item.files[start:], self._blobs) if self._blobs is not None else ()
        out = with_file_links(adapter, OutboundMessage(item.platform, item.chat_id, prefix + item.text,
                                                       item.thread_id, item.reply_to, files=files))
        if item.files and item.files_sent is not None:
            error = None  # its text went out before the crash: only the files that did not go
        else:  # a streamed answer's messages become the answer; without them it is sent anew
            error = None if item.message_ids and await self._resume(adapter, out, item.message_ids) \
                else await self._send_chunks(adapter, out)
        if error is None:
            error = await self._files_after_text(adapter, out, item.id) if item.files_sent is None \
                else await self._send_files(adapter, out, item.id, offset=start)
        return error
