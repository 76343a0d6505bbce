"""The web tools' one error of their own, apart from the guard that raises it: the error tree
(``gateway.errors``) names it without loading the HTTP client the guard needs."""

from __future__ import annotations

from .._base import ToolError

__all__ = ["UrlRefusedError"]


class UrlRefusedError(ToolError):
    """The URL, or a redirect of it, leads somewhere web_fetch does not go."""
