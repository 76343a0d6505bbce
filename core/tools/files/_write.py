"""``write_file``: a whole file written atomically, its folders created, its mode kept."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import structlog

from ...media import human_size
from .._args import Args
from .._base import ToolContext, ToolError
from ._guard import WriteTarget, confine_write, display_path
from ._io import atomic_write
from ._settings import FilesSettings

log = structlog.get_logger("hermes.tools.files")

__all__ = ["write_file"]


async def write_file(args: Mapping[str, Any], ctx: ToolContext, settings: FilesSettings) -> str:
    a = Args(args)
    path = a.required_text("path", max_chars=4096)
    # max_chars first (cheap), then the bytes: four bytes a character at most
    content = a.text("content", required=True, max_chars=settings.max_write_bytes)
    assert content is not None
    data = content.encode("utf-8")
    if len(data) > settings.max_write_bytes:
        raise ToolError(f"'content' is {human_size(len(data))}; write_file takes at most "
                        f"{human_size(settings.max_write_bytes)}. Write it in parts or generate it with a tool.")
    target = await confine_write(ctx, settings, "write_file", "write", path)
    created, shown = await asyncio.to_thread(_write, target, data, settings)
    log.info("tools.files.written", path=str(target.real), bytes=len(data), created=created,
             session_id=ctx.session_id)
    return json.dumps({"success": True, "path": shown, "bytes_written": len(data), "created": created},
                      ensure_ascii=False)


def _write(target: WriteTarget, data: bytes, settings: FilesSettings) -> tuple[bool, str]:
    return atomic_write(target.real, data, target.existing), display_path(target.real, settings)
