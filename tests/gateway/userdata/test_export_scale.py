"""An export of a person with 100 000 messages: every message is in the file, and it was streamed
(a fresh child process's peak RSS hardly grows from a 1 000-message export to it). The figures
and the method are ``bench/userdata.py``'s; no time is asserted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bench.userdata import LARGE, SMALL, TARGET_MIB, export_in_child, fill
from storage import StateStore


async def test_a_100k_message_export_is_whole_and_streamed(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    async with StateStore(db) as store:
        await store.write(lambda c: fill(c, "s-small", "1", SMALL))
        await store.write(lambda c: fill(c, "s-large", "2", LARGE))
    small = await asyncio.to_thread(export_in_child, db, tmp_path / "small.json", "1")
    large = await asyncio.to_thread(export_in_child, db, tmp_path / "large.json", "2")
    assert (small["messages"], large["messages"]) == (SMALL, LARGE)
    data = json.loads(await asyncio.to_thread((tmp_path / "large.json").read_text))
    [session] = data["sessions"]
    assert len(session["messages"]) == LARGE and session["messages"][-1]["content"].startswith(f"message {LARGE - 1} ")
    assert [m["role"] for m in session["messages"][:2]] == ["user", "assistant"]
    assert (large["peak_kib"] - small["peak_kib"]) / 1024 <= TARGET_MIB
