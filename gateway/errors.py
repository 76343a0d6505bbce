"""Every error hermes-gateway raises on purpose, and what each one means to a person.

One tree, one root. The root and the storage errors live in ``storage.errors``
(the lowest layer, so every package can raise into the tree), the model and
agent errors in ``core``, the platform errors in ``adapters``; the gateway's own
are defined here. This module exports them all::

    GatewayError                      storage.errors (the root)
    ├── StorageError
    │   ├── StorageBusyError            another process held the write lock too long
    │   ├── StorageFullError            the disk is full; nothing was written
    │   ├── BlobTooLargeError           a file for the media store was larger than its limit
    │   ├── StorageLockedError          another daemon owns this state.db
    │   ├── StorageURLError             storage.url names no backend, or is malformed
    │   ├── StorageUnavailableError     the database server cannot be reached
    │   ├── CopyError                   a copy between backends (storage copy) could not run or stopped
    │   │   └── CopyRefusedError        a copy that would do harm (a live source, a target with other data)
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
    │   │   └── ModelRejectedError      the server does not serve that model (/model falls back)
    │   └── ModelContextLengthError
    ├── CompressionError              core.errors
    ├── MediaProcessingError          core.media: a file's bytes could not be made readable
    │   ├── UnreadableMediaError        corrupt, truncated, a bomb, an unknown or locked format
    │   ├── TranscriptionError          speech-to-text failed or heard nothing
    │   ├── VisionError                 the vision model could not describe an image
    │   └── SpeechError                 text-to-speech (a voice reply) gave no audio
    ├── MemoryStoreError              core.memory
    │   └── MemoryLimitError
    ├── SkillError                    core.skills
    │   └── SkillNotFoundError
    ├── ToolError                     core.tools
    │   └── UrlRefusedError             web_fetch will not go there (a private address, a bad scheme)
    ├── AdapterError                  adapters.errors (exported by adapters.base)
    │   ├── FatalAdapterError           the adapter cannot run with this config (bad token, ...)
    │   ├── ChatGoneError               the terminal chat's connection closed
    │   ├── MalformedUpdateError        a platform sent something we cannot read
    │   ├── MediaError                  an attachment's bytes could not be had
    │   │   ├── MediaTooLargeError        larger than media.max_download_mb
    │   │   └── MediaUnavailableError     the platform would not hand it over
    │   └── RateLimitedError            the platform asked to wait (a 429) before the next call
    ├── ConfigError                   config.yaml / .env cannot be used
    ├── UnitPathError                 a path that cannot go into a systemd unit
    ├── LaneError
    │   ├── LaneFullError               too many messages wait in one chat
    │   ├── ChatBusyError               the chat takes no message right now (a handoff moves it)
    │   │   └── LaneLostError             another node serves the chat now (several nodes)
    │   └── LanesClosedError            the gateway is stopping
    ├── BadInputError                 a message that cannot be taken as it is (empty, bad text)
    │   └── InputTooLongError           longer than a message may be
    ├── DuplicateRequestError         a retried request whose first answer cannot be given again
    ├── ControlError                  the daemon refused a control request
    │   ├── DaemonNotRunningError       nothing listens on the control socket
    │   ├── DaemonUnreachableError      the lock is held but nobody answers
    │   └── RequestError                the request itself is wrong
    ├── DaemonRunningError            ``chat --standalone`` while a daemon runs for this home
    ├── HandoffRefusedError           /handoff cannot start
    ├── HandoffInFlightError          the session is already being handed off
    ├── InvalidPruneAgeError          ``sessions prune --older-than`` is not a number of days
    └── JobError                      a scheduled job refused (bad schedule, limit, destination, unknown)

What a person sees of an error is decided in ``describe``: a chat reply's text, the HTTP status, OpenAI
error type and code (and Retry-After) of the API server, and a command's exit code. An exception outside the
tree is a bug: the person gets an apology naming only its class, never its text (it may hold internals).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from adapters.errors import (
    AdapterError,
    ChatGoneError,
    FatalAdapterError,
    MalformedUpdateError,
    MediaError,
    MediaTooLargeError,
    MediaUnavailableError,
    RateLimitedError,
)
from core.errors import (
    CompressionError,
    ModelAuthError,
    ModelContextLengthError,
    ModelError,
    ModelNotConfiguredError,
    ModelRateLimitError,
    ModelRejectedError,
    ModelResponseError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from core.media.errors import (
    MediaProcessingError,
    SpeechError,
    TranscriptionError,
    UnreadableMediaError,
    VisionError,
)
from core.memory import MemoryLimitError, MemoryStoreError
from core.skills import SkillError, SkillNotFoundError
from core.tools import ToolError
from core.tools.web.errors import UrlRefusedError
from gateway._error_classes import (
    BadInputError,
    ChatBusyError,
    ConfigError,
    ControlError,
    DaemonNotRunningError,
    DaemonRunningError,
    DaemonUnreachableError,
    DuplicateRequestError,
    HandoffInFlightError,
    HandoffRefusedError,
    InputTooLongError,
    InvalidPruneAgeError,
    JobError,
    LaneError,
    LaneFullError,
    LaneLostError,
    LanesClosedError,
    RequestError,
    UnitPathError,
)
from storage.errors import (
    AmbiguousSessionError,
    BlobTooLargeError,
    CopyError,
    CopyRefusedError,
    GatewayError,
    InvalidTitleError,
    SchemaError,
    SessionNotFoundError,
    StorageBusyError,
    StorageClosedError,
    StorageError,
    StorageFullError,
    StorageLockedError,
    StorageUnavailableError,
    StorageURLError,
    TitleConflictError,
)

if TYPE_CHECKING:
    from adapters.base import ReplyError

#: sysexits.h codes a service manager and a shell script understand
EX_USAGE, EX_UNAVAILABLE, EX_SOFTWARE, EX_TEMPFAIL = 64, 69, 70, 75
EX_CONFIG = 78  # systemd must not restart on it (RestartPreventExitStatus=78)


@dataclass(frozen=True)
class ErrorView:
    """What a person sees for one error, on each surface."""

    #: the chat reply
    reply: str
    #: the API server's status, OpenAI-style error type ("invalid_request_error", "rate_limit_error",
    #: "server_error", ...) and error code ("queue_full", "upstream_timeout", ...)
    http_status: int
    error_type: str
    error_code: str
    #: a command's exit status
    exit_code: int
    #: seconds a client should wait before trying again (sent as Retry-After), when that helps
    retry_after: float | None = None

    def reply_error(self) -> ReplyError:
        """What an outbound notice carries of this error for an adapter that answers over HTTP."""
        # Not at the top: the command line imports this tree and needs none of adapters.base.
        from adapters.base import ReplyError

        return ReplyError(self.http_status, self.error_type, self.error_code, self.retry_after)


#: most specific first; the first class the error is an instance of decides:
#: (class, HTTP status, error code, exit code, Retry-After when the error does not say)
_TABLE: tuple[tuple[type[BaseException], int, str, int, float | None], ...] = (
    (ModelNotConfiguredError, 503, "model_not_configured", EX_CONFIG, None),
    (ModelAuthError, 502, "upstream_auth_error", EX_UNAVAILABLE, None),
    (ModelRateLimitError, 429, "rate_limit_exceeded", EX_TEMPFAIL, 60.0),
    (ModelTimeoutError, 504, "upstream_timeout", EX_TEMPFAIL, None),
    (ModelContextLengthError, 400, "context_length_exceeded", 1, None),
    (ModelRejectedError, 400, "model_not_found", 1, None),
    (ModelError, 502, "upstream_error", EX_UNAVAILABLE, None),
    (ConfigError, 503, "not_configured", EX_CONFIG, None),
    (LaneFullError, 429, "queue_full", EX_TEMPFAIL, 5.0),
    (ChatBusyError, 429, "chat_busy", EX_TEMPFAIL, 5.0),
    (LanesClosedError, 503, "shutting_down", EX_TEMPFAIL, 30.0),
    (InputTooLongError, 413, "message_too_long", EX_USAGE, None),
    (BadInputError, 400, "invalid_input", EX_USAGE, None),
    (MediaTooLargeError, 413, "file_too_large", EX_USAGE, None),
    (MediaUnavailableError, 502, "media_unavailable", EX_UNAVAILABLE, None),
    (UnreadableMediaError, 400, "unreadable_media", EX_USAGE, None),
    (TranscriptionError, 502, "transcription_failed", EX_UNAVAILABLE, None),
    (VisionError, 502, "vision_failed", EX_UNAVAILABLE, None),
    (SpeechError, 502, "speech_failed", EX_UNAVAILABLE, None),
    (MediaProcessingError, 400, "unreadable_media", EX_USAGE, None),
    (DuplicateRequestError, 409, "duplicate_request", 1, None),
    (StorageFullError, 507, "storage_full", EX_TEMPFAIL, None),
    (BlobTooLargeError, 413, "file_too_large", EX_USAGE, None),
    (StorageBusyError, 503, "storage_busy", EX_TEMPFAIL, 5.0),
    (StorageLockedError, 503, "storage_locked", EX_TEMPFAIL, None),
    (StorageClosedError, 503, "shutting_down", EX_TEMPFAIL, 30.0),
    (StorageUnavailableError, 503, "storage_unavailable", EX_TEMPFAIL, 5.0),
    (CopyRefusedError, 409, "copy_refused", 1, None),
    (CopyError, 500, "storage_error", 1, None),
    (StorageURLError, 500, "storage_error", EX_CONFIG, None),
    (SchemaError, 500, "storage_error", EX_SOFTWARE, None),
    (SessionNotFoundError, 404, "not_found", 1, None),
    (AmbiguousSessionError, 400, "ambiguous_session", 1, None),
    (TitleConflictError, 409, "title_conflict", 1, None),
    (InvalidTitleError, 400, "invalid_title", 1, None),
    (StorageError, 500, "storage_error", EX_SOFTWARE, None),
    (DaemonNotRunningError, 503, "unavailable", EX_UNAVAILABLE, None),
    (DaemonUnreachableError, 503, "unavailable", EX_UNAVAILABLE, None),
    (RequestError, 400, "invalid_request", EX_USAGE, None),
    (DaemonRunningError, 409, "daemon_running", EX_TEMPFAIL, None),
    (InvalidPruneAgeError, 400, "invalid_request", EX_USAGE, None),
    (JobError, 400, "invalid_job", EX_USAGE, None),
    (HandoffRefusedError, 409, "handoff_refused", 1, None),
    (HandoffInFlightError, 409, "handoff_in_flight", 1, None),
    (FatalAdapterError, 503, "unavailable", EX_CONFIG, None),
    (GatewayError, 500, "gateway_error", 1, None),
)


def error_type_for(status: int) -> str:
    """OpenAI's error type for an HTTP status (clients branch on the status; the type names the family)."""
    if status == 401:
        return "authentication_error"
    if status == 403:
        return "permission_error"
    if status == 429:
        return "rate_limit_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def describe(exc: BaseException) -> ErrorView:
    """The reply, HTTP status, error type and code, exit code and Retry-After for ``exc``."""
    if not isinstance(exc, GatewayError):
        return ErrorView(
            f"Sorry, something went wrong ({type(exc).__name__}). "
            "Try again, or send /reset to start a fresh session.",
            500, "server_error", "internal_error", EX_SOFTWARE,
        )
    status, code, exit_code, wait = next((s, c, x, w) for cls, s, c, x, w in _TABLE if isinstance(exc, cls))
    said = getattr(exc, "retry_after", None)
    retry_after = float(said) if isinstance(said, int | float) and said > 0 else wait
    if isinstance(exc, ModelNotConfiguredError):
        reply = str(exc)  # a missing model is an instruction, not a failure: it is said plainly
    elif isinstance(exc, ModelUnavailableError) and exc.status is None:
        # Its reason is the connection library's own text (``ContentLengthError: ...``): the log has it.
        reply = (f"⚠️ The model endpoint {exc.endpoint} could not be reached, or cut the answer off "
                 f"({'1 attempt' if exc.attempts == 1 else f'{exc.attempts} attempts'}). "
                 "Check that the model server is running and that model.base_url is right.")
    else:
        reply = f"⚠️ {exc}"
    return ErrorView(reply, status, error_type_for(status), code, exit_code, retry_after)


