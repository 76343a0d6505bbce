"""The slash commands, one module per family; the registry and the context they get live in
``gateway.routing.commands`` (the router dispatches them).

- ``builtin``: /help, /status, /stop
- ``sessions``: /new, /reset, /title, /resume, /sessions
- ``misc``: /queue, /compress, /sethome, /handoff
- ``tools``: /tools
- ``approvals``: /approve, /deny (the answers to a tool's approval question)
- ``cron``: /cron (scheduled jobs); ``cron_tool``: the agent's ``cronjob`` tool's port per turn
- ``reasoning``: /reasoning (the model's reasoning shown before its answers, per session)
"""

from gateway.commands.approvals import register_approval_commands
from gateway.commands.builtin import register_builtin_commands
from gateway.commands.cron import JOBS_OFF, chat_owner, job_json, job_zone, local_time, register_cron_commands
from gateway.commands.cron_tool import TurnCronPorts, TurnJobs
from gateway.commands.misc import register_misc_commands
from gateway.commands.reasoning import register_reasoning_commands
from gateway.commands.sessions import register_session_commands
from gateway.commands.tools import register_tools_commands, render_tools, tools_report
from gateway.routing.commands import CommandRegistry

__all__ = [
    "JOBS_OFF",
    "TurnCronPorts",
    "TurnJobs",
    "chat_owner",
    "job_json",
    "job_zone",
    "local_time",
    "register_all_commands",
    "render_tools",
    "tools_report",
]


def register_all_commands(registry: CommandRegistry) -> None:
    register_builtin_commands(registry)
    register_session_commands(registry)
    register_misc_commands(registry)
    register_tools_commands(registry)
    register_approval_commands(registry)
    register_cron_commands(registry)
    register_reasoning_commands(registry)
