"""The API server as an adapter: its routes, the requests waiting for their answers, and the
answer written as JSON, as one SSE chunk, or (``open_stream``) as SSE while the model writes it.

An approval question (there are no buttons here) goes to the request whose turn asks it: a streamed
one shows it in the stream, then its outcome, and the answer goes on after them; a request without
a stream is answered by the question itself. Either way the client answers with a new request from
the same ``user``: ``/approve <id>``, ``/approve always <id>`` or ``/deny <id>``; after a question
that answered a request, that answer's response carries the turn's answer too (``_relay``)."""

from __future__ import annotations

import asyncio
import hmac
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from urllib.parse import quote

from aiohttp import web

from .._ssrf import Network, fetch_public
from ..approvals import ApprovalPrompt
from ..base import (
    Adapter,
    AdapterError,
    Disposition,
    MediaUnavailableError,
    OutboundMessage,
    ReplyError,
    ReplyStream,
    SendKind,
    SendResult,
)
from ..media import Attachment, OutboundFile
from ._relay import ApprovalRelay
from ._request import (
    MAX_BODY_BYTES,
    MAX_MEDIA_BYTES,
    ChatRequest,
    RequestLimits,
    error_response,
    parse_request,
)
from ._sse import DONE, SSE_HEADERS, Completion, SseStream

__all__ = ["ApiServerAdapter"]

#: why the handler stopped waiting: the error status, or the error event of a stream that began
_TIMED_OUT = ("No answer within the time limit; it will be kept in the session.",
              ReplyError(504, "server_error", "timeout"))
_SHUTTING_DOWN = ("The gateway is shutting down; send the message again later.",
                  ReplyError(503, "server_error", "shutting_down", 30))
#: seconds a remote image's whole download may take
_REMOTE_TIMEOUT = 30.0
#: files linked from answers that ``/v1/files/<id>`` serves (older links 404)
_MAX_LINKED = 1000


@dataclass
class _Waiting:
    """A request waiting for its answer."""

    request: web.Request
    asked: ChatRequest
    answer: asyncio.Future[OutboundMessage]
    stream: SseStream | None = None


