"""An image put into words by an auxiliary vision model, for a main model that cannot see.

One OpenAI-compatible chat completion with a single user message: the prompt as a text
part, then the image as an ``image_url`` part. The description is stored with the message,
so later turns (and a main model without vision) read it as text.
"""

from __future__ import annotations

from typing import Any

import httpx

from ._http import endpoint, post_json, status_message
from .errors import VisionError
from .images import PreparedImage, image_part

_WHAT = "the vision model"
_MAX_TOKENS = 600

DESCRIBE_PROMPT = (
    "Describe this image for someone who cannot see it, in a short paragraph. "
    "Transcribe any text in it exactly. If it is a screenshot, say what application or page it shows."
)


async def describe_image(
    img: PreparedImage,
    *,
    base_url: str,
    model: str,
    api_key: str | None,
    timeout: float,  # noqa: ASYNC109 - seconds for the whole call, enforced inside
    prompt: str = DESCRIBE_PROMPT,
    transport: httpx.AsyncBaseTransport | None = None,
) -> str:
    """The vision model's description of ``img``; raises :class:`VisionError` when there is none."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": [{"type": "text", "text": prompt}, image_part(img)]}],
        "max_tokens": _MAX_TOKENS,
    }
    async with httpx.AsyncClient(transport=transport, headers={"Accept": "application/json"}) as http:
        status, payload = await post_json(
            http, endpoint(base_url, "/chat/completions"), what=_WHAT, api_key=api_key,
            seconds=timeout, error=VisionError, json=body)
    if status == 400:
        raise VisionError(status_message(_WHAT, status, payload, "", api_key))
    text = _answer_text(payload).strip()
    if not text:
        raise VisionError(f"{_WHAT} gave no description of the image")
    return text


def _answer_text(payload: Any) -> str:
    try:
        content = payload["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise VisionError(f"{_WHAT} sent back an answer without a message") from None
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # some servers answer in parts, as the request was sent
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""
