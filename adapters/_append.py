"""The growing answer on an output that cannot take text back (an SSE response, a terminal).

The gateway updates a stream with the whole answer so far, and that text can
shrink: the text of a model call that turned out to ask for tools is dropped.
Such an output keeps what it showed and starts the answer anew after it (an
SSE stream after a blank line, ``SEPARATOR``), so its reader sees the dropped
text, then the answer whole.
"""

from __future__ import annotations

__all__ = ["SEPARATOR", "AppendOnly"]

#: what an SSE stream sends between text it could not take back and the answer that replaced it
SEPARATOR = "\n\n"


class AppendOnly:
    """What to append to show the next text so far."""

    def __init__(self) -> None:
        #: the text the output shows since its last restart (what a later text may extend)
        self.shown = ""

    @property
    def started(self) -> bool:
        return bool(self.shown)

    def next(self, text: str) -> tuple[str, bool]:
        """``(new, restart)``: the text to append, and whether it starts the answer anew after what
        was shown (``new`` is then the whole of ``text``). ``("", False)``: nothing to show yet; an
        empty text (all of it dropped) waits for the text that replaces it."""
        if text.startswith(self.shown):
            new, restart = text[len(self.shown):], False
        elif not text:
            return "", False
        else:
            new, restart = text, True
        self.shown = text
        return new, restart
