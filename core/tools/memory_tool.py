"""The ``memory`` tool: add, replace or remove entries of MEMORY.md / USER.md.

Writes reach disk at once but not the running system prompt (frozen snapshot),
so the result says so: the model should not expect to "see" the entry in its
prompt before the next session.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from ..memory import MEMORY_LIMIT, TARGETS, USER_LIMIT, MemoryStore, MemoryStoreError, MemoryUpdate
from ._args import Args
from ._base import Tool, ToolContext, ToolError

_DESCRIPTION = (
    "Save durable facts to your persistent memory, which is shown to you at the start of every future "
    "session. target 'user' = the user's profile (preferences, habits, how they like to work; "
    f"{USER_LIMIT:,} chars), target 'memory' = your own notes (environment facts, project conventions, "
    f"lessons learned, quirks; {MEMORY_LIMIT:,} chars). Save when the user shares a preference or corrects "
    "you, when you learn something about the environment, or after finishing a complex task. Do not save "
    "one-off task details or secrets. Actions: 'add' (content), 'replace' (old_text = a distinctive part of "
    "one existing entry, content = its new text), 'remove' (old_text). When a file is near its limit, "
    "consolidate: merge related entries with 'replace' and drop stale ones with 'remove'. Writes are saved "
    "immediately but appear in your system prompt only from the next session."
)

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["add", "replace", "remove"], "description": "What to do."},
        "target": {
            "type": "string",
            "enum": list(TARGETS),
            "description": "'memory' for your notes, 'user' for the user's profile.",
        },
        "content": {"type": "string", "description": "The entry's text (add, replace). One fact per entry."},
        "old_text": {
            "type": "string",
            "description": "A distinctive part of the existing entry to replace or remove; must match one entry.",
        },
    },
    "required": ["action", "target"],
    "additionalProperties": False,
}


def _result(update: MemoryUpdate, action: str) -> str:
    return json.dumps(
        {
            "success": True,
            "action": action,
            "target": update.target,
            "changed": update.changed,
            "message": update.message,
            "usage": update.usage,
            "entries": list(update.entries),
        },
        ensure_ascii=False,
    )


async def _memory(args: Mapping[str, Any], ctx: ToolContext) -> str:
    a = Args(args)
    action = a.choice("action", ("add", "replace", "remove"), required=True)
    target = a.choice("target", TARGETS, required=True)
    assert action is not None and target is not None
    store = MemoryStore(ctx.home)
    try:
        if action == "add":
            update = await asyncio.to_thread(store.add, target, a.required_text("content"))
        elif action == "replace":
            old_text, content = a.required_text("old_text"), a.required_text("content")
            update = await asyncio.to_thread(store.replace, target, old_text, content)
        else:
            update = await asyncio.to_thread(store.remove, target, a.required_text("old_text"))
    except MemoryStoreError as exc:
        raise ToolError(str(exc)) from exc
    except OSError as exc:
        raise ToolError(f"Could not write the memory file: {exc.strerror or exc}. Try again later.") from exc
    return _result(update, action)


MEMORY_TOOL = Tool(
    name="memory",
    description=_DESCRIPTION,
    parameters=_PARAMETERS,
    handler=_memory,
    toolset="memory",
)
