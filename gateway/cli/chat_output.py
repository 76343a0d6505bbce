"""How the terminal chat prints the answers the daemon pushes: as they are written (``delta`` and
``restart`` events), then of the final ``reply`` only what is not on the screen yet, so that a
person never reads an answer twice.

When the final text is not what was printed (an error cut the answer, or the answer dropped text it
had shown, and the daemon restarted it), the final text follows whole, on a line of its own. A
message printed in the middle of an answer (a notice, /stop's word) leaves that answer's line; the
rest of it continues after ``…``.
"""

from __future__ import annotations

from typing import TextIO

__all__ = ["ReplyPrinter"]

#: printed between text an answer dropped and the answer anew (the daemon's SSE stream does the same)
_RESTART = "\n\n"
_RESUMED = "…"


class ReplyPrinter:
    def __init__(self, out: TextIO, *, stream: bool = True) -> None:
        """``stream``: print answers as they are written (False: each when it is finished)."""
        self._out = out
        self._stream = stream
        self._reply_to: str | None = None  # the answer being printed as it is written
        self._shown = ""  # what of it is on the screen since its last restart
        self._open = False  # the screen's last line is its text: anything else starts a new line
        self._cut = False  # something else was printed in the middle of it

    def partial(self, text: str, reply_to: str | None, *, restart: bool) -> None:
        """More of an answer (``restart``: the answer anew, after text it dropped)."""
        if not self._stream or not text:
            return
        if reply_to != self._reply_to or not self._shown:
            self._leave_line()
            self._reply_to, self._shown, self._cut = reply_to, "", False
        elif restart:
            self._write(_RESTART)
        if self._cut:
            self._write(_RESUMED)
            self._cut = False
        self._shown = text if restart else self._shown + text
        self._write(text)

    def final(self, text: str, reply_to: str | None) -> None:
        """A message in full: an answer's final text, a notice, an acknowledgement."""
        if not self._shown or reply_to != self._reply_to:
            self._leave_line()
            self._write(text + "\n")
            return
        if text.startswith(self._shown):
            rest = text[len(self._shown):]
            if rest and self._cut:
                self._write(_RESUMED)
            self._write(rest + "\n" if rest or self._open else "")
        else:
            self._leave_line()
            self._write(text + "\n")
        self._reply_to, self._shown, self._cut, self._open = None, "", False, False

    def _leave_line(self) -> None:
        """Before anything else is printed: the answer being written keeps its line."""
        if self._open:
            self._write("\n")
            self._cut = True

    def _write(self, text: str) -> None:
        if text:
            self._out.write(text)
            self._out.flush()
            self._open = not text.endswith("\n")
