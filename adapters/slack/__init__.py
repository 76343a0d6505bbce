"""Slack, on slack-bolt: Socket Mode (default) or the Events API over HTTP in, mrkdwn out.

``SlackAdapter(SlackSettings(bot_token=..., app_token=...))``; the gateway builds the settings
from ``platforms.slack`` in config.yaml and ``SLACK_*`` environment variables.
"""

from ._adapter import SlackAdapter
from ._mrkdwn import mrkdwn_budget, to_mrkdwn
from ._settings import SlackSettings

__all__ = ["SlackAdapter", "SlackSettings", "mrkdwn_budget", "to_mrkdwn"]
