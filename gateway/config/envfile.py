"""``$HERMES_HOME/.env``, read by python-dotenv's parser (as docker compose and most tools read it).

``KEY=VALUE`` lines, ``export KEY=VALUE``, ``#`` comments (also after an unquoted or a quoted
value), single quotes (literal), double quotes (with ``\\n``-style escapes; may span lines).
``${VAR}`` is not expanded: a secret may contain a ``$``. A line that is not an assignment is an
error naming the file and the line, never echoing it (it may be a pasted secret).
"""

from __future__ import annotations

import re
from pathlib import Path

from dotenv.parser import parse_stream

from gateway.errors import ConfigError

__all__ = ["read_dotenv"]

# What a shell (and systemd) accepts as a variable name; python-dotenv alone would also take BAD-KEY.
_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def read_dotenv(path: Path) -> dict[str, str]:
    """The file's variables (a later line wins); {} when there is no file."""
    values: dict[str, str] = {}
    if not path.exists():
        return values
    with path.open(encoding="utf-8") as stream:
        for binding in parse_stream(stream):
            if binding.key is None and not binding.error:
                continue  # a blank or comment line
            if binding.error or binding.key is None or binding.value is None or not _NAME_RE.fullmatch(binding.key):
                raise ConfigError(f"{path}:{binding.original.line}: expected KEY=VALUE, got a line that is not")
            values[binding.key] = binding.value
    return values
