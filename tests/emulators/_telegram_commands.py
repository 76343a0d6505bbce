"""The bot's command menu on ``FakeTelegram`` beyond the name and description checks of its own
``setMyCommands``: the Bot API's limit of 100 commands per scope and language, and a record of
every call.

* ``setMyCommands`` with more than ``MAX_COMMANDS`` commands is 400 ``Bad Request:
  BOT_COMMANDS_TOO_MUCH`` (nothing is set); the fake's own handler then checks each command (1-32
  characters of ``a-z0-9_``, a description of 1-256 characters: else ``BOT_COMMAND_INVALID``).
* :attr:`CommandMenu.calls`: every ``setMyCommands`` call, accepted or not, as ``{params, ok,
  error}`` (``fake.my_commands`` keeps what is set per scope, as before).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .fake_telegram import FakeTelegram

__all__ = ["BOT_COMMANDS_TOO_MUCH", "MAX_COMMANDS", "CommandMenu"]

MAX_COMMANDS = 100
BOT_COMMANDS_TOO_MUCH = "Bad Request: BOT_COMMANDS_TOO_MUCH"


class CommandMenu:
    def __init__(self, fake: FakeTelegram) -> None:
        self._fake = fake
        self.calls: list[dict[str, Any]] = []

    def install(self) -> None:
        from .fake_telegram import BotApiError

        _, inner = self._fake._handlers["setmycommands"]

        def checked(p: dict[str, Any]) -> Any:
            commands = p.get("commands")
            try:
                if isinstance(commands, list) and len(commands) > MAX_COMMANDS:
                    raise BotApiError(400, BOT_COMMANDS_TOO_MUCH)
                result = inner(p)
            except BotApiError as exc:
                self.calls.append({"params": p, "ok": False, "error": str(exc)})
                raise
            self.calls.append({"params": p, "ok": True, "error": None})
            return result

        self._fake.register_method("setMyCommands", checked)

    def default(self) -> list[dict[str, Any]]:
        """The commands set for the default scope and no language."""
        return list(self._fake.my_commands.get(("default", ""), []))
