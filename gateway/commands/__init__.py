"""The slash commands, one module per family; the registry and the context they get live in
``gateway.routing.commands`` (the router dispatches them).

- ``builtin``: /help, /status, /stop
- ``conversation``: /retry, /undo, /btw; ``background``: /bg (and /stop <id>)
- ``sessions``: /new, /reset, /title, /resume, /sessions
- ``misc``: /queue, /compress, /sethome, /handoff
- ``tools``: /tools
- ``approvals``: /approve, /deny (the answers to a tool's approval question)
- ``cron``: /cron (scheduled jobs); ``cron_tool``: the agent's ``cronjob`` tool's port per turn
- ``identity``: /whoami, /restart
- ``skills``: the installed skills as ``/<skill-name>`` commands (``SkillCommands``);
  ``native``: the commands registered in the platforms' own menus
- ``models``: /model (and its menu's presses); ``usage``: /usage
- ``userdata``: /export-my-data, /forget-me (a sender's own data)
- ``pair``: /pair (an owner approves a stranger's pairing code), and what ``hermes-gateway pairing`` shows
- ``reasoning``: /reasoning (the model's reasoning shown before its answers, per session)
"""

from gateway.commands.approvals import register_approval_commands
from gateway.commands.background import register_background_commands
from gateway.commands.builtin import register_builtin_commands
from gateway.commands.conversation import register_conversation_commands
from gateway.commands.cron import JOBS_OFF, chat_owner, job_json, job_zone, local_time, register_cron_commands
from gateway.commands.cron_tool import TurnCronPorts, TurnJobs
from gateway.commands.identity import register_identity_commands
from gateway.commands.misc import register_misc_commands
from gateway.commands.models import register_model_commands
from gateway.commands.pair import WELCOME, pairing_json, pairing_lines, register_pair_commands, welcome
from gateway.commands.reasoning import register_reasoning_commands
from gateway.commands.sessions import register_session_commands
from gateway.commands.skills import SkillCommands, command_name, skill_clashes
from gateway.commands.tools import register_tools_commands, render_tools, tools_report
from gateway.commands.usage import describe_usage, register_usage_commands
from gateway.commands.userdata import register_userdata_commands
from gateway.routing.commands import CommandRegistry

__all__ = [
    "JOBS_OFF",
    "WELCOME",
    "SkillCommands",
    "TurnCronPorts",
    "TurnJobs",
    "chat_owner",
    "command_name",
    "describe_usage",
    "job_json",
    "job_zone",
    "local_time",
    "pairing_json",
    "pairing_lines",
    "register_all_commands",
    "render_tools",
    "skill_clashes",
    "tools_report",
    "welcome",
]


def register_all_commands(registry: CommandRegistry) -> None:
    register_builtin_commands(registry)
    register_session_commands(registry)
    register_misc_commands(registry)
    register_tools_commands(registry)
    register_approval_commands(registry)
    register_cron_commands(registry)
    register_identity_commands(registry)
    register_model_commands(registry)
    register_usage_commands(registry)
    register_userdata_commands(registry)
    register_pair_commands(registry)
    register_conversation_commands(registry)
    register_background_commands(registry)
    register_reasoning_commands(registry)
