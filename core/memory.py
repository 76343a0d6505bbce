"""Curated persistent memory: ``$HERMES_HOME/memories/MEMORY.md`` and ``USER.md``.

Two small files of entries, separated by a line holding only ``§``. MEMORY.md
holds the agent's notes (environment, conventions, lessons), USER.md the
user's profile. Both are bounded in characters because they are frozen into
every system prompt: a write that would pass the limit is refused with a
message telling the model to consolidate, never silently trimmed.

Frozen snapshot: ``snapshot()`` reads the files once and returns an immutable
value for the prompt builder. Later writes persist to disk at once but never
change a snapshot already taken, so a running session's prompt (and its
prefix cache) stays stable; the next session's snapshot shows them.

The methods are synchronous and take a folder lock (thread + ``flock``), so
concurrent turns and other processes cannot lose each other's writes; async
callers run them in a thread (``asyncio.to_thread``) because of the fsyncs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import structlog

from storage.errors import GatewayError

from ._files import atomic_write_text, folder_lock, read_text
from ._scan import find_credential

log = structlog.get_logger(__name__)

MemoryTarget = Literal["memory", "user"]
TARGETS: tuple[str, ...] = get_args(MemoryTarget)

MEMORY_LIMIT = 2200
USER_LIMIT = 1375
ENTRY_DELIMITER = "\n§\n"
_FILES = {"memory": "MEMORY.md", "user": "USER.md"}
#: above this share of the limit the model is told to start consolidating
_CONSOLIDATE_AT = 0.8


class MemoryStoreError(GatewayError):
    """A memory write was refused; the message says what to do instead."""


class MemoryLimitError(MemoryStoreError):
    """The write would push a memory file past its character limit."""


@dataclass(frozen=True)
class MemorySnapshot:
    """Both memory files as they were when the snapshot was taken (entries joined by the delimiter)."""

    memory: str
    user: str

    @property
    def empty(self) -> bool:
        return not self.memory and not self.user


@dataclass(frozen=True)
class MemoryUpdate:
    """The outcome of one write, for the tool result."""

    target: str
    changed: bool
    message: str
    entries: tuple[str, ...]
    chars: int
    limit: int

    @property
    def usage(self) -> str:
        return f"{self.chars:,}/{self.limit:,} chars"


def _parse(text: str) -> list[str]:
    """Entries of a file, stripped, empty ones dropped, duplicates removed (first one wins)."""
    text = text.replace("\r\n", "\n")
    seen: set[str] = set()
    entries: list[str] = []
    for raw in ("\n" + text + "\n").split(ENTRY_DELIMITER):
        entry = raw.strip()
        if entry and entry not in seen:
            seen.add(entry)
            entries.append(entry)
    return entries


def _render(entries: list[str]) -> str:
    return ENTRY_DELIMITER.join(entries)


def _numbered(entries: list[str]) -> str:
    return "\n".join(f"{i}. {e}" for i, e in enumerate(entries, 1)) or "(none)"


class MemoryStore:
    """The two memory files of one ``$HERMES_HOME``."""

    def __init__(self, home: Path, *, memory_limit: int = MEMORY_LIMIT, user_limit: int = USER_LIMIT) -> None:
        self.folder = Path(home) / "memories"
        self._limits = {"memory": memory_limit, "user": user_limit}

    # ------------------------------------------------------------------ read

    def path(self, target: str) -> Path:
        return self.folder / _FILES[self._target(target)]

    def limit(self, target: str) -> int:
        return self._limits[self._target(target)]

    def entries(self, target: str) -> tuple[str, ...]:
        return tuple(_parse(read_text(self.path(target))))

    def snapshot(self) -> MemorySnapshot:
        """Both files, deduplicated, frozen; a hand-edited file past its limit is cut at whole entries."""
        return MemorySnapshot(memory=self._bounded("memory"), user=self._bounded("user"))

    def _bounded(self, target: str) -> str:
        entries = list(self.entries(target))
        limit = self.limit(target)
        kept: list[str] = []
        for entry in entries:
            if len(_render([*kept, entry])) > limit:
                break
            kept.append(entry)
        if len(kept) < len(entries):
            log.warning("memory.over_limit", target=target, entries=len(entries), kept=len(kept), limit=limit)
        return _render(kept)

    # ----------------------------------------------------------------- write

    def add(self, target: str, content: str) -> MemoryUpdate:
        target = self._target(target)
        entry = self._clean(content, "content")
        with folder_lock(self.folder):
            entries = list(self.entries(target))
            if entry in entries:
                return self._result(target, entries, False, "This entry is already saved; nothing changed.")
            self._write(target, [*entries, entry], entries, f"adding this entry ({len(entry):,} chars)")
            return self._result(target, [*entries, entry], True, "Entry added.")

    def replace(self, target: str, old_text: str, content: str) -> MemoryUpdate:
        target = self._target(target)
        needle = self._needle(old_text)
        entry = self._clean(content, "content")
        with folder_lock(self.folder):
            entries = list(self.entries(target))
            index = self._find(target, entries, needle)
            updated = _parse(_render([*entries[:index], entry, *entries[index + 1 :]]))
            if updated == entries:
                return self._result(target, entries, False, "The entry already reads like that; nothing changed.")
            self._write(target, updated, entries, f"this replacement ({len(entry):,} chars)")
            return self._result(target, updated, True, "Entry replaced.")

    def remove(self, target: str, old_text: str) -> MemoryUpdate:
        target = self._target(target)
        needle = self._needle(old_text)
        with folder_lock(self.folder):
            entries = list(self.entries(target))
            index = self._find(target, entries, needle)
            updated = entries[:index] + entries[index + 1 :]
            # Removing always shrinks, so it is allowed even on a file that is over its limit.
            atomic_write_text(self.path(target), _render(updated))
            log.info("memory.written", target=target, action="remove", entries=len(updated))
            return self._result(target, updated, True, "Entry removed.")

    def clear(self, target: str) -> int:
        """Remove every entry of ``target`` (a person's data erased at their request); how many."""
        target = self._target(target)
        with folder_lock(self.folder):
            entries = list(self.entries(target))
            if entries:
                atomic_write_text(self.path(target), _render([]))
                log.info("memory.written", target=target, action="clear", entries=0)
            return len(entries)

    # --------------------------------------------------------------- helpers

    @staticmethod
    def _target(target: object) -> str:
        if target not in TARGETS:
            raise MemoryStoreError(f"Unknown memory target {target!r}: use 'memory' (your notes) or 'user' "
                                   "(the user's profile).")
        return str(target)

    @staticmethod
    def _needle(old_text: object) -> str:
        if not isinstance(old_text, str) or not old_text.strip():
            raise MemoryStoreError("old_text is required: quote a distinctive part of the entry to change.")
        return old_text.strip()

    @staticmethod
    def _clean(content: object, field: str) -> str:
        if not isinstance(content, str) or not content.strip():
            raise MemoryStoreError(f"{field} is required and must be non-empty text.")
        entry = content.replace("\r\n", "\n").strip()
        if any(line.strip() == "§" for line in entry.split("\n")):
            raise MemoryStoreError("An entry may not contain a line holding only '§' (it separates entries).")
        found = find_credential(entry)
        if found is not None:
            raise MemoryStoreError(
                f"Refused: the entry looks like it contains {found}. Never store secrets in memory; "
                "note where the secret lives (e.g. an environment variable name) instead."
            )
        return entry

    def _find(self, target: str, entries: list[str], needle: str) -> int:
        hits = [i for i, e in enumerate(entries) if needle in e]
        name = _FILES[target]
        if not hits:
            raise MemoryStoreError(
                f"No entry in {name} contains {needle!r}. Current entries:\n{_numbered(entries)}"
            )
        if len(hits) > 1:
            raise MemoryStoreError(
                f"{len(hits)} entries in {name} contain {needle!r}; quote more of the one you mean so it "
                f"matches exactly one. Matching entries:\n{_numbered([entries[i] for i in hits])}"
            )
        return hits[0]

    def _write(self, target: str, updated: list[str], current: list[str], what: str) -> None:
        limit = self.limit(target)
        new_chars, old_chars = len(_render(updated)), len(_render(current))
        if new_chars > limit:
            raise MemoryLimitError(
                f"{_FILES[target]} is at {old_chars:,}/{limit:,} chars; {what} would make it {new_chars:,}, "
                f"past the limit. Consolidate first: use action 'replace' to merge related entries into "
                f"shorter ones, or 'remove' for entries that are stale, then retry. Current entries:\n"
                f"{_numbered(current)}"
            )
        atomic_write_text(self.path(target), _render(updated))
        log.info("memory.written", target=target, entries=len(updated), chars=new_chars, limit=limit)

    def _result(self, target: str, entries: list[str], changed: bool, message: str) -> MemoryUpdate:
        chars, limit = len(_render(entries)), self.limit(target)
        if chars > _CONSOLIDATE_AT * limit:
            message += f" {_FILES[target]} is over {int(_CONSOLIDATE_AT * 100)}% full: consolidate entries soon."
        return MemoryUpdate(target, changed, message, tuple(entries), chars, limit)
