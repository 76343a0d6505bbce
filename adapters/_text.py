"""Text as platforms hand it to us, made safe to store and send."""

from __future__ import annotations

__all__ = ["clean_text"]


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (possible in JSON, impossible to encode) as U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # Paired surrogates become the character they encode; lone ones become U+FFFD.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text
