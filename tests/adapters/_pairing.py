"""Shared by the pairing tests of the three platforms: ``hermes-gateway pairing`` run as a person
runs it (the console script, against the daemon of the test's event loop), reading the code a
stranger was given, and proving it was never written anywhere in clear."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from tests.gateway._console import ROOT, SCRIPT, TIMEOUT, Result, console_env

CODE = re.compile(r"pairing code is ([A-Z2-9]{8})")


def code_in(text: str) -> str:
    found = CODE.search(text)
    assert found is not None, f"no pairing code in {text!r}"
    return found.group(1)


async def pairing_cli(home: Path, *args: str) -> Result:
    """``hermes-gateway pairing ARGS``."""
    return await console(home, "pairing", *args)


async def console(home: Path, *args: str) -> Result:
    """The daemon runs in this event loop: the CLI must not block it."""
    proc = await asyncio.create_subprocess_exec(
        str(SCRIPT), *args, env=console_env(home), cwd=ROOT, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode is not None
    return Result(proc.returncode, out.decode(), err.decode())


def nowhere_in_clear(home: Path, code: str, *logs: str) -> None:
    """``code`` is in no log text and in no byte of state.db (its WAL included) nor any file of the home."""
    for text in logs:
        assert code not in text
        assert code.lower() not in text.lower()
    conn = sqlite3.connect(home / "state.db")
    try:
        dump = "\n".join(conn.iterdump())
    finally:
        conn.close()
    assert code not in dump
    for path in home.rglob("*"):
        if path.is_file() and not path.is_socket():
            assert code.encode() not in path.read_bytes(), path


def said(fake: Any, chat_id: str) -> list[str]:
    """What the bot posted in ``chat_id`` (Discord's and Slack's fakes: new messages, not edits)."""
    return [str(m["text"]) for m in fake.sent
            if str(m["chat_id"]) == str(chat_id) and m["method"] in ("create_message", "chat.postMessage")]


async def wait_said(fake: Any, chat_id: str, part: str, n: int = 1, timeout: float = 20.0) -> str:
    """The ``n``-th message the bot posted in ``chat_id`` holding ``part``."""
    def found() -> str | None:
        hits = [t for t in said(fake, chat_id) if part in t]
        return hits[n - 1] if len(hits) >= n else None

    result: str = await fake.wait_for(found, timeout, what=f"message {n} with {part!r} in {chat_id}")
    return result
