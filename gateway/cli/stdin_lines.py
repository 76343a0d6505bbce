"""Lines of the terminal chat's standard input, read on request."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

__all__ = ["StdinLines"]


class StdinLines:
    """Lines of stdin, read on request in a daemon thread; None at end of input.

    The thread reads the file descriptor itself, not ``sys.stdin``: a daemon
    thread blocked inside a buffered reader aborts the interpreter at exit.
    """

    def __init__(self, prompt: str) -> None:
        self._loop = asyncio.get_running_loop()
        self._prompt = prompt
        self._want = threading.Event()
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._fd = sys.stdin.fileno()
        threading.Thread(target=self._read, name="chat-stdin", daemon=True).start()

    def _read(self) -> None:
        buf = b""
        while True:
            self._want.wait()
            self._want.clear()
            if self._prompt:
                sys.stdout.write(self._prompt)
                sys.stdout.flush()
            while b"\n" not in buf:
                try:
                    chunk = os.read(self._fd, 65536)
                except InterruptedError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                buf += chunk
            line: str | None
            if b"\n" in buf:
                raw, buf = buf.split(b"\n", 1)
                line = raw.decode("utf-8", errors="replace")
            elif buf:
                line, buf = buf.decode("utf-8", errors="replace"), b""  # a last line without a newline
            else:
                line = None
            self._loop.call_soon_threadsafe(self._queue.put_nowait, line)
            if line is None:
                return

    async def next(self) -> str | None:
        self._want.set()
        return await self._queue.get()
