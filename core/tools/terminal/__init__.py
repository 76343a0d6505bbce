"""The agent's ``terminal`` tool."""

from __future__ import annotations

from .dangerous import classify

__all__ = ["classify"]
