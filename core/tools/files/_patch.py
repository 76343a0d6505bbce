"""``patch``: one exact search/replace in a text file, refused when it would be a guess.

``old_string`` must occur exactly once (or ``replace_all``): no match says where the
nearest similar lines are, several matches say how many and on which lines, so the model
can widen ``old_string`` instead of editing the wrong place. The file is replaced
atomically and the answer is a short unified diff.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import structlog

from ...media import human_size
from .._args import Args
from .._base import ToolContext, ToolError
from ._guard import WriteTarget, approve_write, display_path, plan_write
from ._io import atomic_write, is_binary, open_regular
from ._settings import FilesSettings

log = structlog.get_logger("hermes.tools.files")

__all__ = ["patch_file"]

_MAX_DIFF_LINES = 80
_MAX_DIFF_SOURCE_LINES = 50_000
_MAX_SHOWN_LINES = 10
#: near-miss hints are skipped for files with more lines than this (difflib is quadratic-ish)
_MAX_HINT_LINES = 20_000


async def patch_file(args: Mapping[str, Any], ctx: ToolContext, settings: FilesSettings) -> str:
    a = Args(args)
    path = a.required_text("path", max_chars=4096)
    old = a.required_text("old_string", max_chars=settings.max_patch_bytes)
    new = a.text("new_string", required=True, max_chars=settings.max_patch_bytes)
    assert new is not None
    replace_all = a.boolean("replace_all", default=False)
    if not old:
        raise ToolError("'old_string' is empty; give the exact text to replace (use write_file for a new file).")
    if old == new:
        raise ToolError("'old_string' and 'new_string' are the same; nothing would change.")
    target = await asyncio.to_thread(plan_write, path, settings)
    if target.existing is None:
        raise ToolError(f"There is no file at {path!r}; create it with write_file.")
    # The change is worked out first: a person is asked only about a patch that applies.
    text, after, count = await asyncio.to_thread(_prepare, path, target, old, new, replace_all, settings)
    await approve_write(ctx, target, "patch", "patch")
    shown, diff = await asyncio.to_thread(_commit, path, target, text, after, settings)
    log.info("tools.files.patched", path=str(target.real), replacements=count, session_id=ctx.session_id)
    return json.dumps({"success": True, "path": shown, "replacements": count, "diff": diff}, ensure_ascii=False)


def _load(path: str, target: WriteTarget, settings: FilesSettings) -> str:
    assert target.existing is not None
    if target.existing.st_size > settings.max_patch_bytes:
        raise ToolError(f"{path!r} is {human_size(target.existing.st_size)}; patch edits files up to "
                        f"{human_size(settings.max_patch_bytes)}.")
    with open_regular(target.real, target.existing) as f:
        data = f.read(settings.max_patch_bytes + 1)
    if len(data) > settings.max_patch_bytes or is_binary(data[:8192], target.real.name):
        raise ToolError(f"{path!r} is not a text file patch can edit (binary, or grown past "
                        f"{human_size(settings.max_patch_bytes)}).")
    try:
        # newline="" semantics: \r\n stays \r\n, so an untouched line is written back as it was
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{path!r} is not UTF-8 text; patch edits UTF-8 text files only.") from None


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _occurrences(text: str, old: str) -> list[int]:
    """Start lines of the non-overlapping occurrences (the ones str.replace would replace)."""
    lines: list[int] = []
    at = text.find(old)
    while at != -1:
        lines.append(_line_of(text, at))
        at = text.find(old, at + len(old))
    return lines


def _near_misses(text: str, old: str) -> str:
    lines = text.splitlines()
    wanted = next((ln.strip() for ln in old.splitlines() if ln.strip()), "")
    if not wanted or len(lines) > _MAX_HINT_LINES:
        return ""
    stripped = [ln.strip()[:500] for ln in lines]
    close = difflib.get_close_matches(wanted[:500], stripped, n=3, cutoff=0.6)
    if not close:
        return ""
    shown = [f"{n:>6}\t{lines[n - 1][:200]}" for n in range(1, len(lines) + 1) if stripped[n - 1] in close]
    return "\nThe most similar lines:\n" + "\n".join(shown[:_MAX_SHOWN_LINES])


def _diff(before: str, after: str, name: str) -> str:
    if before.count("\n") > _MAX_DIFF_SOURCE_LINES:
        # difflib is quadratic at worst, in pure Python (holding the GIL): not for huge files
        return f"(no diff for a file of more than {_MAX_DIFF_SOURCE_LINES:,} lines; read_file the changed lines)\n"
    diff = list(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                     fromfile=f"a/{name}", tofile=f"b/{name}", n=2))
    body = "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                   for line in diff[:_MAX_DIFF_LINES])
    if len(diff) > _MAX_DIFF_LINES:
        body += f"… [{len(diff) - _MAX_DIFF_LINES} more diff lines not shown]\n"
    return body


def _prepare(path: str, target: WriteTarget, old: str, new: str, replace_all: bool,
             settings: FilesSettings) -> tuple[str, str, int]:
    """The file's text, its text after the patch, and how many places change; refusals as ToolError."""
    text = _load(path, target, settings)
    found = _occurrences(text, old)
    if not found:
        raise ToolError(f"'old_string' was not found in {path!r} (it must match exactly, spaces and "
                        f"indentation included). Read the file again and copy the text.{_near_misses(text, old)}")
    if len(found) > 1 and not replace_all:
        where = ", ".join(str(n) for n in found[:_MAX_SHOWN_LINES]) + (", …" if len(found) > _MAX_SHOWN_LINES else "")
        raise ToolError(f"'old_string' occurs {len(found)} times in {path!r} (lines {where}); nothing was changed. "
                        "Include more surrounding lines to make it unique, or set replace_all to change every one.")
    after = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    size = len(after.encode("utf-8"))
    if size > settings.max_patch_bytes:
        raise ToolError(f"The patched file would be {human_size(size)}; patch writes files up to "
                        f"{human_size(settings.max_patch_bytes)}.")
    return text, after, len(found)


def _commit(path: str, target: WriteTarget, text: str, after: str, settings: FilesSettings) -> tuple[str, str]:
    """Write the patched text; how the file is shown, and the diff (difflib is CPU work: here, in the thread)."""
    _unchanged_since(target, path)
    atomic_write(target.real, after.encode("utf-8"), target.existing)
    shown = display_path(target.real, settings)
    return shown, _diff(text, after, shown)


def _unchanged_since(target: WriteTarget, path: str) -> None:
    """Refuse when the file changed between the read and the write (another writer, a long approval)."""
    assert target.existing is not None
    try:
        now = os.stat(Path(target.real))
    except OSError:
        now = None
    if now is None or (now.st_ino, now.st_size, now.st_mtime_ns) != (
            target.existing.st_ino, target.existing.st_size, target.existing.st_mtime_ns):
        raise ToolError(f"{path!r} changed while it was being patched; read it again and retry.")
