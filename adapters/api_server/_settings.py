"""``platforms.api_server``: the local HTTP API's one settings model."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, SecretStr

from ..settings import EnvSection

__all__ = ["ApiServerSettings"]


class ApiServerSettings(EnvSection):
    """``platforms.api_server``; every key can also be set as ``API_SERVER_<KEY>``. The host and
    port are those of the daemon's one HTTP server (webhooks, health and metrics too)."""

    env_prefix: ClassVar[str] = "API_SERVER_"

    enabled: bool = True
    """Serve ``/v1/chat/completions`` and ``/v1/models``."""
    host: str = "127.0.0.1"
    """Address to listen on; beyond loopback, ``key`` is required."""
    port: int = Field(default=8642, ge=0, le=65535)
    """Port to listen on (0: any free port)."""
    key: SecretStr | None = None
    """Bearer key clients must send (``Authorization: Bearer <key>``)."""
    streaming: bool = True
    """A request with ``stream: true`` gets the answer chunk by chunk while the model writes it
    (false: the finished answer, in one chunk)."""
    keepalive_timeout: float = Field(default=15.0, gt=0)
    """Seconds a connection may stay silent before the server closes it: before its first request,
    inside a half-sent header, or between requests."""
    max_connections: int = Field(default=0, ge=0)
    """Open connections at most; one more is answered 503 and closed (0: half the daemon's open-file
    limit, ``ulimit -n``, leaving the other half to state.db, the model and the platforms)."""
    backlog: int = Field(default=1024, ge=1)
    """Connections the kernel queues until the daemon accepts them (at most ``net.core.somaxconn``)."""
    max_request_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    """Largest request body read (API and webhooks); a larger one is answered 413."""
    max_media_bytes: int = Field(default=20 * 1024 * 1024, ge=1)
    """Largest image, audio clip or file one message may carry, decoded (an OpenAI content part;
    a larger one is answered 413). The body that carries it is capped by ``max_request_bytes``
    first: base64 makes 3 bytes into 4, so raise that too to send large files."""
    allow_remote_media: bool = False
    """Take an ``image_url`` that is an ``http(s)://`` URL and download it (only from public
    addresses, never this machine or its network); false: such a request is answered 400, and
    images must come inline as data URLs."""
