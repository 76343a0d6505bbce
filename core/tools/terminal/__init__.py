"""The agent's ``terminal`` tool: a shell command in the workspace, contained and capped.

* ``terminal_tool(settings)``: the tool (``_tool``); ``TerminalSettings`` / ``terminal_settings``
  what it runs with (``_settings``).
* ``classify``: the dangerous-command list (``dangerous``, the list in its docstring).
* ``child_env``: the daemon's environment without its secrets, for any child process (``_env``).
* ``kill_all_commands``: the daemon's shutdown hook; no command outlives the daemon (``_process``).
* ``OutputCapture``: head and tail of a stream within a fixed size (``_capture``).
"""

from __future__ import annotations

from ._capture import OutputCapture
from ._env import child_env, looks_secret
from ._process import CommandResult, kill_all_commands, live_command_groups, run_command
from ._settings import OUTPUT_CEILING_BYTES, TerminalSettings, terminal_settings
from ._tool import terminal_tool
from .dangerous import UNPARSABLE, classify

__all__ = [
    "OUTPUT_CEILING_BYTES",
    "UNPARSABLE",
    "CommandResult",
    "OutputCapture",
    "TerminalSettings",
    "child_env",
    "classify",
    "kill_all_commands",
    "live_command_groups",
    "looks_secret",
    "run_command",
    "terminal_settings",
    "terminal_tool",
]
