"""Reading a tool's arguments defensively.

The registry validates arguments against the JSON schema first, but handlers
are also called directly (tests, the background review agent) and the model
can send anything, so each handler reads its arguments through these helpers:
a wrong type, a lone surrogate or an out-of-range number becomes a ToolError
naming the argument, never a TypeError deep inside.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._base import ToolError

_MAX_INT = 2**63 - 1
#: models sometimes send numbers as strings ("5")
_INT_TEXT = re.compile(r"-?[0-9]{1,18}")


class Args:
    """One call's arguments."""

    def __init__(self, args: object) -> None:
        if not isinstance(args, Mapping):
            raise ToolError("Arguments must be a JSON object.")
        self._args: Mapping[Any, Any] = args

    def has(self, key: str) -> bool:
        return self._args.get(key) is not None

    def text(self, key: str, *, required: bool = False, max_chars: int = 200_000) -> str | None:
        value = self._args.get(key)
        if value is None:
            if required:
                raise ToolError(f"'{key}' is required.")
            return None
        if not isinstance(value, str):
            raise ToolError(f"'{key}' must be a string, got {type(value).__name__}.")
        if len(value) > max_chars:
            raise ToolError(f"'{key}' is {len(value):,} characters; the most allowed is {max_chars:,}.")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ToolError(f"'{key}' contains characters that are not valid Unicode text.") from None
        return value

    def required_text(self, key: str, *, max_chars: int = 200_000) -> str:
        value = self.text(key, required=True, max_chars=max_chars)
        assert value is not None
        return value

    def choice(self, key: str, options: Sequence[str], *, required: bool = False) -> str | None:
        value = self.text(key, required=required, max_chars=100)
        if value is not None and value not in options:
            raise ToolError(f"'{key}' must be one of {', '.join(options)}; got {value!r}.")
        return value

    def integer(self, key: str, *, default: int | None = None, minimum: int = 0, maximum: int = _MAX_INT) -> int | None:
        value = self._args.get(key)
        if value is None:
            return default
        if isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
            value = int(value.strip())
        elif isinstance(value, float) and value.is_integer() and abs(value) <= _MAX_INT:
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ToolError(f"'{key}' must be an integer, got {type(value).__name__}.")
        if not minimum <= value <= maximum:
            raise ToolError(f"'{key}' must be between {minimum} and {maximum}; got {value}.")
        return value

    def boolean(self, key: str, *, default: bool) -> bool:
        value = self._args.get(key)
        if value is None:
            return default
        # Models sometimes send booleans as strings.
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        if not isinstance(value, bool):
            raise ToolError(f"'{key}' must be true or false, got {type(value).__name__}.")
        return value
