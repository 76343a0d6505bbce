"""The configuration's error and the exit code that goes with it."""

from __future__ import annotations

from storage.errors import GatewayError

__all__ = ["EX_CONFIG", "ConfigError"]

EX_CONFIG = 78  # sysexits.h: configuration error; systemd must not restart on it


class ConfigError(GatewayError):
    """The configuration cannot be used; the message names the key and the file."""
