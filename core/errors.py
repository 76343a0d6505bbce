"""Errors of the model client, as children of the project's single exception tree.

Every message is written for the person who has to act on it: it says what
went wrong and what to change. None of them ever contains the API key; any
text the provider sent back has been scrubbed of the key and cut short by the
client before it lands here.
"""

from __future__ import annotations

from collections.abc import Sequence

from storage.errors import GatewayError

_CONFIG_HINT = (
    "set model.base_url and model.default in config.yaml, "
    "or the environment variables HERMES_MODEL_BASE_URL and HERMES_MODEL"
)


def _attempts(attempts: int) -> str:
    return "1 attempt" if attempts == 1 else f"{attempts} attempts"


def describe_wait(seconds: float) -> str:
    """``"about 45 seconds"``, ``"about 3 minutes"``, ``"about 2 hours"``: a wait a person can plan around."""
    if seconds < 90:
        n, unit = max(round(seconds), 1), "second"
    elif seconds < 3600:
        n, unit = round(seconds / 60), "minute"
    else:
        n, unit = round(seconds / 3600), "hour"
    return f"about {n} {unit}{'' if n == 1 else 's'}"


class ModelError(GatewayError):
    """The model endpoint could not produce a usable reply."""


class ModelNotConfiguredError(ModelError):
    """No endpoint or no model name is set (or the endpoint is not an http(s) URL).

    Raise it with a ready message, or with ``missing`` (config keys such as
    ``"model.base_url"``) to get the standard one-line hint.
    """

    def __init__(self, message: str | None = None, *, missing: Sequence[str] = ()) -> None:
        self.missing = tuple(missing)
        if message is None:
            what = ", ".join(self.missing) or "model.base_url, model.default"
            message = f"No model is configured (missing {what}): {_CONFIG_HINT}."
        super().__init__(message)


class ModelAuthError(ModelError):
    """The endpoint rejected the credentials (HTTP 401/403)."""

    def __init__(self, status: int, endpoint: str) -> None:
        self.status = status
        self.endpoint = endpoint
        # The provider's own text is left out on purpose: some echo part of the key back.
        verb = "rejected the API key" if status == 401 else "refused access with this API key"
        super().__init__(
            f"The model endpoint {endpoint} {verb} (HTTP {status}). "
            "Check model.api_key in config.yaml or the HERMES_MODEL_API_KEY environment variable, "
            "and that the key may use this model."
        )


class ModelRateLimitError(ModelError):
    """HTTP 429 on every attempt."""

    def __init__(self, endpoint: str, attempts: int, retry_after: float | None = None, detail: str = "") -> None:
        self.endpoint = endpoint
        self.attempts = attempts
        self.retry_after = retry_after
        self.detail = detail
        wait = f"wait {describe_wait(retry_after)}" if retry_after else "wait a minute"
        said = f" The provider said: {detail}" if detail else ""
        super().__init__(
            f"The model provider at {endpoint} is rate-limiting requests (HTTP 429, {_attempts(attempts)}). "
            f"{wait.capitalize()} and try again, or check the quota of your plan.{said}"
        )


class ModelUnavailableError(ModelError):
    """A 5xx answer or no connection at all, on every attempt."""

    def __init__(self, endpoint: str, attempts: int, *, status: int | None = None, reason: str = "",
                 retry_after: float | None = None) -> None:
        self.endpoint = endpoint
        self.attempts = attempts
        self.status = status
        self.reason = reason
        self.retry_after = retry_after
        if status is not None:
            what = f"answered with a server error (HTTP {status}"
            when = f"in {describe_wait(retry_after)}" if retry_after and retry_after >= 1 else "later"
            hint = f"The provider is having trouble; try again {when}."
        else:
            what = f"could not be reached ({reason or 'connection failed'}"
            hint = "Check that the model server is running and that model.base_url is right."
        super().__init__(f"The model endpoint {endpoint} {what}, {_attempts(attempts)}). {hint}")


class ModelTimeoutError(ModelError):
    """No complete answer within ``timeout`` seconds on every attempt, or within the turn's budget.

    ``turn_timeout`` is set when it was the turn's budget (``model.turn_timeout``) that ran
    out: then ``attempts`` counts those of the call that was cut short (0: the budget was
    spent before it could start).
    """

    def __init__(self, endpoint: str, attempts: int, timeout: float, *, turn_timeout: float | None = None) -> None:
        self.endpoint = endpoint
        self.attempts = attempts
        self.timeout = timeout
        self.turn_timeout = turn_timeout
        if turn_timeout is not None:
            tried = f" ({_attempts(attempts)} of the last model call)" if attempts else ""
            message = (
                f"This message's time budget of {turn_timeout:g}s ran out before the model endpoint {endpoint} "
                f"finished answering{tried}. The model may be hung or overloaded, or the task too big for one "
                "message: try again or ask for less at once, or raise model.turn_timeout in config.yaml."
            )
        else:
            message = (
                f"The model endpoint {endpoint} did not answer within {timeout:g}s ({_attempts(attempts)}). "
                "The model may be overloaded or the request too large; try again, "
                "or raise model.timeout in config.yaml."
            )
        super().__init__(message)


class ModelResponseError(ModelError):
    """The request was refused (4xx) or the answer is not a usable chat completion."""

    def __init__(self, endpoint: str, problem: str, *, status: int | None = None, hint: str = "") -> None:
        self.endpoint = endpoint
        self.problem = problem
        self.status = status
        tail = f" {hint}" if hint else ""
        super().__init__(f"The model endpoint {endpoint} {problem}.{tail}")


class ModelRejectedError(ModelResponseError):
    """The server does not serve the model that was asked for (an unknown or unavailable model name);
    a turn on a model chosen with /model falls back to the one before it."""


class ModelContextLengthError(ModelError):
    """The conversation does not fit the model's context window (the caller may compress and retry)."""

    def __init__(self, endpoint: str, detail: str, *, status: int | None = 400) -> None:
        self.endpoint = endpoint
        self.detail = detail
        self.status = status
        super().__init__(
            f"The conversation is too long for the model's context window ({endpoint} said: {detail}). "
            "Start a new session or shorten the conversation, or choose a model with a larger context."
        )


class CompressionError(GatewayError):
    """A session could not be compressed; the message says why and what to do."""
