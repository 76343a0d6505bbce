"""Which roles a node competes for, from its settings."""

from __future__ import annotations

from typing import Any

from gateway.cluster import LEDGER, MAINTENANCE, SCHEDULER, cluster_roles
from gateway.config import Settings


def _settings(tree: dict[str, Any]) -> Settings:
    return Settings.model_validate(tree)


def test_no_platform_the_daemons_own_loops_only() -> None:
    assert cluster_roles(_settings({})) == (SCHEDULER, LEDGER, MAINTENANCE)
    assert cluster_roles(_settings({"cron": {"enabled": False}})) == (LEDGER, MAINTENANCE)


def test_long_lived_connections_are_roles_webhooks_are_not() -> None:
    polling = _settings({"platforms": {
        "telegram": {"token": "123:abc"},
        "discord": {"token": "d"},
        "slack": {"bot_token": "xoxb-1", "app_token": "xapp-1"},
    }})
    assert cluster_roles(polling)[:3] == ("telegram", "discord", "slack")
    hooks = _settings({"platforms": {
        "telegram": {"token": "123:abc", "mode": "webhook", "webhook_url": "https://example.org/tg",
                     "webhook_secret": "s" * 32},
        "slack": {"bot_token": "xoxb-1", "mode": "http", "signing_secret": "x" * 32},
    }})
    assert cluster_roles(hooks) == (SCHEDULER, LEDGER, MAINTENANCE)
