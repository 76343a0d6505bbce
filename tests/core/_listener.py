"""An ``AnswerListener`` that records what a streaming turn told it, in order."""

from __future__ import annotations

import asyncio


class RecordingListener:
    """Records ``("text", delta)``, ``("discard", "")`` and ``("tool", name)``; ``texts`` is set once
    ``wait_for`` deltas have arrived."""

    def __init__(self, wait_for: int = 1) -> None:
        self.events: list[tuple[str, str]] = []
        self.texts = asyncio.Event()
        self._wait_for = wait_for

    def text(self, delta: str) -> None:
        self.events.append(("text", delta))
        if sum(1 for kind, _ in self.events if kind == "text") >= self._wait_for:
            self.texts.set()

    def discard(self) -> None:
        self.events.append(("discard", ""))

    def tool(self, name: str) -> None:
        self.events.append(("tool", name))

    @property
    def deltas(self) -> list[str]:
        return [value for kind, value in self.events if kind == "text"]

    @property
    def shown(self) -> str:
        """The text since the last discard: what a screen following the listener shows."""
        kinds = [kind for kind, _ in self.events]
        start = len(kinds) - kinds[::-1].index("discard") if "discard" in kinds else 0
        return "".join(value for kind, value in self.events[start:] if kind == "text")

    @property
    def kinds(self) -> list[str]:
        """The kinds of the events, runs of texts counted once: ["text", "discard", "tool", "text"]."""
        out: list[str] = []
        for kind, _ in self.events:
            if not (out and kind == "text" and out[-1] == "text"):
                out.append(kind)
        return out
