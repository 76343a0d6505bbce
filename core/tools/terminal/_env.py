"""The environment a command (or any child the gateway starts) gets: the daemon's, without secrets.

The daemon's environment holds what it was started with, and config loading may have
added the bot tokens and API keys of ``.env``; a command the model writes can print all
of it (``env``), so a child starts from the daemon's environment minus:

* every name in ``secret_names`` (the names of ``$HERMES_HOME/.env`` and other known secrets);
* every name that looks like a secret: containing TOKEN, SECRET, PASSWORD, PASSWD, CREDENTIAL,
  PRIVATE or COOKIE, or ending in KEY, KEYS, APIKEY, _PAT, _AUTH or _PASS;
* the gateway's own ``HERMES_*`` settings, except ``HERMES_HOME`` (which the terminal tool sets to
  the home its commands are checked against);

unless the name is in ``pass_env`` (config ``tools.terminal.pass_env``): that is how a
person hands a command a token on purpose. ``PATH``, ``HOME``, ``LANG`` and the rest stay.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

__all__ = ["child_env", "looks_secret"]

_SECRET_WORDS = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|PRIVATE|COOKIE")
_SECRET_ENDINGS = re.compile(r"(?:KEY|KEYS|APIKEY|_PAT|_AUTH|_PASS)$")
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def looks_secret(name: str) -> bool:
    upper = name.upper()
    if upper.startswith("HERMES_") and upper != "HERMES_HOME":
        return True
    return bool(_SECRET_WORDS.search(upper) or _SECRET_ENDINGS.search(upper))


def child_env(environ: Mapping[str, str], secret_names: Iterable[str], pass_env: Iterable[str], *,
              cwd: Path | None = None) -> dict[str, str]:
    """``environ`` without its secrets (see the module docstring); ``PWD`` set to ``cwd`` when given."""
    secrets = frozenset(secret_names)
    passed = frozenset(pass_env)
    env = {name: value for name, value in environ.items()
           if name in passed or (name not in secrets and not looks_secret(name))}
    env.setdefault("PATH", _DEFAULT_PATH)
    if cwd is not None:
        env["PWD"] = str(cwd)
    return env
