"""Help screens without type noise.

typer prints a Python type beside every parameter (``--home <path>``,
``--json <bool>``, ``title... <list[str]>``, even ``--help <bool>``). A reader
learns nothing from it: a flag takes no value, and an argument's name (FILE,
ID) or an option's placeholder (``--home DIR``, ``--limit N``, set with
``metavar=``) says what to give. ``PlainHelpGroup``, the root group's class,
gives every command, group and parameter of the tree a subclass that shows the
placeholder and nothing else. The subclasses add no state, so giving an object
one (``__class__``) changes its help and nothing about its parsing.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

__all__ = ["PlainHelpGroup"]


class _PlainArgument(TyperArgument):
    def display_type_rich(self, ctx: Any) -> str | None:
        return None  # the argument's name is its placeholder


class _PlainOption(TyperOption):
    def display_type_rich(self, ctx: Any) -> str | None:
        return self.metavar or None  # a placeholder we chose, never a type


def _plain_help_option(option: Any) -> Any:
    if type(option) is TyperOption:
        option.__class__ = _PlainOption
    return option


class _PlainCommand(TyperCommand):
    def get_help_option(self, ctx: Any) -> Any:
        return _plain_help_option(super().get_help_option(ctx))


class PlainHelpGroup(TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain(self)

    def get_help_option(self, ctx: Any) -> Any:
        return _plain_help_option(super().get_help_option(ctx))


def _plain(command: Any) -> None:
    """This command, its parameters and (for a group) everything below it; typer has built the
    whole tree by the time the root group exists."""
    if type(command) is TyperCommand:
        command.__class__ = _PlainCommand
    elif type(command) is TyperGroup:
        command.__class__ = PlainHelpGroup
    for param in command.params:
        if type(param) is TyperArgument:
            param.__class__ = _PlainArgument
        elif type(param) is TyperOption:
            param.__class__ = _PlainOption
    for sub in getattr(command, "commands", {}).values():
        _plain(sub)