__all__ = [
    "EX_CONFIG",
    "EX_SOFTWARE",
    "EX_TEMPFAIL",
    "EX_UNAVAILABLE",
    "EX_USAGE",
    "AdapterError",
    "AmbiguousSessionError",
    "BadInputError",
    "BlobTooLargeError",
    "ChatBusyError",
    "ChatGoneError",
    "CompressionError",
    "ConfigError",
    "ControlError",
    "CopyError",
    "CopyRefusedError",
    "DaemonNotRunningError",
    "DaemonRunningError",
    "DaemonUnreachableError",
    "DuplicateRequestError",
    "ErrorView",
    "FatalAdapterError",
    "GatewayError",
    "HandoffInFlightError",
    "HandoffRefusedError",
    "InputTooLongError",
    "InvalidPruneAgeError",
    "InvalidTitleError",
    "JobError",
    "LaneError",
    "LaneFullError",
    "LaneLostError",
    "LanesClosedError",
    "MalformedUpdateError",
    "MediaError",
    "MediaProcessingError",
    "MediaTooLargeError",
    "MediaUnavailableError",
    "MemoryLimitError",
    "MemoryStoreError",
    "ModelAuthError",
    "ModelContextLengthError",
    "ModelError",
    "ModelNotConfiguredError",
    "ModelRateLimitError",
    "ModelRejectedError",
    "ModelResponseError",
    "ModelTimeoutError",
    "ModelUnavailableError",
    "RateLimitedError",
    "RequestError",
    "SchemaError",
    "SessionNotFoundError",
    "SkillError",
    "SkillNotFoundError",
    "SpeechError",
    "StorageBusyError",
    "StorageClosedError",
    "StorageError",
    "StorageFullError",
    "StorageLockedError",
    "StorageURLError",
    "StorageUnavailableError",
    "TitleConflictError",
    "ToolError",
    "TranscriptionError",
    "UnitPathError",
    "UnreadableMediaError",
    "UrlRefusedError",
    "VisionError",
    "describe",
    "error_type_for",
]
