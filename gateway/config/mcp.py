"""``mcp_servers`` in config.yaml as the specs ``core.tools.mcp`` starts, ``${NAME}`` resolved.

A value of ``env`` or ``headers`` may name a variable of .env or the environment as ``${NAME}``
(anywhere in it: ``"Bearer ${GITHUB_TOKEN}"``). A name that is not set (or set empty) refuses
the config at load, naming the server, the key and the variable, never a value. Every resolved
value is a secret: the log redactor learns them all (``mcp_secrets``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from core.tools.mcp import McpServerSpec
from gateway.config.tools import McpServerConfig
from gateway.errors import ConfigError

__all__ = ["mcp_secrets", "mcp_specs"]

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _resolve(server: str, section: str, values: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    resolved: dict[str, str] = {}
    for key, value in values.items():
        def lookup(match: re.Match[str], key: str = key) -> str:
            name = match.group(1)
            found = env.get(name)
            if not found:
                raise ConfigError(
                    f"mcp_servers.{server}.{section}.{key} names ${{{name}}}, which is set neither in .env nor "
                    f"in the environment; set {name} there (or remove the reference)."
                )
            return found

        resolved[key] = _REFERENCE.sub(lookup, value)
    return resolved


def mcp_specs(servers: Mapping[str, McpServerConfig], env: Mapping[str, str]) -> list[McpServerSpec]:
    """One spec per configured server; a disabled one is listed (``/tools`` says so), unresolved."""
    specs: list[McpServerSpec] = []
    for name, server in servers.items():
        if not server.enabled:
            specs.append(McpServerSpec(name, command=server.command, args=tuple(server.args), url=server.url,
                                       timeout=server.timeout, enabled=False))
            continue
        specs.append(McpServerSpec(
            name,
            command=server.command,
            args=tuple(server.args),
            env=_resolve(name, "env", server.env, env),
            cwd=str(Path(server.cwd).expanduser()) if server.cwd else None,
            url=server.url,
            headers=_resolve(name, "headers", server.headers, env),
            timeout=server.timeout,
        ))
    return specs


def mcp_secrets(servers: Mapping[str, McpServerConfig], env: Mapping[str, str]) -> list[str]:
    """Every value the servers' ``env`` and ``headers`` hold once resolved (for the log redactor)."""
    return [secret for spec in mcp_specs(servers, env) for secret in spec.secrets()]
