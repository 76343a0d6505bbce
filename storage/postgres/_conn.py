"""The type a function of a connection receives in this backend."""

from __future__ import annotations

from typing import TypeAlias

import asyncpg
from asyncpg.pool import PoolConnectionProxy

#: a pooled connection (what ``PgStore.write``/``read`` pass) or a plain one (``LISTEN``, copies)
PgConnection: TypeAlias = "asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]"
