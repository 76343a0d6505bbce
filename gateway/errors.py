"""Every error hermes-gateway raises on purpose, and what each one means to a person.

One tree, one root. The root and the storage errors live in ``storage.errors``
(the lowest layer, so every package can raise into the tree), the model and
agent errors in ``core``, the platform errors in ``adapters``; the gateway's own
are defined here. This module exports them all::

    GatewayError                      storage.errors (the root)
    ├── StorageError
    │   ├── StorageBusyError            another process held the write lock too long
    │   ├── StorageFullError            the disk is full; nothing was written
    │   ├── StorageLockedError          another daemon owns this state.db
    │   ├── StorageClosedError          the writer has stopped
    │   ├── SchemaError                 state.db cannot be opened or upgraded
    │   ├── SessionNotFoundError
    │   ├── AmbiguousSessionError       an id prefix matches several sessions
    │   ├── TitleConflictError
    │   └── InvalidTitleError
    ├── ModelError                    core.errors
    │   ├── ModelNotConfiguredError
    │   ├── ModelAuthError
    │   ├── ModelRateLimitError
    │   ├── ModelUnavailableError
    │   ├── ModelTimeoutError
    │   ├── ModelResponseError
    │   └── ModelContextLengthError
    ├── CompressionError              core.errors
    ├── MemoryStoreError              core.memory
    │   └── MemoryLimitError
    ├── SkillError                    core.skills
    │   └── SkillNotFoundError
    ├── ToolError                     core.tools
    ├── AdapterError                  adapters.base
    │   ├── FatalAdapterError           the adapter cannot run with this config (bad token, ...)
    │   ├── ChatGoneError               the terminal chat's connection closed
    │   └── MalformedUpdateError        a platform sent something we cannot read
    ├── ConfigError                   config.yaml / .env cannot be used
    ├── UnitPathError                 a path that cannot go into a systemd unit
    ├── LaneError
    │   ├── LaneFullError               too many messages wait in one chat
    │   └── LanesClosedError            the gateway is stopping
    ├── ControlError                  the daemon refused a control request
    │   ├── DaemonNotRunningError       nothing listens on the control socket
    │   ├── DaemonUnreachableError      the lock is held but nobody answers
    │   └── RequestError                the request itself is wrong
    ├── DaemonRunningError            ``chat --standalone`` while a daemon runs for this home
    ├── HandoffRefusedError           /handoff cannot start
    ├── HandoffInFlightError          the session is already being handed off
    └── InvalidPruneAgeError          ``sessions prune --older-than`` is not a number of days

What a person sees for an error is decided in one place, ``describe``: the text
of a chat reply, the HTTP status and error code of the API server, and the exit
code of a command. An exception outside the tree is a bug: the person gets an
apology naming only its class, never its text (it may hold internals).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from adapters.base import AdapterError, FatalAdapterError, MalformedUpdateError
from adapters.cli import ChatGoneError
from core.errors import (
    CompressionError,
    ModelAuthError,
    ModelContextLengthError,
    ModelError,
    ModelNotConfiguredError,
    ModelRateLimitError,
    ModelResponseError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from core.memory import MemoryLimitError, MemoryStoreError
from core.skills import SkillError, SkillNotFoundError
from core.tools import ToolError
from storage.errors import (
    AmbiguousSessionError,
    GatewayError,
    InvalidTitleError,
    SchemaError,
    SessionNotFoundError,
    StorageBusyError,
    StorageClosedError,
    StorageError,
    StorageFullError,
    StorageLockedError,
    TitleConflictError,
)

#: sysexits.h codes a service manager and a shell script understand
EX_USAGE = 64
EX_UNAVAILABLE = 69
EX_SOFTWARE = 70
EX_TEMPFAIL = 75
EX_CONFIG = 78  # systemd must not restart on it (RestartPreventExitStatus=78)


class ConfigError(GatewayError):
    """The configuration cannot be used; the message names the key and the file."""


class UnitPathError(GatewayError, ValueError):
    """A path that cannot be written into a unit file."""


class LaneError(GatewayError):
    """A turn could not be queued in its chat's lane."""


class LaneFullError(LaneError):
    """Too many messages already wait in this conversation."""


class LanesClosedError(LaneError):
    """The gateway is shutting down and takes no new work."""


class ControlError(GatewayError):
    """The daemon refused or failed a request; ``error_type`` names the daemon-side error."""

    def __init__(self, message: str, error_type: str = "Error") -> None:
        self.error_type = error_type
        super().__init__(message)


class DaemonNotRunningError(ControlError):
    """No daemon listens on the control socket of this HERMES_HOME."""

    def __init__(self, home: Path, detail: str | None = None) -> None:
        self.home = Path(home)
        why = f" ({detail})" if detail else ""
        super().__init__(
            f"The hermes-gateway daemon is not running for {home}{why}. "
            f"Start it with `hermes-gateway run --home {home}` "
            "(or `systemctl --user start hermes-gateway` if it is installed as a service).",
            "DaemonNotRunningError",
        )


class DaemonUnreachableError(ControlError):
    """The writer lock is held, but no daemon answers on the control socket."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "DaemonUnreachableError")


class RequestError(ControlError):
    """The request itself is wrong (missing or mistyped parameter, wrong state)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, "RequestError")


