"""Real subprocesses for the storage tests: start, talk over pipes, always reap.

Every wait has a timeout; a failure shows the child's stderr.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

CRASH_CHILD = HERE / "_crash_child.py"
SQLITE_PEER = HERE / "_sqlite_peer.py"
STORE_HOLDER = HERE / "_store_holder.py"

WAIT = 20.0  # generous upper bound for any single step of a child process


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Child:
    """One child process with line-oriented stdout and a file for stderr."""

    def __init__(self, proc: asyncio.subprocess.Process, stderr_file: IO[bytes], stderr_path: Path) -> None:
        self.proc = proc
        self._stderr_file = stderr_file
        self._stderr_path = stderr_path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_text(self) -> str:
        self._stderr_file.flush()
        try:
            return self._stderr_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    async def readline(self, within: float = WAIT) -> str | None:
        """The next complete line, or None at EOF (a trailing partial line counts as EOF)."""
        assert self.proc.stdout is not None
        try:
            raw = await asyncio.wait_for(self.proc.stdout.readline(), within)
        except TimeoutError:
            raise AssertionError(f"child {self.pid} said nothing for {within}s; stderr:\n{self.stderr_text()}") from None
        if not raw.endswith(b"\n"):
            return None
        return raw.decode().rstrip("\n")

    async def expect(self, prefix: str, within: float = WAIT) -> str:
        """Skip lines until one starts with ``prefix``; fail on EOF or timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            line = await self.readline(max(0.01, deadline - loop.time()))
            if line is None:
                await self.wait(WAIT)
                raise AssertionError(
                    f"child {self.pid} exited ({self.proc.returncode}) before {prefix!r}; stderr:\n{self.stderr_text()}"
                )
            if line.startswith(prefix):
                return line

    async def send(self, line: str = "") -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await asyncio.wait_for(self.proc.stdin.drain(), WAIT)

    def close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()

    async def wait(self, within: float = WAIT) -> int:
        try:
            return await asyncio.wait_for(self.proc.wait(), within)
        except TimeoutError:
            raise AssertionError(f"child {self.pid} did not exit within {within}s; stderr:\n{self.stderr_text()}") from None

    async def kill(self) -> None:
        if self.proc.returncode is None:
            try:
                self.proc.kill()  # SIGKILL
            except ProcessLookupError:
                pass
        await self.wait()

    async def reap(self) -> None:
        self.close_stdin()
        await self.kill()
        self._stderr_file.close()


def _stderr_log(log_dir: Path, script: Path) -> tuple[Path, IO[bytes]]:
    log_dir.mkdir(parents=True, exist_ok=True)
    path = log_dir / f"{script.stem}-{os.urandom(4).hex()}.stderr"
    return path, path.open("wb")


@asynccontextmanager
async def spawn(script: Path, *args: str, log_dir: Path) -> AsyncIterator[Child]:
    """Start ``python script args...``; killed and reaped on exit whatever happens."""
    stderr_path, stderr_file = _stderr_log(log_dir, script)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr_file,
        cwd=str(REPO),
        env=child_env(),
    )
    child = Child(proc, stderr_file, stderr_path)
    try:
        yield child
    finally:
        await child.reap()
