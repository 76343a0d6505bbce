"""``read_file``: a text file's lines, numbered like ``cat -n``, a range at a time.

The file is streamed, never loaded: lines before ``offset`` are skipped as they are read,
a line longer than ``max_line_chars`` is shown cut (and its rest skipped without being
kept), the answer stops at ``max_read_bytes`` of text, and at most ``max_scan_bytes`` of
the file are read to get there, so a 2 GB file costs what its range costs. A binary file
is described (type, size), never dumped.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Mapping
from typing import Any

from ...media import SNIFF_BYTES, human_size
from .._args import Args
from .._base import ToolContext
from ._guard import confine_read, display_path
from ._io import binary_note, is_binary, open_regular
from ._settings import FilesSettings

__all__ = ["read_file"]

#: a character is at most four bytes in UTF-8
_BYTES_PER_CHAR = 4
_SKIP_CHUNK = 2**20


async def read_file(args: Mapping[str, Any], ctx: ToolContext, settings: FilesSettings) -> str:
    a = Args(args)
    path = a.required_text("path", max_chars=4096)
    offset = a.integer("offset", default=1, minimum=1)
    limit = a.integer("limit", default=settings.default_read_lines, minimum=1, maximum=1_000_000)
    assert offset is not None and limit is not None
    return await asyncio.to_thread(_read, path, offset, limit, settings)


def _read(path: str, offset: int, limit: int, settings: FilesSettings) -> str:
    real, checked = confine_read(path, settings)
    shown = display_path(real, settings)
    with open_regular(real, checked) as f:
        head = f.read(SNIFF_BYTES)
        if is_binary(head, real.name):
            return binary_note(shown, head, checked.st_size)
        if not head:
            return f"{shown} is empty (0 bytes)."
        f.seek(0)
        return _numbered(f, shown, checked.st_size, offset, limit, settings)


def _skip_rest_of_line(f: io.BufferedReader, budget: int) -> tuple[int, bool]:
    """Read past the rest of a long line: (bytes read, whether its end was reached in ``budget``)."""
    read = 0
    while read <= budget:
        rest = f.readline(_SKIP_CHUNK)
        read += len(rest)
        if not rest or rest.endswith(b"\n"):
            return read, True
    return read, False


def _numbered(f: io.BufferedReader, shown: str, size: int, offset: int, limit: int,
              settings: FilesSettings) -> str:
    max_line_bytes = settings.max_line_chars * _BYTES_PER_CHAR
    out: list[str] = []
    used = scanned = lineno = 0
    stop: str | None = None
    while True:
        piece = f.readline(max_line_bytes)
        if not piece:
            break
        lineno += 1
        scanned += len(piece)
        cut = False
        if not piece.endswith(b"\n") and len(piece) >= max_line_bytes:
            skipped, ended = _skip_rest_of_line(f, settings.max_scan_bytes - scanned)
            scanned += skipped
            cut = True
            if not ended:
                stop = "scan"
        if lineno >= offset:
            text = piece.decode("utf-8", "replace").rstrip("\n").rstrip("\r")
            if len(text) > settings.max_line_chars:
                text, cut = text[:settings.max_line_chars], True
            if cut:
                text += f" … [line cut at {settings.max_line_chars:,} characters]"
            entry = f"{lineno:>6}\t{text}\n"
            if out and used + len(entry) > settings.max_read_bytes:
                stop = "size"
                lineno -= 1
                break
            out.append(entry)
            used += len(entry)
            if lineno >= offset + limit - 1:
                stop = stop or ("limit" if f.peek(1) else None)
                break
        if stop is None and scanned > settings.max_scan_bytes:
            stop = "scan"
        if stop == "scan":
            break
    if not out:
        if stop == "scan":
            return (f"Stopped after reading {human_size(scanned)} of {shown} ({human_size(size)}) at line "
                    f"{lineno:,}, before line {offset:,}: that is the most one call reads through (the lines "
                    "are very long, or the offset far). Use search_files with a regex to find the lines you need.")
        return f"{shown} has {lineno:,} lines; offset {offset:,} is past its end."
    last = offset + len(out) - 1
    if stop == "limit":
        note = f"[lines {offset:,}-{last:,} of {shown}; more follows: read on with offset={last + 1}]"
    elif stop == "size":
        note = (f"[lines {offset:,}-{last:,} of {shown}: {settings.max_read_bytes:,} bytes of text is the most "
                f"one call returns; read on with offset={last + 1}]")
    elif stop == "scan":
        note = (f"[lines {offset:,}-{last:,} of {shown}; stopped after reading {human_size(scanned)} of its "
                f"{human_size(size)}, the most one call reads through (its lines are very long). Use "
                "search_files with a regex to find what you need]")
    else:
        note = f"[end of {shown}: {lineno:,} {'line' if lineno == 1 else 'lines'}]"
    return "".join(out) + note
