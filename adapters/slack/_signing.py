"""Slack's request signature (v0): HMAC-SHA256 of ``v0:<timestamp>:<raw body>``.

Checked on the raw bytes, before anything is decoded, so a body that is not even
UTF-8 is refused (or accepted) by its signature alone. A timestamp more than five
minutes away from now is refused too, so a captured request cannot be replayed.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping

__all__ = ["MAX_SKEW", "signature_valid"]

#: Slack's own replay window (seconds).
MAX_SKEW = 300


def signature_valid(secret: str, body: bytes, headers: Mapping[str, str], *, now: float | None = None) -> bool:
    stamp = headers.get("X-Slack-Request-Timestamp") or ""
    given = headers.get("X-Slack-Signature") or ""
    if not secret or not stamp.isascii() or not stamp.isdigit() or not given.startswith("v0="):
        return False
    if abs((time.time() if now is None else now) - int(stamp)) > MAX_SKEW:
        return False
    base = b"v0:" + stamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace"))
