"""A stdio server's stderr: read through a pipe of our own instead of mixing with the daemon's.

Each line goes to the debug log (servers chat there on every request); the last few are kept,
because when a server dies at start they are what says why ("no API key", a traceback).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import deque
from collections.abc import Callable
from typing import IO, Any, TextIO

_CHUNK = 4096
#: a line longer than this is cut (a child may write megabytes without a newline)
_MAX_LINE = 2000


class ChildStderr:
    def __init__(self, log: Any, scrub: Callable[[str], str], keep: int = 5) -> None:
        self._log = log
        self._scrub = scrub
        read_fd, write_fd = os.pipe()
        #: handed to the child as its stderr
        self.writer: TextIO = open(write_fd, "w")  # closed in child_started
        self._reader_file: IO[bytes] | None = os.fdopen(read_fd, "rb")
        self._tail: deque[str] = deque(maxlen=keep)
        self._task: asyncio.Task[None] | None = None
        self._transport: asyncio.ReadTransport | None = None

    async def start(self) -> None:
        reader = asyncio.StreamReader()
        loop = asyncio.get_running_loop()
        assert self._reader_file is not None
        self._transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), self._reader_file)
        self._task = asyncio.create_task(self._pump(reader), name="mcp-stderr")

    def child_started(self) -> None:
        """Our copy of the write end closes, so the pipe ends when the child's does."""
        with contextlib.suppress(OSError):
            self.writer.close()

    def tail(self) -> str:
        return " | ".join(self._tail)

    async def _pump(self, reader: asyncio.StreamReader) -> None:
        buffer = b""
        while True:
            chunk = await reader.read(_CHUNK)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            if len(buffer) > _MAX_LINE:
                lines.append(buffer)
                buffer = b""
            for raw in lines:
                self._line(raw)
        if buffer:
            self._line(buffer)

    def _line(self, raw: bytes) -> None:
        text = self._scrub(raw[:_MAX_LINE].decode("utf-8", "replace").rstrip())
        if text:
            self._tail.append(text)
            self._log.debug("mcp.stderr", line=text)

    async def aclose(self) -> None:
        self.child_started()
        if self._task is not None:
            # The child is gone: what it wrote last is still worth reading, briefly.
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(self._task), 0.5)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        if self._transport is not None:
            self._transport.close()
        elif self._reader_file is not None:
            self._reader_file.close()
        self._reader_file = None
