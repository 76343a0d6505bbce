"""The system prompt: built once per session, stored in ``sessions.system_prompt``.

Stored and reused verbatim on later turns, so a model's prompt cache prefix
stays identical across a conversation; rebuilt only after compression.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

IDENTITY = (
    "You are Hermes, a personal AI assistant reached through a chat gateway. "
    "Answer helpfully and concisely. The conversation history is persistent: "
    "earlier messages of this session are real and were said by you and the user."
)


@dataclass(frozen=True)
class PromptContext:
    platform: str
    chat_type: str
    shared_session: bool = False
    user_name: str | None = None


def normalize_whitespace(text: str) -> str:
    """Trailing spaces and runs of blank lines removed: the stored prompt is canonical."""
    lines = [line.rstrip() for line in text.strip().splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines))


def build_system_prompt(ctx: PromptContext, *, extra_sections: tuple[str, ...] = ()) -> str:
    parts = [IDENTITY]
    where = f"You are talking on {ctx.platform} ({ctx.chat_type})."
    if ctx.shared_session:
        where += " Several people share this conversation; their messages are prefixed with their names."
    parts.append(where)
    parts.extend(s for s in extra_sections if s.strip())
    return normalize_whitespace("\n\n".join(parts))
