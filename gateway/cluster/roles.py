"""Which roles a node competes for: the work that must run on exactly one node of a cluster.

A platform connection that the platform allows only once per bot (Telegram's getUpdates: a
second poller gets 409 Conflict; Discord's gateway session; Slack's Socket Mode, where each
event goes to one of the open sockets) is a role, and so are the daemon's loops that would do
their work twice on two nodes (the scheduler's tick; the sweeps of the delivery ledger and of
old rows). Webhook modes are no role: Telegram and Slack post to any node behind the proxy.
"""

from __future__ import annotations

from gateway.config import Settings

__all__ = ["LEDGER", "MAINTENANCE", "SCHEDULER", "cluster_roles"]

#: scheduled jobs: one node ticks, claims and runs them
SCHEDULER = "scheduler"
#: the delivery ledger's recovery (answers stored but not yet sent) and retries
LEDGER = "ledger"
#: the periodic sweeps (dedupe rows, retention, media files)
MAINTENANCE = "maintenance"


def cluster_roles(settings: Settings) -> tuple[str, ...]:
    """The roles a node with these settings wants (every node of a cluster has the same)."""
    telegram, discord, slack = settings.platforms.telegram, settings.platforms.discord, settings.platforms.slack
    roles: list[str] = []
    if telegram.active and telegram.mode == "polling":
        roles.append("telegram")
    if discord.active:
        roles.append("discord")
    if slack.active and slack.mode == "socket":
        roles.append("slack")
    if settings.cron.enabled:
        roles.append(SCHEDULER)
    roles += [LEDGER, MAINTENANCE]
    return tuple(roles)
