"""The learning loop: nudge counters that survive the fresh-per-message agent.

Every user turn ticks the memory counter, every tool-calling iteration the
skill counter; using ``memory`` / ``skill_manage`` on its own resets the
matching one. When a counter reaches its interval, a review runs in the
background with its own fresh agent after the reply has gone out. The
counters live in state.db (``state_meta``), one record per chat key, so they
carry across messages, restarts and compression splits.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field

from storage import ops

MEMORY_TOOL = "memory"
SKILL_TOOL = "skill_manage"

MEMORY_REVIEW_PROMPT = (
    "[Background review — the user does not see this.] Look back over the conversation above. "
    "Is there anything durable worth remembering: the user's preferences, facts about them or their "
    "environment, conventions, corrections they made? If so, save it with the memory tool (short entries; "
    "replace or remove outdated ones instead of duplicating). If nothing is worth saving, say 'nothing to save'."
)

SKILL_REVIEW_PROMPT = (
    "[Background review — the user does not see this.] Look back over the conversation above. "
    "Was a non-trivial, reusable procedure worked out (several steps, something that went wrong and was "
    "fixed)? If so, create or patch a skill with skill_manage so it can be reused; check skills_list first "
    "to update an existing skill rather than duplicating it. If nothing is worth saving, say 'nothing to save'."
)

COMBINED_REVIEW_PROMPT = (
    "[Background review — the user does not see this.] Look back over the conversation above and do two "
    "things. 1) Save durable facts about the user or their environment with the memory tool. 2) If a "
    "reusable multi-step procedure was worked out, create or patch a skill with skill_manage (check "
    "skills_list first). If nothing is worth saving, say 'nothing to save'."
)


def review_prompt(memory: bool, skills: bool) -> str:
    if memory and skills:
        return COMBINED_REVIEW_PROMPT
    return MEMORY_REVIEW_PROMPT if memory else SKILL_REVIEW_PROMPT


def meta_key(session_key: str) -> str:
    return f"learning:{session_key}"


@dataclass
class NudgeCounters:
    turns_since_memory: int = 0
    iters_since_skill: int = 0

    @classmethod
    def parse(cls, raw: str | None) -> NudgeCounters:
        if not raw:
            return cls()
        try:
            data = json.loads(raw)
            return cls(int(data.get("turns_since_memory", 0)), int(data.get("iters_since_skill", 0)))
        except (ValueError, TypeError, AttributeError):
            return cls()  # a damaged record only costs one early or late review

    def dumps(self) -> str:
        return json.dumps({"turns_since_memory": self.turns_since_memory, "iters_since_skill": self.iters_since_skill})


@dataclass(frozen=True)
class ReviewDue:
    memory: bool
    skills: bool

    def __bool__(self) -> bool:
        return self.memory or self.skills


def advance(
    counters: NudgeCounters,
    *,
    tool_iterations: int,
    used_tools: set[str],
    memory_interval: int,
    skill_interval: int,
) -> ReviewDue:
    """Count one finished user turn; says which reviews are due (and resets their counters)."""
    counters.turns_since_memory += 1
    counters.iters_since_skill += tool_iterations
    if MEMORY_TOOL in used_tools:
        counters.turns_since_memory = 0
    if SKILL_TOOL in used_tools:
        counters.iters_since_skill = 0
    memory = memory_interval > 0 and counters.turns_since_memory >= memory_interval
    skills = skill_interval > 0 and counters.iters_since_skill >= skill_interval
    if memory:
        counters.turns_since_memory = 0
    if skills:
        counters.iters_since_skill = 0
    return ReviewDue(memory, skills)


@dataclass
class CounterUpdate:
    """Advances one chat's counters inside the transaction that stores the turn's answer.

    The bookkeeping then costs no read and no commit of its own (a turn is two
    commits: the question and the answer), and it can never disagree with the
    transcript: a turn whose answer was not stored was not counted. ``due``
    says which reviews to run once that write has returned.
    """

    session_key: str
    memory_interval: int
    skill_interval: int
    due: ReviewDue = field(default_factory=lambda: ReviewDue(False, False))

    def op(self, tool_iterations: int, used_tools: set[str]) -> Callable[[sqlite3.Connection], None]:
        def run(conn: sqlite3.Connection) -> None:
            key = meta_key(self.session_key)
            counters = NudgeCounters.parse(ops.get_meta(conn, key))
            self.due = advance(counters, tool_iterations=tool_iterations, used_tools=used_tools,
                               memory_interval=self.memory_interval, skill_interval=self.skill_interval)
            ops.set_meta(conn, key, counters.dumps())

        return run
