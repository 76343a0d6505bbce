"""``search_files``: files by glob, lines by regular expression, inside the allowed folders.

The walk never follows symlinks and never opens anything but regular files (a FIFO would
block the thread), skips VCS folders, binary files and files over a size cap, and stops at
caps on entries, files and matching lines, saying which cap cut it. The expression runs in
the third-party ``regex`` module because the standard ``re`` cannot be stopped: ``(a+)+$``
on a long line would hold the thread (and the GIL with it) for hours. ``regex`` releases the
GIL while matching (``concurrent=True``) and gives up at the search's deadline (``timeout``).
"""

from __future__ import annotations

import asyncio
import os
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import regex  # type: ignore[import-untyped]

from ...media import SNIFF_BYTES, human_size
from .._args import Args
from .._base import ToolContext, ToolError
from ..paths import in_system_folder
from ._glob import Glob
from ._guard import Protection, confine_read, display_path
from ._io import is_binary, open_regular
from ._settings import FilesSettings

__all__ = ["search_files"]

_SKIP_FOLDERS = frozenset({".git", ".hg", ".svn"})
#: characters of a matching line shown in the answer
_SHOWN_CHARS = 200


@dataclass
class _Found:
    files: list[str] = field(default_factory=list)
    matches: list[str] = field(default_factory=list)
    cut: str | None = None
    entries: int = 0
    skipped_binary: int = 0
    skipped_large: int = 0
    unreadable: int = 0


async def search_files(args: Mapping[str, Any], ctx: ToolContext, settings: FilesSettings) -> str:
    a = Args(args)
    pattern = a.text("pattern", max_chars=1000)
    expression = a.text("regex", max_chars=2000)
    path = a.text("path", max_chars=4096) or "."
    ignore_case = a.boolean("ignore_case", default=False)
    if not pattern and not expression:
        raise ToolError("Give 'pattern' (a glob such as '**/*.py'), 'regex' (text to find in files), or both.")
    glob = Glob.compile(pattern) if pattern else None
    compiled = None
    if expression:
        try:
            compiled = regex.compile(expression, regex.IGNORECASE if ignore_case else 0)
        except (regex.error, OverflowError, RecursionError) as exc:
            raise ToolError(f"'regex' {expression!r} is not a valid regular expression: {exc}.") from None
    return await asyncio.to_thread(_search, path, glob, compiled, settings)


def _search(path: str, glob: Glob | None, compiled: Any, settings: FilesSettings) -> str:
    start, checked = confine_read(path, settings, folder=True)
    deadline = time.monotonic() + settings.search_timeout
    found = _Found()
    if stat.S_ISREG(checked.st_mode):
        _consider(start, start.name, glob, compiled, found, deadline, settings)
    else:
        _walk(start, glob, compiled, found, deadline, settings)
    return _report(path, glob, compiled, found, settings)


def _walk(start: Path, glob: Glob | None, compiled: Any, found: _Found, deadline: float,
          settings: FilesSettings) -> None:
    # os.walk with followlinks=False lists a symlinked folder but never enters it
    protection = Protection.of(settings)
    for folder, subfolders, names in os.walk(start, followlinks=False):
        base = Path(folder)
        # A root that holds ~/.ssh or $HERMES_HOME does not open them to a search (keys, .env),
        # nor does a root of "/" walk /proc, /sys and /dev.
        subfolders[:] = sorted(d for d in subfolders if d not in _SKIP_FOLDERS and protection.may_enter(base / d)
                               and not in_system_folder(base / d))
        secret_here = protection.folder_of(base) is not None
        for name in ("", *sorted(names)):  # "": the folder itself counts as an entry too
            found.entries += 1
            if found.entries > settings.max_search_entries:
                found.cut = "entries"
            elif time.monotonic() > deadline:
                found.cut = "time"
            if found.cut:
                return
            if not name:
                continue
            full = base / name
            if secret_here and protection.folder_of(full) is not None:
                continue
            _consider(full, full.relative_to(start).as_posix(), glob, compiled, found, deadline, settings)
            if found.cut:
                return


