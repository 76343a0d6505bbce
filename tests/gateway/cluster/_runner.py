"""What the daemon will do with a ``ClusterNode``'s inbox, reduced to its storage effects: a
"turn" for an inbox row is a row in the test's ``ran`` table, written in ONE transaction with
``finish_inbox`` (as a turn's answer is stored with it), and rolled back when the fence says the
node no longer owns the lane. Shared by the tests and the child-process node (``_node_child``).
"""

from __future__ import annotations

import asyncio
from functools import partial

from gateway.cluster import ClusterNode
from storage.postgres import PgConnection, PgStore
from storage.postgres import cluster as pc


class LaneLost(Exception):
    """The fence refused: another node owns the lane now; this turn's result is rolled back."""


def create_ran_table(conn: PgConnection) -> None:
    # test-only SQL: the effect a turn leaves, one row per run
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ran (seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
        " inbox_id BIGINT NOT NULL, session_key TEXT NOT NULL, payload TEXT NOT NULL, node TEXT NOT NULL)"
    )


def run_one(conn: PgConnection, row: pc.InboxRow, node_id: str, token: int) -> None:
    conn.execute(
        "INSERT INTO ran (inbox_id, session_key, payload, node) VALUES (%s, %s, %s, %s)",
        (row.id, row.session_key, row.payload, node_id),
    )
    if not pc.finish_inbox(conn, row.id, node_id, token):
        raise LaneLost(row.session_key)


def ran_rows(conn: PgConnection) -> list[tuple[int, str, str, str]]:
    rows = conn.execute("SELECT inbox_id, session_key, payload, node FROM ran ORDER BY seq").fetchall()
    return [(int(r[0]), str(r[1]), str(r[2]), str(r[3])) for r in rows]


class InboxRunner:
    """``on_inbox`` for a node: take the key's rows and run them in order, one key at a time
    (as a lane does); ``pause`` seconds before each commit leave room for a kill mid-run."""

    def __init__(self, store: PgStore, pause: float = 0.0) -> None:
        self.store = store
        self.pause = pause
        self.node: ClusterNode | None = None
        self.lost = 0

    async def __call__(self, key: str) -> None:
        node = self.node
        assert node is not None
        while True:
            token = node.lane_token(key)
            rows = await node.take_inbox(key)
            if token is None or not rows:
                return
            for row in rows:
                if self.pause:
                    await asyncio.sleep(self.pause)
                try:
                    await self.store.write(partial(run_one, row=row, node_id=node.node_id, token=token))
                except LaneLost:
                    self.lost += 1
                    return