class DaemonRunningError(GatewayError):
    """``chat --standalone``, but a daemon already runs for this home."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        super().__init__("a daemon already runs")


class HandoffRefusedError(GatewayError):
    """/handoff cannot start; the message says why and what to do."""


class HandoffInFlightError(GatewayError):
    """The session already has a pending or claimed handoff."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__("This session is already being handed off; wait for that to finish, then try again.")


class InvalidPruneAgeError(GatewayError):
    """``--older-than`` is not a finite number of days >= 0."""


@dataclass(frozen=True)
class ErrorView:
    """What a person sees for one error, on each surface."""

    #: the chat reply
    reply: str
    #: the API server's status and its OpenAI-style error type
    http_status: int
    error_type: str
    #: a command's exit status
    exit_code: int


_INTERNAL = ErrorView("", 500, "server_error", EX_SOFTWARE)

#: most specific first; the first class the error is an instance of decides
_TABLE: tuple[tuple[type[BaseException], int, str, int], ...] = (
    (ModelNotConfiguredError, 503, "model_not_configured", EX_CONFIG),
    (ModelAuthError, 502, "upstream_auth_error", EX_UNAVAILABLE),
    (ModelRateLimitError, 429, "rate_limit_exceeded", EX_TEMPFAIL),
    (ModelTimeoutError, 504, "upstream_timeout", EX_TEMPFAIL),
    (ModelContextLengthError, 400, "context_length_exceeded", 1),
    (ModelError, 502, "upstream_error", EX_UNAVAILABLE),
    (ConfigError, 503, "not_configured", EX_CONFIG),
    (LaneFullError, 429, "chat_busy", EX_TEMPFAIL),
    (LanesClosedError, 503, "shutting_down", EX_TEMPFAIL),
    (StorageFullError, 507, "storage_full", EX_TEMPFAIL),
    (StorageBusyError, 503, "storage_busy", EX_TEMPFAIL),
    (StorageLockedError, 503, "storage_locked", EX_TEMPFAIL),
    (StorageClosedError, 503, "shutting_down", EX_TEMPFAIL),
    (SchemaError, 500, "storage_error", EX_SOFTWARE),
    (SessionNotFoundError, 404, "not_found", 1),
    (AmbiguousSessionError, 400, "invalid_request_error", 1),
    (TitleConflictError, 409, "conflict", 1),
    (InvalidTitleError, 400, "invalid_request_error", 1),
    (StorageError, 500, "storage_error", EX_SOFTWARE),
    (DaemonNotRunningError, 503, "unavailable", EX_UNAVAILABLE),
    (DaemonUnreachableError, 503, "unavailable", EX_UNAVAILABLE),
    (RequestError, 400, "invalid_request_error", EX_USAGE),
    (DaemonRunningError, 409, "conflict", EX_TEMPFAIL),
    (InvalidPruneAgeError, 400, "invalid_request_error", EX_USAGE),
    (HandoffRefusedError, 409, "conflict", 1),
    (HandoffInFlightError, 409, "conflict", 1),
    (FatalAdapterError, 503, "unavailable", EX_CONFIG),
    (GatewayError, 500, "gateway_error", 1),
)


def describe(exc: BaseException) -> ErrorView:
    """The reply, HTTP status, error type and exit code for ``exc``."""
    if not isinstance(exc, GatewayError):
        return ErrorView(
            f"Sorry, something went wrong ({type(exc).__name__}). "
            "Try again, or send /reset to start a fresh session.",
            _INTERNAL.http_status, _INTERNAL.error_type, _INTERNAL.exit_code,
        )
    status, error_type, code = next((s, e, c) for cls, s, e, c in _TABLE if isinstance(exc, cls))
    # A missing model is an instruction, not a failure: it is said plainly.
    reply = str(exc) if isinstance(exc, ModelNotConfiguredError) else f"⚠️ {exc}"
    return ErrorView(reply, status, error_type, code)


__all__ = [
    "EX_CONFIG",
    "EX_SOFTWARE",
    "EX_TEMPFAIL",
    "EX_UNAVAILABLE",
    "EX_USAGE",
    "AdapterError",
    "AmbiguousSessionError",
    "ChatGoneError",
    "CompressionError",
    "ConfigError",
    "ControlError",
    "DaemonNotRunningError",
    "DaemonRunningError",
    "DaemonUnreachableError",
    "ErrorView",
    "FatalAdapterError",
    "GatewayError",
    "HandoffInFlightError",
    "HandoffRefusedError",
    "InvalidPruneAgeError",
    "InvalidTitleError",
    "LaneError",
    "LaneFullError",
    "LanesClosedError",
    "MalformedUpdateError",
    "MemoryLimitError",
    "MemoryStoreError",
    "ModelAuthError",
    "ModelContextLengthError",
    "ModelError",
    "ModelNotConfiguredError",
    "ModelRateLimitError",
    "ModelResponseError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "RequestError",
    "SchemaError",
    "SessionNotFoundError",
    "SkillError",
    "SkillNotFoundError",
    "StorageBusyError",
    "StorageClosedError",
    "StorageError",
    "StorageFullError",
    "StorageLockedError",
    "TitleConflictError",
    "ToolError",
    "UnitPathError",
    "describe",
]