class ApiServerAdapter(Adapter):
    platform = "api-server"
    max_message_length = 10_000_000
    supports_recovery = False

    def __init__(self, *, key: str | None, model_name: str | None, reply_timeout: float = 900.0,
                 streaming: bool = True, write_timeout: float = 30.0, max_body_bytes: int = MAX_BODY_BYTES,
                 max_media_bytes: int = MAX_MEDIA_BYTES, allow_remote_media: bool = False,
                 remote_allow_networks: Sequence[Network] = ()) -> None:
        """``model_name``: the model requests may name (None: none is configured, so any name is
        taken and each reply says what to configure). ``streaming``: ``open_stream`` gives streams
        (``platforms.api_server.streaming``). ``write_timeout``: seconds a streamed write may wait
        for a client that does not read before the stream gives that client up. ``max_body_bytes``
        (``max_request_bytes``), ``max_media_bytes``, ``allow_remote_media``: ``platforms.api_server``'s
        keys.
        ``remote_allow_networks``: for tests only, private networks a remote image may come from
        (a test server on 127.0.0.1); the daemon passes nothing."""
        super().__init__()
        self._limits = RequestLimits(max_body_bytes, max_media_bytes, allow_remote_media)
        self._remote_allow = tuple(remote_allow_networks)
        self._key = key
        self._model_name = model_name or "hermes-gateway"
        self._any_model = model_name is None
        self._reply_timeout = reply_timeout
        self._streaming = streaming
        self._write_timeout = write_timeout
        self._waiting: dict[str, _Waiting] = {}
        self._stopped = asyncio.Event()
        #: the files answers linked to, by id (the most recent ``_MAX_LINKED``)
        self._linked: OrderedDict[str, OutboundFile] = OrderedDict()
        self._relay = ApprovalRelay()

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/v1/files/{id}", self._file)
        # Last: what the two above do not match under /v1 gets an OpenAI-style 404 (or 405).
        app.router.add_route("*", "/v1/{tail:.*}", self._unknown)

    async def connect(self) -> None:
        self._stopped.clear()
        self.ready.set()
        await self._stopped.wait()

    async def disconnect(self) -> None:
        self.ready.clear()
        self._stopped.set()
        for waiting in self._waiting.values():
            if not waiting.answer.done():
                waiting.answer.set_exception(ConnectionResetError("the gateway is shutting down"))

    async def send(self, message: OutboundMessage) -> SendResult:
        # The request's answer is the reply; reasoning (/reasoning on) has no place in it.
        if message.kind in (SendKind.ACK, SendKind.REASONING) or message.reply_to is None:
            return SendResult()
        waiting = self._waiting.get(message.reply_to)
        if waiting is not None and not waiting.answer.done():
            waiting.answer.set_result(message)
        elif self._relay.waits_for(message.reply_to):
            self._relay.keep_late(message)  # its question answered the request; the answer to it takes this
        return SendResult((message.reply_to,))

    async def send_approval(self, target: OutboundMessage, prompt: ApprovalPrompt) -> str | None:
        """In the request's stream (its id, for ``settle_approval``), or as the request's answer (None)."""
        waiting = self._waiting.get(target.reply_to) if target.reply_to is not None else None
        if waiting is None or waiting.answer.done():
            raise AdapterError("the request that asked is no longer waiting")
        if waiting.stream is not None and await waiting.stream.interject(prompt.typed()):
            return target.reply_to
        waiting.answer.set_result(OutboundMessage(self.platform, target.chat_id, prompt.typed(),
                                                  reply_to=target.reply_to, kind=SendKind.NOTICE))
        self._relay.asked(prompt.approval_id, target.chat_id, target.reply_to or "")
        return None

    async def settle_approval(self, target: OutboundMessage, message_id: str, outcome: str) -> None:
        """The outcome in the stream that shows the question (while its request waits)."""
        waiting = self._waiting.get(message_id)
        if waiting is not None and waiting.stream is not None:
            await waiting.stream.interject(outcome)

    def open_stream(self, target: OutboundMessage) -> ReplyStream | None:
        """The SSE stream of the request ``target`` answers, when it asked for ``stream: true``."""
        waiting = self._waiting.get(target.reply_to) if target.reply_to is not None else None
        if (not self._streaming or waiting is None or not waiting.asked.stream or waiting.answer.done()
                or waiting.stream is not None):
            return None
        answer = waiting.answer

        def hand_over(message: OutboundMessage) -> None:
            if not answer.done():
                answer.set_result(message)

        waiting.stream = SseStream(waiting.request, target.reply_to or "", self._model_name,
                                   include_usage=waiting.asked.include_usage, write_timeout=self._write_timeout,
                                   hand_over=hand_over)
        return waiting.stream

    def file_link(self, file: OutboundFile) -> str | None:
        """``/v1/files/<id>``, served behind the API key while this daemon runs."""
        if not file.id:
            return None
        self._linked[file.id] = file
        self._linked.move_to_end(file.id)
        while len(self._linked) > _MAX_LINKED:
            self._linked.popitem(last=False)
        return f"/v1/files/{file.id}"

    async def _file(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return self._unauthorized()
        file = self._linked.get(request.match_info["id"])
        if file is None or not file.path.is_file():
            return error_response(404, "No such file (links last while the gateway runs).", code="file_not_found")
        disposition = f"attachment; filename*=UTF-8''{quote(file.name)}"
        return web.FileResponse(file.path, headers={"Content-Type": file.mime, "Content-Disposition": disposition,
                                                     "X-Content-Type-Options": "nosniff"})

    async def fetch(self, attachment: Attachment, *, limit: int) -> AsyncIterator[bytes]:
        """An inline part's bytes; a remote image (``ref`` is its URL) downloaded from public addresses
        only (``adapters._ssrf``), when ``allow_remote_media`` is on."""
        if attachment.data is not None or not attachment.ref:
            async for chunk in super().fetch(attachment, limit=limit):
                yield chunk
            return
        if not self._limits.allow_remote_media:
            raise MediaUnavailableError("remote media is not downloaded (platforms.api_server.allow_remote_media)")
        async for chunk in fetch_public(attachment.ref, limit=min(limit, self._limits.max_media_bytes),
                                        time_cap=_REMOTE_TIMEOUT, allow_networks=self._remote_allow):
            yield chunk

    # ------------------------------------------------------------------ HTTP

    def _authorized(self, request: web.Request) -> bool:
        if not self._key:
            return True
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self._key.encode())

    def _unauthorized(self) -> web.Response:
        return error_response(401, "Missing or wrong bearer key (Authorization: Bearer <API_SERVER_KEY>).",
                              "authentication_error", "invalid_api_key")

    async def _models(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return self._unauthorized()
        return web.json_response(
            {"object": "list", "data": [{"id": self._model_name, "object": "model", "owned_by": "hermes-gateway"}]}
        )

    async def _unknown(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return self._unauthorized()
        known = {"/v1/chat/completions": "POST", "/v1/models": "GET"}.get(request.path)
        if known is not None:
            return error_response(405, f"{request.path} takes {known}, not {request.method}.",
                                  code="method_not_allowed")
        return error_response(404, f"Invalid URL ({request.method} {request.path}).", code="unknown_url")

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if not self._authorized(request):
            return self._unauthorized()
        if not self.ready.is_set():
            return error_response(503, "The gateway is not accepting messages right now.", "server_error",
                                  "unavailable", retry_after=30)
        asked = await parse_request(request, self.platform, self._model_name, self._any_model, self._limits)
        if isinstance(asked, web.Response):
            return asked
        msg = asked.message
        assert msg.message_id is not None
        loop = asyncio.get_running_loop()
        waiting = _Waiting(request, asked, loop.create_future())
        self._waiting[msg.message_id] = waiting
        # An answer to a question that answered an earlier request of this user carries that turn's answer.
        relayed = self._relay.claim(msg)
        follow: _Waiting | None = None
        if relayed is not None:
            follow = _Waiting(request, asked, loop.create_future())
            late = self._relay.take_late(relayed)
            if late is not None:
                follow.answer.set_result(late)
            self._waiting[relayed] = follow
        started = loop.time()
        try:
            disposition = await self.dispatch(msg)
            if disposition is Disposition.DUPLICATE:
                return error_response(409, "A request with this Idempotency-Key was already handled.",
                                      code="duplicate_request")
            if disposition in (Disposition.REFUSED, Disposition.IGNORED):
                return error_response(403, "This request was not accepted.", "permission_error", "refused")
            try:
                answer = await asyncio.wait_for(waiting.answer, timeout=self._reply_timeout)
            except (TimeoutError, ConnectionResetError) as exc:
                text, error = _TIMED_OUT if isinstance(exc, TimeoutError) else _SHUTTING_DOWN
                answer = OutboundMessage(self.platform, msg.chat_id, text, reply_to=msg.message_id,
                                         kind=SendKind.NOTICE, error=error)
            if follow is not None and answer.error is None:
                answer = await self._followed(answer, follow, self._reply_timeout - (loop.time() - started))
        finally:
            self._waiting.pop(msg.message_id, None)
            if relayed is not None and self._waiting.get(relayed) is follow:
                del self._waiting[relayed]
        stream = waiting.stream
        if stream is not None and await stream.end_with(answer):
            # The stream answers this request, and never twice: an answer sent around it (the
            # gateway sends anew when a stream fails) or the handler's own timeout only ends it.
            assert stream.response is not None
            return stream.response
        if answer.error is not None:
            e = answer.error
            return error_response(e.status, answer.text.removeprefix("⚠️ "), e.type, e.code,
                                  retry_after=e.retry_after)
        return await self._respond(request, answer, asked)

    async def _followed(self, reply: OutboundMessage, follow: _Waiting, left: float) -> OutboundMessage:
        """The reply to an approval answer, then the answer of the turn that asked (when it comes in time)."""
        try:
            turn = await asyncio.wait_for(follow.answer, timeout=max(0.0, left))
        except (TimeoutError, ConnectionResetError):
            return replace(reply, text=f"{reply.text}\n\n(The answer is still being written; it will be in the "
                                        "session.)")
        return replace(reply, text=f"{reply.text}\n\n{turn.text}", usage=turn.usage)

    async def _respond(self, request: web.Request, reply: OutboundMessage, asked: ChatRequest) -> web.StreamResponse:
        """The answer at once: a ``chat.completion``, or for ``stream: true`` one SSE chunk with it all."""
        completion = Completion(self._model_name)
        if not asked.stream:
            return web.json_response(completion.whole(reply.text, reply.usage))
        resp = web.StreamResponse(headers=SSE_HEADERS)
        await resp.prepare(request)
        await resp.write(completion.chunk({"role": "assistant", "content": reply.text}))
        await resp.write(completion.chunk({}, "stop"))
        if asked.include_usage:
            await resp.write(completion.usage_chunk(reply.usage))
        await resp.write(DONE)
        await resp.write_eof()
        return resp
