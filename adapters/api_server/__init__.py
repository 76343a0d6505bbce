"""The local HTTP API: an OpenAI-compatible front door to the gateway.

``POST /v1/chat/completions``: the request's ``user`` names the chat (session
key ``agent:main:api-server:dm:<user>``); only the last user message is new
input — history comes from state.db, never from the request. ``GET
/v1/models``. A bearer key (``API_SERVER_KEY``) is checked when configured
and required when bound beyond loopback. Requests wait for their answer.

It answers as the OpenAI API does: a failure is an HTTP status with an error
object (``{"error": {"message", "type", "param", "code"}}``, and Retry-After
where waiting helps), taken from the error the gateway attached to its notice;
``usage`` is the turn's token counts. A request with an Idempotency-Key
that is sent again gets the first one's answer (the gateway keeps it, across
restarts), and a turn stopped with /stop still answers its request. With
``stream: true`` the answer comes as server-sent events while the model writes
it (``_sse``).

The last user message's ``content`` may be OpenAI content parts: text, and
images, audio and files inline as base64, which arrive as ``Attachment``s with
their bytes; a remote image URL only where ``allow_remote_media`` is on, then
downloaded by ``fetch`` from public addresses only (``adapters._ssrf``).

The modules: ``_settings`` (``platforms.api_server``), ``_request`` (a request
read, or refused), ``_parts`` (a message's content parts), ``_sse`` (the
streamed answer), ``_adapter`` (the routes, the requests waiting for their
answers, and ``fetch``).
"""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

from ._settings import ApiServerSettings

if TYPE_CHECKING:
    from ._adapter import ApiServerAdapter

__all__ = ["ApiServerAdapter", "ApiServerSettings"]

# The adapter imports aiohttp's server and the media code; the settings model alone (config
# validation, every CLI command) must not pay for that.
__getattr__ = lazy_names(__name__, {"ApiServerAdapter": "adapters.api_server._adapter"})
