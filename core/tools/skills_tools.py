"""The skill tools: ``skills_categories``, ``skills_list`` (metadata), ``skill_view`` (one skill or
file), ``skill_manage`` (writes).

Progressive disclosure (memory-architecture.md): the categories cost a line per
category, the list a line per skill, a skill's body is loaded only when the
model asks for it, supporting files one at a time. Every tool sees the skills
as this chat's agent can follow them (``SkillNeeds``: its toolsets, the
environment variables set).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..skills import ALLOWED_SUBDIRS, MAX_SKILL_CHARS, SKILL_FILE, SkillError, SkillNeeds, SkillStore
from ._args import Args
from ._base import Tool, ToolContext, ToolError

_ACTIONS = ("create", "patch", "edit", "delete", "write_file", "remove_file")
_SUBDIRS = ", ".join(f"{d}/" for d in ALLOWED_SUBDIRS)


def _json(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)


def _relative(path: Path, ctx: ToolContext) -> str:
    try:
        return path.relative_to(ctx.home).as_posix()
    except ValueError:
        return path.name


async def _run(func: Any, *args: Any) -> Any:
    """A SkillStore call in a thread (file IO, fsync, folder lock), its refusals as ToolErrors."""
    try:
        return await asyncio.to_thread(func, *args)
    except SkillError as exc:
        raise ToolError(str(exc)) from exc
    except OSError as exc:
        raise ToolError(f"The skill files could not be read or written: {exc.strerror or exc}.") from exc


def _store(ctx: ToolContext) -> SkillStore:
    return SkillStore(ctx.home, SkillNeeds(ctx.toolsets, ctx.env_names))


# ------------------------------------------------------------- skills_categories


async def _skills_categories(args: Mapping[str, Any], ctx: ToolContext) -> str:
    counts: dict[str | None, int] = await _run(_store(ctx).categories)
    return _json(
        {
            "categories": [{"category": c, "skills": n} for c, n in counts.items() if c is not None],
            "uncategorized": counts.get(None, 0),
            "hint": "List one category's skills with skills_list(category=...)." if counts else
            "No skills yet. After a complex task that may recur, offer to save it with skill_manage.",
        }
    )


SKILLS_CATEGORIES_TOOL = Tool(
    name="skills_categories",
    description="The categories of your saved skills (reusable procedures) with how many skills each holds: "
    "the cheapest look at what you know how to do. Then skills_list(category) for names and descriptions, "
    "skill_view(name) for one skill.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    handler=_skills_categories,
    toolset="skills",
)


# ------------------------------------------------------------------ skills_list


async def _skills_list(args: Mapping[str, Any], ctx: ToolContext) -> str:
    category = Args(args).text("category", max_chars=200)
    metas = await _run(_store(ctx).index, category or None)
    return _json(
        {
            "skills": [{"name": m.name, "description": m.description, "category": m.category} for m in metas],
            "count": len(metas),
            "hint": "Load a skill with skill_view(name) before following it." if metas else
            "No skills yet. After a complex task that may recur, offer to save it with skill_manage.",
        }
    )


SKILLS_LIST_TOOL = Tool(
    name="skills_list",
    description="List your saved skills (reusable procedures): name, one-line description and category. "
    "Metadata only; load one with skill_view.",
    parameters={
        "type": "object",
        "properties": {"category": {"type": "string", "description": "Only skills under this category folder."}},
        "additionalProperties": False,
    },
    handler=_skills_list,
    toolset="skills",
)


# ------------------------------------------------------------------- skill_view


async def _skill_view(args: Mapping[str, Any], ctx: ToolContext) -> str:
    a = Args(args)
    name = a.required_text("name", max_chars=200)
    file_path = a.text("file_path", max_chars=1000)
    store = _store(ctx)
    content = await _run(store.view, name, file_path)
    result: dict[str, Any] = {"name": name, "file": file_path or SKILL_FILE, "content": content}
    if file_path in (None, "", SKILL_FILE):
        result["files"] = await _run(store.files, name)
    return _json(result)


SKILL_VIEW_TOOL = Tool(
    name="skill_view",
    description="Load a skill: its full SKILL.md (with the list of its supporting files), or one supporting "
    f"file inside it ({_SUBDIRS}) via file_path.",
    parameters={
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The skill's name, as skills_list shows it."},
            "file_path": {
                "type": "string",
                "description": "Optional: a supporting file relative to the skill folder, e.g. references/api.md.",
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    },
    handler=_skill_view,
    toolset="skills",
    max_result_chars=MAX_SKILL_CHARS + 2_000,
)


# ----------------------------------------------------------------- skill_manage


async def _skill_manage(args: Mapping[str, Any], ctx: ToolContext) -> str:
    a = Args(args)
    action = a.choice("action", _ACTIONS, required=True)
    name = a.required_text("name", max_chars=200)
    store = _store(ctx)
    limit = MAX_SKILL_CHARS + 1  # let the store give the size message
    if action == "create":
        path = await _run(store.create, name, a.required_text("content", max_chars=limit),
                          a.text("category", max_chars=200))
        message = f"Skill {name!r} created."
    elif action == "edit":
        path = await _run(store.edit, name, a.required_text("content", max_chars=limit))
        message = f"SKILL.md of {name!r} rewritten."
    elif action == "patch":
        path = await _run(store.patch, name, a.required_text("old_string", max_chars=limit),
                          a.required_text("new_string", max_chars=limit), a.text("file_path", max_chars=1000),
                          a.boolean("replace_all", default=False))
        message = f"Patched {_relative(path, ctx)}."
    elif action == "delete":
        path = await _run(store.delete, name)
        message = f"Skill {name!r} deleted."
    elif action == "write_file":
        path = await _run(store.write_file, name, a.required_text("file_path", max_chars=1000),
                          a.required_text("file_content", max_chars=limit))
        message = f"Wrote {_relative(path, ctx)}."
    else:
        path = await _run(store.remove_file, name, a.required_text("file_path", max_chars=1000))
        message = f"Removed {_relative(path, ctx)}."
    return _json({"success": True, "action": action, "name": name, "path": _relative(path, ctx),
                  "message": message})


SKILL_MANAGE_TOOL = Tool(
    name="skill_manage",
    description=(
        "Create or change skills (reusable procedures in SKILL.md files). Offer to save a skill after a complex "
        "or iterative task that is likely to recur, and ask the user before creating or deleting one; patch a "
        "skill when it turned out wrong or incomplete. Actions: "
        "'create' (name, content = full SKILL.md starting with YAML frontmatter holding name and description, "
        "optional category folder); "
        "'patch' (old_string = exact text that occurs exactly once unless replace_all, new_string; optional "
        "file_path) - preferred for small fixes; "
        "'edit' (content = the whole new SKILL.md); "
        "'delete' (removes the whole skill); "
        f"'write_file' (file_path under {_SUBDIRS}, file_content); "
        "'remove_file' (file_path). "
        f"Files are limited to {MAX_SKILL_CHARS:,} characters; never put secrets in a skill."
    ),
    parameters={
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": list(_ACTIONS)},
            "name": {"type": "string", "description": "Skill name: lowercase letters, digits, '-', '_', '.'."},
            "content": {"type": "string", "description": "Full SKILL.md text (create, edit)."},
            "category": {"type": "string", "description": "Optional category folder for create, e.g. 'devops'."},
            "old_string": {"type": "string", "description": "patch: exact text to replace; must be unique."},
            "new_string": {"type": "string", "description": "patch: replacement text (may be empty)."},
            "replace_all": {"type": "boolean", "description": "patch: replace every occurrence of old_string."},
            "file_path": {
                "type": "string",
                "description": f"write_file / remove_file / patch: a path under {_SUBDIRS} of the skill.",
            },
            "file_content": {"type": "string", "description": "write_file: the file's text."},
        },
        "required": ["action", "name"],
        "additionalProperties": False,
    },
    handler=_skill_manage,
    toolset="skills",
)

SKILL_TOOLS: list[Tool] = [SKILLS_CATEGORIES_TOOL, SKILLS_LIST_TOOL, SKILL_VIEW_TOOL, SKILL_MANAGE_TOOL]
