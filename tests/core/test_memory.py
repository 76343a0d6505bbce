"""MEMORY.md / USER.md: entries, dedupe, limits, frozen snapshots, atomic and concurrent writes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.memory import (
    ENTRY_DELIMITER,
    MEMORY_LIMIT,
    USER_LIMIT,
    MemoryLimitError,
    MemorySnapshot,
    MemoryStore,
    MemoryStoreError,
)
from core.tools._base import ToolContext, ToolError
from core.tools.memory_tool import MEMORY_TOOL
from storage import StateStore

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def mem(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path)


def _ctx(home: Path, store: StateStore) -> ToolContext:
    return ToolContext(session_id="s-current", platform="cli", home=home, store=store)


def test_add_writes_entries_to_the_right_file(mem: MemoryStore, tmp_path: Path) -> None:
    mem.add("memory", "The repo uses uv, not pip.")
    mem.add("user", "Prefers short answers.")
    mem.add("memory", "CI runs on GitHub Actions.")
    assert (tmp_path / "memories" / "MEMORY.md").read_text() == (
        "The repo uses uv, not pip." + ENTRY_DELIMITER + "CI runs on GitHub Actions."
    )
    assert (tmp_path / "memories" / "USER.md").read_text() == "Prefers short answers."
    assert mem.entries("memory") == ("The repo uses uv, not pip.", "CI runs on GitHub Actions.")


def test_duplicate_add_changes_nothing(mem: MemoryStore) -> None:
    assert mem.add("user", "Likes tea.").changed
    again = mem.add("user", "  Likes tea.  ")
    assert not again.changed
    assert "already" in again.message
    assert mem.entries("user") == ("Likes tea.",)


def test_hand_edited_duplicates_are_deduped_on_read(mem: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "memories"
    folder.mkdir()
    (folder / "MEMORY.md").write_text("a\n§\nb\n§\na\n§\n\n§\nb\n")
    assert mem.entries("memory") == ("a", "b")
    assert mem.snapshot().memory == "a" + ENTRY_DELIMITER + "b"


def test_add_past_the_limit_is_refused_and_asks_to_consolidate(mem: MemoryStore, tmp_path: Path) -> None:
    chunk = "x" * 500
    for i in range(4):
        mem.add("memory", f"{i} {chunk}")
    before = (tmp_path / "memories" / "MEMORY.md").read_bytes()
    assert len(before.decode()) <= MEMORY_LIMIT
    with pytest.raises(MemoryLimitError) as err:
        mem.add("memory", "y" * 300)
    message = str(err.value)
    assert "Consolidate" in message and "replace" in message and "remove" in message
    assert f"/{MEMORY_LIMIT:,}" in message
    assert (tmp_path / "memories" / "MEMORY.md").read_bytes() == before


def test_user_file_has_its_own_smaller_limit(mem: MemoryStore) -> None:
    mem.add("memory", "m" * 1500)  # fine in MEMORY.md
    with pytest.raises(MemoryLimitError):
        mem.add("user", "u" * (USER_LIMIT + 1))
    exact = mem.add("user", "u" * USER_LIMIT)
    assert exact.chars == USER_LIMIT == exact.limit
    assert "consolidate" in exact.message  # over 80%: told early


def test_replace_growing_past_the_limit_is_refused(mem: MemoryStore) -> None:
    mem.add("user", "short fact")
    mem.add("user", "f" * 1300)
    with pytest.raises(MemoryLimitError):
        mem.replace("user", "short fact", "much longer " * 20)
    assert mem.entries("user")[0] == "short fact"


def test_replace_and_remove_need_exactly_one_match(mem: MemoryStore) -> None:
    mem.add("memory", "Deploys go through staging first.")
    mem.add("memory", "Staging lives at staging.example.internal.")
    with pytest.raises(MemoryStoreError, match="2 entries"):
        mem.replace("memory", "taging", "x")
    with pytest.raises(MemoryStoreError, match="No entry"):
        mem.remove("memory", "production")
    update = mem.replace("memory", "go through staging", "Deploys go through staging, then canary.")
    assert update.changed
    assert mem.entries("memory")[0] == "Deploys go through staging, then canary."
    mem.remove("memory", "example.internal")
    assert mem.entries("memory") == ("Deploys go through staging, then canary.",)


def test_replace_into_an_existing_entry_dedupes(mem: MemoryStore) -> None:
    mem.add("memory", "alpha")
    mem.add("memory", "beta")
    mem.replace("memory", "beta", "alpha")
    assert mem.entries("memory") == ("alpha",)


@pytest.mark.parametrize(
    "content",
    [
        "",
        "   ",
        "two entries\n§\nsmuggled",
        "my key is AKIAIOSFODNN7EXAMPLE",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
        "token ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    ],
)
def test_bad_entries_are_refused(mem: MemoryStore, content: str) -> None:
    with pytest.raises(MemoryStoreError) as err:
        mem.add("memory", content)
    assert "AKIAIOSFODNN7EXAMPLE" not in str(err.value)  # the refusal never echoes the secret
    assert mem.entries("memory") == ()


def test_unknown_target_is_refused(mem: MemoryStore) -> None:
    with pytest.raises(MemoryStoreError, match=r"'memory'.*'user'"):
        mem.add("profile", "x")


def test_snapshot_is_frozen_and_later_snapshots_see_writes(mem: MemoryStore) -> None:
    mem.add("memory", "first note")
    mem.add("user", "Name: Ada")
    snap = mem.snapshot()
    assert snap == MemorySnapshot(memory="first note", user="Name: Ada")

    mem.add("memory", "second note")
    mem.replace("user", "Ada", "Name: Ada Lovelace")

    # The object taken before the writes is unchanged and cannot be changed...
    assert snap.memory == "first note" and snap.user == "Name: Ada"
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.memory = "mutated"  # type: ignore[misc]
    # ...while the writes are on disk and a new snapshot shows them.
    fresh = MemoryStore(mem.folder.parent).snapshot()
    assert fresh.memory == "first note" + ENTRY_DELIMITER + "second note"
    assert fresh.user == "Name: Ada Lovelace"


def test_snapshot_of_missing_files_is_empty(mem: MemoryStore) -> None:
    assert mem.snapshot().empty


def test_snapshot_of_an_overlong_hand_edited_file_keeps_whole_entries(mem: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "memories"
    folder.mkdir()
    entries = [f"{i}:" + "z" * 1000 for i in range(3)]
    (folder / "MEMORY.md").write_text(ENTRY_DELIMITER.join(entries))
    assert mem.snapshot().memory == entries[0] + ENTRY_DELIMITER + entries[1]
    # Removing is always allowed, so the model can get the file back under its limit.
    mem.remove("memory", "2:")
    assert mem.entries("memory") == tuple(entries[:2])


def test_writes_are_atomic_and_leave_no_temp_files(mem: MemoryStore, tmp_path: Path) -> None:
    for i in range(10):
        mem.add("memory", f"entry {i}")
    names = sorted(p.name for p in (tmp_path / "memories").iterdir())
    assert names == [".lock", "MEMORY.md"]


def test_non_utf8_file_does_not_crash(mem: MemoryStore, tmp_path: Path) -> None:
    folder = tmp_path / "memories"
    folder.mkdir()
    (folder / "USER.md").write_bytes(b"caf\xe9 lover")
    assert mem.snapshot().user == "caf\ufffd lover"
    mem.add("user", "second")
    assert mem.entries("user") == ("caf\ufffd lover", "second")


async def test_concurrent_turns_lose_no_writes(tmp_path: Path, store: StateStore) -> None:
    # Twenty turns, each with its own fresh tool context, adding at the same moment.
    results = await asyncio.gather(
        *(
            MEMORY_TOOL.handler({"action": "add", "target": "memory", "content": f"fact number {i}"},
                                _ctx(tmp_path, store))
            for i in range(20)
        )
    )
    assert all(json.loads(r)["success"] for r in results)
    assert sorted(MemoryStore(tmp_path).entries("memory")) == sorted(f"fact number {i}" for i in range(20))


def test_concurrent_processes_lose_no_writes(tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path; from core.memory import MemoryStore\n"
        "m = MemoryStore(Path(sys.argv[1]))\n"
        "for i in range(15): m.add('memory', f'{sys.argv[2]}-{i}')\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(tmp_path), tag], cwd=REPO)
        for tag in ("p1", "p2", "p3")
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    entries = MemoryStore(tmp_path).entries("memory")
    assert sorted(entries) == sorted(f"{tag}-{i}" for tag in ("p1", "p2", "p3") for i in range(15))


# ------------------------------------------------------------------ the tool


async def test_tool_add_replace_remove(tmp_path: Path, store: StateStore) -> None:
    ctx = _ctx(tmp_path, store)
    added = json.loads(await MEMORY_TOOL.handler(
        {"action": "add", "target": "user", "content": "Works in UTC+2."}, ctx))
    assert added["success"] and added["changed"] and added["entries"] == ["Works in UTC+2."]
    assert added["usage"] == f"15/{USER_LIMIT:,} chars"
    replaced = json.loads(await MEMORY_TOOL.handler(
        {"action": "replace", "target": "user", "old_text": "UTC+2", "content": "Works in UTC+3."}, ctx))
    assert replaced["entries"] == ["Works in UTC+3."]
    removed = json.loads(await MEMORY_TOOL.handler(
        {"action": "remove", "target": "user", "old_text": "UTC+3"}, ctx))
    assert removed["entries"] == []


async def test_tool_limit_refusal_is_a_tool_error_telling_to_consolidate(tmp_path: Path, store: StateStore) -> None:
    ctx = _ctx(tmp_path, store)
    await MEMORY_TOOL.handler({"action": "add", "target": "memory", "content": "n" * 2100}, ctx)
    with pytest.raises(ToolError, match="Consolidate"):
        await MEMORY_TOOL.handler({"action": "add", "target": "memory", "content": "one more fact " * 10}, ctx)


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"action": "add"},
        {"action": "add", "target": "memory"},
        {"action": "add", "target": "memory", "content": 5},
        {"action": "replace", "target": "memory", "content": "x"},
        {"action": "remove", "target": "user"},
        {"action": "wipe", "target": "memory"},
        {"action": "add", "target": "everything", "content": "x"},
        {"action": "add", "target": "memory", "content": "\ud800"},
    ],
)
async def test_tool_bad_arguments_are_tool_errors(tmp_path: Path, store: StateStore, args: dict[str, object]) -> None:
    with pytest.raises(ToolError):
        await MEMORY_TOOL.handler(args, _ctx(tmp_path, store))
