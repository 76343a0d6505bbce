"""The gateway's own errors (drawn, with the rest of the tree and what a person sees of each, in
``gateway.errors``, which exports them)."""

from __future__ import annotations

from pathlib import Path

from storage.errors import GatewayError


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


class ChatBusyError(LaneError):
    """The chat takes no message right now (its session is being handed off)."""


class LaneLostError(ChatBusyError):
    """Several nodes: this node no longer serves the chat (its lease lapsed during the turn); the
    turn's transaction rolls back and the chat's new owner answers the message."""


class BadInputError(GatewayError):
    """A message the gateway cannot take as it is (no text, text that is not valid Unicode)."""


class InputTooLongError(BadInputError):
    """A message longer than the gateway takes."""


class DuplicateRequestError(GatewayError):
    """A retried request (same idempotency key) whose first answer cannot be given again:
    it was answered without a stored reply, or its conversation has moved on since."""


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


class JobError(GatewayError):
    """A scheduled job cannot be made, found or changed (the message is what the person reads)."""
