"""One POST to an OpenAI-compatible endpoint, its failures told in a sentence without the key."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from .._failures import clip, scrub
from .errors import MediaProcessingError

_DETAIL_LIMIT = 160
_HINTS = {
    401: " (the API key was refused)",
    403: " (the API key was refused)",
    404: " (check the base URL and the model name)",
    413: " (the file is too large for it)",
    429: " (it is rate-limiting; try again later)",
}


def host_of(base_url: str) -> str:
    """The host of ``base_url`` alone: never a path, a query or credentials."""
    try:
        return httpx.URL(base_url).host or "(no host)"
    except httpx.InvalidURL:
        return "(an invalid URL)"


def endpoint(base_url: str, path: str) -> str:
    return base_url.rstrip("/") + path


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    *,
    what: str,
    api_key: str | None,
    seconds: float,
    error: type[MediaProcessingError],
    **request: Any,
) -> tuple[int, Any]:
    """POST and decode the JSON answer; ``(status, body)`` when the status is below 400.

    A 400 is returned to the caller as well (some may retry it differently); any other
    failure raises ``error`` with a message a person can read. ``seconds`` caps the whole
    exchange (httpx's own timeout is per read, which a trickling server could stretch).
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with asyncio.timeout(seconds):
            response = await client.post(url, headers=headers, timeout=seconds, **request)
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise error(f"{what} timed out after {seconds:g} s") from exc
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise error(f"{what} could not be reached at {host_of(url)}") from exc
    payload = _json_or_none(response)
    if response.status_code >= 400 and response.status_code != 400:
        raise error(status_message(what, response.status_code, payload, response.text, api_key))
    if payload is None and response.status_code != 400:
        raise error(f"{what} sent back an answer that is not JSON")
    return response.status_code, payload


def status_message(what: str, status: int, payload: Any, raw: str, api_key: str | None) -> str:
    detail = _provider_message(payload) or raw
    detail = clip(scrub(detail, api_key), _DETAIL_LIMIT)
    return f"{what} failed: the service answered HTTP {status}{_HINTS.get(status, '')}" + (
        f": {detail}" if detail else "")


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _provider_message(payload: Any) -> str:
    if isinstance(payload, dict):
        err = payload.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err, str):
            return err
        if isinstance(payload.get("detail"), str):
            return str(payload["detail"])
    return ""
