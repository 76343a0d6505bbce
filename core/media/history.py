"""Which images a model call carries: this turn's, and those of the last few turns before it.

state.db keeps a user message as text: each image in it is a marker (``image_marker``) naming
the image by a digest and carrying its description. A model call sees pixels again only for the
last ``turns`` earlier user messages that had images; older ones stay text, so a long
conversation about photos does not resend every photo on every call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .markers import MARKER_START, find_image_markers

__all__ = ["ImageRecall", "with_images"]

#: (session id, digests) -> the content parts of those earlier images, by digest (the gateway's)
ImageRecall = Callable[[str, list[str]], Awaitable[dict[str, dict[str, Any]]]]

#: how many earlier user messages are looked through for images (every turn of a long text-only
#: conversation would otherwise scan all of it)
_LOOK_BACK = 50



def _with_parts(message: dict[str, Any], parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    return {**message, "content": [{"type": "text", "text": text}, *parts]}


async def with_images(conversation: list[dict[str, Any]], parts: Sequence[dict[str, Any]], *,
                      recall: ImageRecall | None, turns: int, session_id: str) -> list[dict[str, Any]]:
    """``conversation`` as the model gets it: a new list (the stored messages are not changed)
    in which the last user message carries ``parts`` (this turn's images), and the ``turns``
    user messages with image markers before it carry their images again (from ``recall``)."""
    out = list(conversation)
    last_user = next((i for i in range(len(out) - 1, -1, -1) if out[i].get("role") == "user"), None)
    if last_user is None:
        return out
    if parts:
        out[last_user] = _with_parts(out[last_user], parts)
    if recall is None or turns <= 0:
        return out
    picked: list[tuple[int, list[str]]] = []
    looked = 0
    for i in range(last_user - 1, -1, -1):
        content = out[i].get("content")
        if out[i].get("role") != "user" or not isinstance(content, str):
            continue
        looked += 1
        if looked > _LOOK_BACK:
            break
        digests = find_image_markers(content) if MARKER_START in content else []
        if digests:
            picked.append((i, digests))
            if len(picked) == turns:
                break
    if not picked:
        return out
    found = await recall(session_id, [d for _, digests in picked for d in digests])
    for i, digests in picked:
        again = [found[d] for d in digests if d in found]
        if again:
            out[i] = _with_parts(out[i], again)
    return out