def _consider(full: Path, relative: str, glob: Glob | None, compiled: Any, found: _Found, deadline: float,
              settings: FilesSettings) -> None:
    if glob is not None and not glob.match(relative):
        return
    try:
        st = os.lstat(full)
    except OSError:
        found.unreadable += 1
        return
    if not stat.S_ISREG(st.st_mode):  # symlinks, FIFOs, sockets, devices: never opened
        return
    shown = display_path(full, settings)
    if compiled is None:
        if len(found.files) >= settings.max_search_files:
            found.cut = "files"  # one more than the cap exists: only now is it cut
        else:
            found.files.append(shown)
        return
    if st.st_size > settings.max_search_file_bytes:
        found.skipped_large += 1
        return
    try:
        _grep(full, st, shown, compiled, found, deadline, settings)
    except (OSError, ToolError):
        found.unreadable += 1


def _grep(full: Path, st: os.stat_result, shown: str, compiled: Any, found: _Found, deadline: float,
          settings: FilesSettings) -> None:
    # Lines longer than max_line_chars are matched in pieces of that length (a match across
    # two pieces is missed; the cost of one line stays bounded).
    piece_bytes = settings.max_line_chars * 4
    with open_regular(full, st) as f:
        if is_binary(f.read(SNIFF_BYTES), full.name):
            found.skipped_binary += 1
            return
        f.seek(0)
        lineno, at_line_start = 0, True
        while piece := f.readline(piece_bytes):
            if at_line_start:
                lineno += 1
            at_line_start = piece.endswith(b"\n")
            text = piece.decode("utf-8", "replace").rstrip("\n").rstrip("\r")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                found.cut = "time"
                return
            try:
                hit = compiled.search(text, concurrent=True, timeout=remaining)
            except TimeoutError:
                found.cut = "time"
                return
            if hit is None:
                continue
            if len(found.matches) >= settings.max_search_matches:
                found.cut = "matches"  # one more than the cap exists: only now is it cut
                return
            shown_text = text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + " …"
            found.matches.append(f"{shown}:{lineno}: {shown_text}")
            if shown not in found.files:
                found.files.append(shown)


def _report(path: str, glob: Glob | None, compiled: Any, found: _Found, settings: FilesSettings) -> str:
    what = " and ".join(part for part in (
        f"files matching {glob.pattern!r}" if glob else "",
        f"lines matching /{compiled.pattern}/" if compiled is not None else "") if part)
    if compiled is None:
        body = found.files
        head = f"{len(found.files)} {'file' if len(found.files) == 1 else 'files'}: {what} under {path!r}."
    else:
        body = found.matches
        head = (f"{len(found.matches)} matching {'line' if len(found.matches) == 1 else 'lines'} in "
                f"{len(found.files)} {'file' if len(found.files) == 1 else 'files'}: {what} under {path!r}.")
    notes: list[str] = []
    if found.cut == "files":
        notes.append(f"Stopped at {settings.max_search_files} files; narrow 'pattern' or 'path' to see the rest.")
    elif found.cut == "matches":
        notes.append(f"Stopped at {settings.max_search_matches} matching lines; narrow 'regex', 'pattern' or "
                     "'path' to see the rest.")
    elif found.cut == "entries":
        notes.append(f"Stopped after looking at {settings.max_search_entries:,} entries; search a smaller 'path'.")
    elif found.cut == "time":
        notes.append(f"Stopped after {settings.search_timeout:g} s: the search took too long (a regex that "
                     "backtracks heavily, such as nested repeats like (a+)+, or too many files). Results so far "
                     "are above; simplify the regex or search a smaller 'path'.")
    if found.skipped_binary:
        notes.append(f"Skipped {found.skipped_binary} binary {'file' if found.skipped_binary == 1 else 'files'}.")
    if found.skipped_large:
        notes.append(f"Skipped {found.skipped_large} {'file' if found.skipped_large == 1 else 'files'} over "
                     f"{human_size(settings.max_search_file_bytes)}; read_file reads them a range at a time.")
    if found.unreadable:
        notes.append(f"{found.unreadable} {'file' if found.unreadable == 1 else 'files'} could not be read.")
    if not body and not found.cut:
        notes.append("Nothing matched. .git folders and symlinks are not searched.")
    return "\n".join([head, *body, *notes])
