"""A list picker for a terminal: arrows move, typing filters, Enter picks, Esc leaves.

Standard library only (termios, an alternate screen, ANSI): the project's
other terminal code (rich) draws but does not read keys. ``PickerState`` is
the picker without a terminal; ``pick`` runs it on one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import termios
import tty
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from rich.cells import cell_len, set_cell_size

__all__ = ["PickerState", "decode_keys", "pick"]

_ALT_SCREEN_ON, _ALT_SCREEN_OFF = "\x1b[?1049h", "\x1b[?1049l"
_HOME_CLEAR, _REVERSE, _RESET = "\x1b[H\x1b[J", "\x1b[7m", "\x1b[0m"
_CURSOR_HIDE, _CURSOR_SHOW = "\x1b[?25l", "\x1b[?25h"

_SEQUENCES = {
    "\x1b[A": "up", "\x1bOA": "up", "\x1b[B": "down", "\x1bOB": "down",
    "\x1b[5~": "page_up", "\x1b[6~": "page_down", "\x1b[H": "home", "\x1b[F": "end",
}
_SINGLE = {"\r": "enter", "\n": "enter", "\x7f": "backspace", "\x08": "backspace", "\x15": "clear",
           "\x03": "cancel", "\x04": "cancel", "\x1b": "cancel"}


def decode_keys(text: str) -> Iterator[str]:
    """Key names (``up``, ``enter``, ...) or single printable characters, in order."""
    i = 0
    while i < len(text):
        seq = next((s for s in _SEQUENCES if text.startswith(s, i)), None)
        if seq is not None:
            yield _SEQUENCES[seq]
            i += len(seq)
            continue
        ch = text[i]
        if ch == "\x1b" and i + 1 < len(text) and text[i + 1] in "[O":
            # An escape sequence we do not use (F-keys, ...): skip up to its final byte.
            j = i + 2
            while j < len(text) and not ("@" <= text[j] <= "~"):
                j += 1
            i = j + 1
            continue
        if ch in _SINGLE:
            yield _SINGLE[ch]
        elif ch.isprintable():
            yield ch
        i += 1


@dataclass
class PickerState:
    """Rows, the filter typed so far and the selected row among those that match it."""

    rows: Sequence[str]
    #: what the filter matches for each row (default: the row itself)
    haystacks: Sequence[str] = ()
    query: str = ""
    cursor: int = 0
    _visible: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.haystacks:
            self.haystacks = self.rows
        self._refilter()

    def _refilter(self) -> None:
        words = self.query.casefold().split()
        self._visible = [i for i, hay in enumerate(self.haystacks) if all(w in hay.casefold() for w in words)]
        self.cursor = min(self.cursor, max(len(self._visible) - 1, 0))

    @property
    def visible(self) -> list[int]:
        """Indexes of the rows that match the filter, in order."""
        return self._visible

    @property
    def selected(self) -> int | None:
        return self._visible[self.cursor] if self._visible else None

    def press(self, key: str, page: int = 10) -> bool:
        """Apply one key; True when it ends the picking (Enter on a row, or cancel)."""
        if key == "enter":
            return self.selected is not None
        if key == "cancel":
            return True
        moves = {"up": -1, "down": 1, "page_up": -page, "page_down": page,
                 "home": -len(self._visible), "end": len(self._visible)}
        if key in moves:
            self.cursor = max(0, min(self.cursor + moves[key], len(self._visible) - 1))
        elif key == "backspace":
            self.query = self.query[:-1]
            self._refilter()
        elif key == "clear":
            self.query = ""
            self._refilter()
        elif len(key) == 1:
            self.query += key
            self.cursor = 0
            self._refilter()
        return False


def _clip(text: str, width: int) -> str:
    """At most ``width`` terminal cells, spacing kept (the rows are aligned columns)."""
    return text if cell_len(text) <= width else set_cell_size(text, max(width - 1, 0)) + "…"


def _frame(state: PickerState, title: str, header: str, width: int, height: int) -> str:
    room = max(height - 4, 1)
    top = max(0, min(state.cursor - room // 2, len(state.visible) - room))
    lines = [_clip(title, width), _clip(f"filter › {state.query}", width), _clip(header, width)]
    for pos in range(top, min(top + room, len(state.visible))):
        text = _clip(state.rows[state.visible[pos]], width)
        lines.append(f"{_REVERSE}{text}{_RESET}" if pos == state.cursor else text)
    if not state.visible:
        lines.append("(nothing matches; Backspace to widen the filter)")
    return _HOME_CLEAR + "\n".join(lines)  # the terminal's output processing adds the \r


def pick(state: PickerState, *, title: str, header: str, fd: int, out: TextIO) -> int | None:
    """Let the person at the terminal ``fd`` pick a row; its index, or None when they left."""
    saved = termios.tcgetattr(fd)
    out.write(_ALT_SCREEN_ON + _CURSOR_HIDE)
    try:
        tty.setcbreak(fd)  # keys one by one, no echo; Ctrl-C still interrupts
        while True:
            size = shutil.get_terminal_size()
            out.write(_frame(state, title, header, size.columns, size.lines))
            out.flush()
            data = os.read(fd, 64)
            if not data:
                return None
            for key in decode_keys(data.decode("utf-8", errors="ignore")):
                if state.press(key, page=max(size.lines - 4, 1)):
                    return None if key == "cancel" else state.selected
    except KeyboardInterrupt:
        return None
    finally:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        out.write(_CURSOR_SHOW + _ALT_SCREEN_OFF)
        out.flush()
