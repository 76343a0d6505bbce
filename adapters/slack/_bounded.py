"""A set that remembers only its newest entries (event ids seen, threads the bot is in)."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

__all__ = ["MEMORY", "Bounded", "BoundedMap"]

#: How many entries (event ids, bot threads, answered messages) are remembered.
MEMORY = 10_000


class Bounded(OrderedDict[Any, float]):
    """An insertion-ordered set that forgets its oldest entries past ``MEMORY``."""

    def add(self, key: Any) -> None:
        self[key] = time.monotonic()
        self.move_to_end(key)
        while len(self) > MEMORY:
            self.popitem(last=False)


class BoundedMap(OrderedDict[Any, Any]):
    """A mapping that forgets its oldest entries past ``MEMORY`` (who wrote the messages answered)."""

    def put(self, key: Any, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > MEMORY:
            self.popitem(last=False)
