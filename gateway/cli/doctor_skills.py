"""``hermes-gateway doctor``'s look at the skills as commands: which installed skills are not callable
as ``/<skill-name>`` (a built-in command of that name wins, or no command can carry the name) and
which are left out of a platform's own command menu (a name its rules refuse, past its 100)."""

from __future__ import annotations

from adapters.commands import MENU_FOR_DISCORD, MENU_FOR_TELEGRAM, MenuRules
from gateway.commands import SkillCommands, register_all_commands
from gateway.commands.native import fit_menu
from gateway.config import LoadedConfig
from gateway.routing.commands import CommandRegistry

__all__ = ["skill_command_problems"]

_MENUS: dict[str, MenuRules] = {"telegram": MENU_FOR_TELEGRAM, "discord": MENU_FOR_DISCORD}


def skill_command_problems(config: LoadedConfig, platforms: list[str]) -> tuple[int, list[str]]:
    """(how many skills are commands, a line for each problem); ``platforms``: those enabled."""
    registry = CommandRegistry()
    register_all_commands(registry)
    skills = SkillCommands(config.home, registry, frozenset(n for n, v in config.env.items() if v))
    skills.scan()
    problems = list(skills.warnings)
    entries = [(c.name, c.help) for c in registry.all()] + skills.help_lines()
    for platform in platforms:
        if platform in _MENUS:
            problems += fit_menu(_MENUS[platform], entries, platform)[1]
    return len(skills.all()), problems
