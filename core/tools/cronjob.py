"""The ``cronjob`` tool: the agent schedules work that runs later and is delivered to a chat.

Core only shapes and checks the call; the jobs themselves live in the gateway, which hands each
turn a ``CronPort`` (``ToolContext.cron``) bound to the turn's chat: the owner of a job made
here, and the only jobs this call may see or change. Without a port (a side loop, a runtime
without a scheduler) the tool says so instead of failing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._args import Args
from ._base import Tool, ToolContext, ToolError

__all__ = ["ACTIONS", "CRONJOB_TOOL"]

ACTIONS = ("create", "list", "update", "pause", "resume", "remove", "run")
#: the actions that name an existing job
_NEEDS_JOB = frozenset({"update", "pause", "resume", "remove", "run"})

_DESCRIPTION = (
    "Schedule work for later: a reminder, a daily summary, a check every hour. Each time a job is due a "
    "fresh agent turn runs its 'prompt' (with no memory of this conversation) and the answer is sent to "
    "'deliver'. Actions: create (needs schedule and prompt; give a short name), list, update (name plus "
    "what changes), pause, resume, remove, run (now, once). A job is named by its name or its id.\n"
    "schedule is one of: a 5-field cron expression in the gateway's time zone ('0 9 * * 1-5' = every "
    "weekday at 9:00, '30 7 * * *' = every day at 7:30, '0 */4 * * *' = every 4 hours); an interval "
    "('every 30m', 'every 2h', 'every 1d'); a single time ('in 20m', 'in 2h', or ISO '2026-12-01T08:00').\n"
    "Write prompt as the instruction to carry out at that time, complete in itself, e.g. for 'remind me "
    "every weekday at 9 to stand up' use prompt 'Remind the user to stand up.' and not the user's words.\n"
    "deliver: 'origin' (this chat, the default), 'home:<platform>' (that platform's home channel), "
    "'<platform>:<chat_id>' or 'none' (run without sending). Tell the user the job's name and when it "
    "runs next, from the result."
)

_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": list(ACTIONS), "description": "What to do."},
        "name": {"type": "string",
                 "description": "The job's name (create: a short name for the new job; others: the job's "
                                "name or id)."},
        "prompt": {"type": "string", "description": "The instruction run at each due time (create, update)."},
        "schedule": {"type": "string",
                     "description": "'0 9 * * 1-5', 'every 30m', 'in 2h' or '2026-12-01T08:00' (create, update)."},
        "deliver": {"type": "string",
                    "description": "'origin' (default), 'home:<platform>', '<platform>:<chat_id>' or 'none'."},
        "toolsets": {"type": "array", "items": {"type": "string"},
                     "description": "The toolsets the job's runs may use (default: this platform's)."},
        "catch_up": {"type": "string", "enum": ["once", "skip"],
                     "description": "create: when due times passed while the gateway was down, run once "
                                    "for them all ('once', the default) or skip to the next ('skip')."},
    },
    "required": ["action"],
    "additionalProperties": False,
}

#: longer than any valid name, schedule or destination; the gateway applies the real limits
#: (``cron.max_prompt_chars`` for the prompt) and says which one was passed
_MAX_FIELD_CHARS = 1_000
_MAX_PROMPT_CHARS = 200_000


def _checked(args: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The action and the arguments that go with it, each of the right type."""
    a = Args(args)
    action = a.choice("action", ACTIONS, required=True)
    assert action is not None
    out: dict[str, Any] = {}
    for key in ("name", "schedule", "deliver"):
        value = a.text(key, max_chars=_MAX_FIELD_CHARS)
        if value is not None and value.strip():
            out[key] = value.strip()
    prompt = a.text("prompt", max_chars=_MAX_PROMPT_CHARS)
    if prompt is not None and prompt.strip():
        out["prompt"] = prompt.strip()
    toolsets = args.get("toolsets")
    catch_up = a.choice("catch_up", ("once", "skip"))
    if catch_up is not None:
        out["catch_up"] = catch_up
    if toolsets is not None:
        if not isinstance(toolsets, list) or not all(isinstance(t, str) and t.strip() for t in toolsets):
            raise ToolError("'toolsets' must be a list of toolset names, e.g. [\"web\"].")
        out["toolsets"] = [t.strip() for t in toolsets]
    if action == "create":
        missing = [k for k in ("schedule", "prompt") if k not in out]
        if missing:
            raise ToolError(f"create needs {' and '.join(repr(m) for m in missing)}: when to run, and the "
                            "instruction to carry out then.")
    elif action in _NEEDS_JOB and "name" not in out:
        raise ToolError(f"{action} needs 'name': the job's name or id (action 'list' shows them).")
    if action == "update" and not out.keys() & {"prompt", "schedule", "deliver", "toolsets"}:
        raise ToolError("update needs what changes: 'prompt', 'schedule', 'deliver' or 'toolsets'.")
    return action, out


async def _cronjob(args: Mapping[str, Any], ctx: ToolContext) -> str:
    action, checked = _checked(args)
    if ctx.cron is None:
        raise ToolError("Scheduled jobs are not available in this conversation. Tell the user that nothing "
                        "was scheduled.")
    return await ctx.cron.call(action, checked)


CRONJOB_TOOL = Tool(
    name="cronjob",
    description=_DESCRIPTION,
    parameters=_PARAMETERS,
    handler=_cronjob,
    toolset="cron",
)
