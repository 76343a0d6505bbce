"""Slack, on slack-bolt: Socket Mode (default) or the Events API over HTTP in, mrkdwn out.

``SlackAdapter(SlackSettings(bot_token=..., app_token=...))``; the settings model is ``platforms.slack`` of
config.yaml (with ``SLACK_*`` environment variables), validated by the gateway's config loader.
"""

from typing import TYPE_CHECKING

from storage.lazy import lazy_names

from ._mrkdwn import mrkdwn_budget, to_mrkdwn
from ._settings import SlackSettings

__all__ = ["SlackAdapter", "SlackSettings", "mrkdwn_budget", "to_mrkdwn"]

if TYPE_CHECKING:
    from ._adapter import SlackAdapter

# The adapter imports slack-bolt; the settings model alone (config validation, every CLI command)
# must not pay for that.
__getattr__ = lazy_names(__name__, {"SlackAdapter": "adapters.slack._adapter"})
