"""The text that stands for an image in a stored message.

A user message keeps its images as markers such as
``[image 3f2a9c1e4b5d: photo.jpg, 1568×1176] a whiteboard with ...``: the first 12 hex
digits of the image's sha256, its name and size, then its description when there is one.
Older turns are sent to the model as this text; for the last few, the gateway finds the
digests with :func:`find_image_markers` and sends the pixels again. A digest found in a
message is only a lookup key: resolve it against the same session's own attachments, since
a person can type a marker too.
"""

from __future__ import annotations

import re

DIGEST_CHARS = 12
#: how every marker starts (a substring test is far cheaper than the pattern, for text without any)
MARKER_START = "[image "

#: One marker; group 1 is the digest.
IMAGE_MARKER = re.compile(r"\[image ([0-9a-f]{12})(?:: [^\]\n]*)?\]")

_NAME_LIMIT = 60


def image_marker(digest: str, name: str | None, width: int, height: int, description: str | None) -> str:
    """The marker of one image; ``digest`` is its sha256 in hex (only the first 12 digits are kept)."""
    short = digest[:DIGEST_CHARS].lower()
    if len(short) != DIGEST_CHARS or any(c not in "0123456789abcdef" for c in short):
        raise ValueError("digest must be a sha256 in hex")
    label = _clean_name(name)
    size = f"{width}×{height}"
    marker = f"[image {short}: {label}, {size}]" if label else f"[image {short}: {size}]"
    # A description (a vision model's words) cannot smuggle in a marker of another image.
    text = " ".join((description or "").split()).replace("[image ", "(image ")
    return f"{marker} {text}" if text else marker


def find_image_markers(text: str) -> list[str]:
    """The digests of the image markers in ``text``, in order (repeats kept)."""
    return [m.group(1) for m in IMAGE_MARKER.finditer(text)]


def _clean_name(name: str | None) -> str:
    """The name on one line, without the brackets that would end the marker early."""
    if not name:
        return ""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    clean = " ".join("".join(c for c in base if c.isprintable() and c not in "[]").split())
    return clean if len(clean) <= _NAME_LIMIT else clean[: _NAME_LIMIT - 1] + "…"
