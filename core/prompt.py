"""The system prompt: built once per session, stored in ``sessions.system_prompt``.

Stored and reused verbatim on later turns, so a model's prompt cache prefix
stays identical across a conversation; rebuilt only after compression. The
memory it shows is a frozen snapshot taken when it is built: the memory tool
writes to disk, the running prompt does not change.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

IDENTITY = (
    "You are Hermes, a personal AI assistant reached through a chat gateway. "
    "Answer helpfully and concisely. The conversation history is persistent: "
    "earlier messages of this session are real and were said by you and the user."
)

MEMORY_GUIDANCE = (
    "You have persistent memory across sessions. Use the memory tool to save durable facts: "
    "the user's preferences, their environment, conventions and lessons learned (target 'user' for who the "
    "user is, 'memory' for your own notes). Keep entries short; consolidate when memory is near its limit. "
    "Do not save transient task details. Use session_search to recall earlier conversations when the user "
    "refers to something from the past."
)

SKILLS_GUIDANCE = (
    "Skills are reusable procedures stored as files. Before a task that a skill covers, load it with "
    "skill_view. After a complex task that is likely to recur, offer to save the procedure as a skill with "
    "skill_manage (ask the user first); when a skill turns out wrong or incomplete, patch it."
)

TOOL_GUIDANCE = (
    "When a tool would help, call it rather than describing what you would do. "
    "If a tool returns an error, read it and correct the call or take another approach."
)


@dataclass(frozen=True)
class SkillEntry:
    name: str
    description: str


@dataclass(frozen=True)
class PromptContext:
    platform: str
    chat_type: str
    shared_session: bool = False
    user_name: str | None = None
    #: frozen snapshots of MEMORY.md and USER.md at build time ("" = empty)
    memory: str = ""
    user_profile: str = ""
    skills: Sequence[SkillEntry] = field(default_factory=tuple)
    #: names of the tools this session may call (guidance is shown only for what exists)
    tool_names: frozenset[str] = frozenset()


def normalize_whitespace(text: str) -> str:
    """Trailing spaces and runs of blank lines removed: the stored prompt is canonical."""
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines))


def _memory_block(title: str, body: str) -> str | None:
    body = body.strip()
    if not body:
        return None
    return f"## {title} (a snapshot from the start of this session)\n{body}"


def _skills_block(skills: Sequence[SkillEntry]) -> str | None:
    if not skills:
        return None
    lines = [f"- {s.name}: {' '.join(s.description.split())}" for s in sorted(skills, key=lambda s: s.name)]
    return "## Available skills (load one with skill_view before using it)\n" + "\n".join(lines)


def build_system_prompt(ctx: PromptContext, *, extra_sections: tuple[str, ...] = ()) -> str:
    parts: list[str] = [IDENTITY]
    where = f"You are talking on {ctx.platform} ({ctx.chat_type})."
    if ctx.shared_session:
        where += " Several people share this conversation; their messages are prefixed with their names."
    parts.append(where)
    tools = ctx.tool_names
    if tools:
        parts.append(TOOL_GUIDANCE)
    if "memory" in tools or "session_search" in tools:
        parts.append(MEMORY_GUIDANCE)
    if tools & {"skills_list", "skill_view", "skill_manage"}:
        parts.append(SKILLS_GUIDANCE)
    for block in (
        _memory_block("Your memory notes", ctx.memory),
        _memory_block("What you know about the user", ctx.user_profile),
        _skills_block(ctx.skills),
    ):
        if block:
            parts.append(block)
    parts.extend(s for s in extra_sections if s.strip())
    return normalize_whitespace("\n\n".join(parts))


# --------------------------------------------------------------- prompt caching


def is_anthropic_model(model: str | None) -> bool:
    """Claude models, directly or through a router (``anthropic/claude-…``)."""
    name = (model or "").lower()
    return "claude" in name or name.startswith("anthropic/")


def apply_prompt_caching(messages: Sequence[Mapping[str, Any]], *, ttl: str | None = None) -> list[dict[str, Any]]:
    """``system_and_3``: cache breakpoints on the system prompt and the last 3 other messages.

    Works on a deep copy: the history (and what is persisted) never carries the markers.
    """
    out: list[dict[str, Any]] = copy.deepcopy([dict(m) for m in messages])
    marker: dict[str, Any] = {"type": "ephemeral"}
    if ttl:
        marker["ttl"] = ttl
    used = 0
    if out and out[0].get("role") == "system":
        _mark(out[0], marker)
        used = 1
    others = [i for i, m in enumerate(out) if m.get("role") != "system"]
    for i in others[-(4 - used):]:
        _mark(out[i], marker)
    return out


def _mark(message: dict[str, Any], marker: dict[str, Any]) -> None:
    content = message.get("content")
    if isinstance(content, str) and content:
        message["content"] = [{"type": "text", "text": content, "cache_control": dict(marker)}]
    elif isinstance(content, list) and content and isinstance(content[-1], dict):
        content[-1]["cache_control"] = dict(marker)
    else:
        message["cache_control"] = dict(marker)
