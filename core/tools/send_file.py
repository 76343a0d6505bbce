"""The ``send_file`` tool: a file (or bytes the agent made) goes to the person with the answer.

A path is confined to ``ToolContext.file_roots`` by ``core.tools.paths.resolve_path``
(shared with the file tools): it is resolved with every symlink followed, and the
result must be a regular file inside one of the roots, so ``..``, an absolute path
elsewhere and a symlink that leads out are all refused; ``~`` is not expanded. What the file is called for the person is ``name`` (or the file's
own name); it never becomes a path.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._args import Args
from ._base import Tool, ToolContext, ToolError
from .paths import resolve_path

__all__ = ["SEND_FILE_TOOL", "confine", "file_roots"]

_DESCRIPTION = (
    "Send a file to the user with your answer: a chart, a document, an image, an export. Give 'path' (a "
    "file in your workspace, or a file the user sent, at the path you were told), or 'content' (text you "
    "write now) or 'content_base64' (bytes) with a 'name' such as 'notes.md'. Images are shown as photos "
    "where the platform can. Say in your answer what you sent."
)

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "A file in the workspace (relative to it) or the media store."},
        "content": {"type": "string", "description": "The file's text, when you write the file now."},
        "content_base64": {"type": "string", "description": "The file's bytes in base64."},
        "name": {"type": "string", "description": "The name the user sees (required with content)."},
    },
    "additionalProperties": False,
}

#: the most text or base64 the model may hand over in one call (a larger file: write it, send its path)
_MAX_INLINE_CHARS = 8 * 2**20


def file_roots(home: Path) -> tuple[Path, ...]:
    """The folders files may be sent from: the agent's workspace (first: relative paths are in it)
    and the media store (the files people sent, at the paths the agent was told)."""
    return (home / "workspace", home / "media")


def confine(path: str, roots: tuple[Path, ...]) -> Path:
    """The real path of ``path`` (relative: to the first root) when it is a regular file inside a root."""
    if not roots:
        raise ToolError("No folder is open to send files from here.")
    resolved = resolve_path(path, roots)  # empty, NUL, '~', a symlink loop: its ToolError
    if not resolved.exists:
        raise ToolError(f"There is no file at {path!r}.")
    if not resolved.inside:
        raise ToolError(f"{path!r} is outside the folders files may be sent from "
                        f"({', '.join(str(r) for r in roots)}).")
    try:
        mode = os.stat(resolved.real).st_mode
    except OSError:  # gone since, or unreadable
        raise ToolError(f"There is no file at {path!r}.") from None
    if not stat.S_ISREG(mode):
        raise ToolError(f"{path!r} is not a regular file.")
    return resolved.real


def _name(value: str | None, fallback: str) -> str:
    name = (value or fallback).replace("\\", "/").rsplit("/", 1)[-1].strip()
    name = "".join(c for c in name if c.isprintable())[:120]
    return name or "file"


async def _send_file(args: Mapping[str, Any], ctx: ToolContext) -> str:
    a = Args(args)
    if ctx.files is None:
        raise ToolError("Files cannot be sent from this conversation.")
    given = [k for k in ("path", "content", "content_base64") if a.has(k)]
    if len(given) != 1:
        raise ToolError("Give exactly one of 'path', 'content' or 'content_base64'.")
    if given == ["path"]:
        real = await asyncio.to_thread(confine, a.required_text("path", max_chars=4096), ctx.file_roots)
        line = await ctx.files.add_path(real, _name(a.text("name", max_chars=255), real.name))
    else:
        name = a.text("name", max_chars=255)
        if not name:
            raise ToolError("'name' is required with content (e.g. 'notes.md').")
        if given == ["content"]:
            data = a.required_text("content", max_chars=_MAX_INLINE_CHARS).encode("utf-8")
        else:
            try:
                data = base64.b64decode(a.required_text("content_base64", max_chars=_MAX_INLINE_CHARS),
                                        validate=True)
            except (binascii.Error, ValueError):
                raise ToolError("'content_base64' is not valid base64.") from None
        line = await ctx.files.add_bytes(data, _name(name, "file"))
    return json.dumps({"success": True, "sent_with_answer": line})


SEND_FILE_TOOL = Tool(
    name="send_file",
    description=_DESCRIPTION,
    parameters=_PARAMETERS,
    handler=_send_file,
    toolset="files",
)
