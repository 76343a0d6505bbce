"""The four file tools as the model sees them, each closed over one ``FilesSettings``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .._base import Tool, ToolContext, ToolHandler
from ._patch import patch_file
from ._read import read_file
from ._search import search_files
from ._settings import FilesSettings
from ._write import write_file

__all__ = ["FILES_TOOLSET", "WRITES_TAG", "file_tools"]

FILES_TOOLSET = "files"
#: the tools that change files carry it (the gateway switches them off in groups by it)
WRITES_TAG = "writes"

_Impl = Callable[[Mapping[str, Any], ToolContext, FilesSettings], Awaitable[str]]

_PATH = {"type": "string", "description": "A file path, relative to the workspace (or absolute)."}


def _bind(impl: _Impl, settings: FilesSettings) -> ToolHandler:
    async def handler(args: Mapping[str, Any], ctx: ToolContext) -> str:
        return await impl(args, ctx, settings)

    return handler


def file_tools(settings: FilesSettings) -> list[Tool]:
    """read_file, write_file, patch and search_files, confined to ``settings.roots``."""
    where = (f"Paths are relative to the workspace ({settings.roots[0]}); the allowed folders are "
             f"{', '.join(str(r) for r in settings.roots)}. '~' is not expanded.")
    return [
        Tool(
            name="read_file",
            description=(
                "Read a text file: its lines numbered like `cat -n`. For a long file give 'offset' (first line, "
                "1-based) and 'limit' (how many lines); the answer says how to read on. Binary files are "
                f"described (type, size), not shown. {where}"),
            parameters={
                "type": "object",
                "properties": {
                    "path": _PATH,
                    "offset": {"type": "integer", "minimum": 1, "description": "First line to read (1-based)."},
                    "limit": {"type": "integer", "minimum": 1,
                              "description": f"How many lines (default {settings.default_read_lines})."},
                },
                "required": ["path"],
                "additionalProperties": False,
            },
            handler=_bind(read_file, settings),
            toolset=FILES_TOOLSET,
            max_result_chars=settings.max_read_bytes + 2_000,
        ),
        Tool(
            name="write_file",
            description=(
                "Write a whole file (created, or replaced entirely), creating its folders. For a small change "
                "to an existing file use patch instead. Writing outside the allowed folders asks the user "
                f"first. {where}"),
            parameters={
                "type": "object",
                "properties": {"path": _PATH, "content": {"type": "string", "description": "The file's text."}},
                "required": ["path", "content"],
                "additionalProperties": False,
            },
            handler=_bind(write_file, settings),
            toolset=FILES_TOOLSET,
            tags=(WRITES_TAG,),
        ),
        Tool(
            name="patch",
            description=(
                "Change a text file by exact search and replace: 'old_string' must match the file exactly "
                "(whitespace included) and only once, unless 'replace_all'. Include enough surrounding lines "
                "to make it unique. The answer shows the diff. Read the file first. " + where),
            parameters={
                "type": "object",
                "properties": {
                    "path": _PATH,
                    "old_string": {"type": "string", "description": "The exact text to replace."},
                    "new_string": {"type": "string", "description": "The text to put there (may be empty)."},
                    "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
                },
                "required": ["path", "old_string", "new_string"],
                "additionalProperties": False,
            },
            handler=_bind(patch_file, settings),
            toolset=FILES_TOOLSET,
            tags=(WRITES_TAG,),
        ),
        Tool(
            name="search_files",
            description=(
                "Find files by glob ('pattern', e.g. '**/*.py'; without '/' it matches names anywhere) and/or "
                "lines by regular expression ('regex'), under 'path' (a folder, default the workspace). "
                "Results are capped; .git folders, binary files, large files and symlinks are skipped. "
                + where),
            parameters={
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "A glob of file paths, e.g. '**/*.md'."},
                    "regex": {"type": "string", "description": "A regular expression to find in lines."},
                    "path": {"type": "string", "description": "The folder (or file) to search; default '.'."},
                    "ignore_case": {"type": "boolean", "description": "Match the regex regardless of case."},
                },
                "additionalProperties": False,
            },
            handler=_bind(search_files, settings),
            toolset=FILES_TOOLSET,
            max_result_chars=60_000,
        ),
    ]
