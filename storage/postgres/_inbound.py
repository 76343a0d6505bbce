"""Inbound messages already seen (``gateway_inbound_seen``): the dedupe record, and for a
message that became a turn, its stored question and answer.

Several nodes may take the same platform delivery at once (a webhook redelivered to another
node behind the load balancer). The primary key (platform, delivery_key) is what dedupes:
``record`` inserts with ``ON CONFLICT DO NOTHING``, so the second node's insert waits for the
first one's transaction and then changes nothing, and neither raises — the same quiet "keeps
the first time" a single SQLite writer gives.
"""

from __future__ import annotations

from .._model import ParkedMessage, SeenMessage
from ._conn import PgConnection


def seen(conn: PgConnection, platform: str, delivery_key: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM gateway_inbound_seen WHERE platform = %s AND delivery_key = %s", (platform, delivery_key)
    ).fetchone()
    return row is not None


def record(conn: PgConnection, platform: str, delivery_key: str, *, now: float,
           session_id: str | None = None, user_id: str | None = None) -> None:
    """Record a message as seen; recording it twice keeps the first time.

    With ``session_id``, in the transaction that has just appended the message to that
    session: the session's latest row is remembered as its question. ``user_id``: its sender
    (a forget finds the row by it).
    """
    conn.execute(
        "INSERT INTO gateway_inbound_seen (platform, delivery_key, seen_at, session_id, question_id, user_id) "
        "VALUES (%s, %s, %s, %s, (SELECT id FROM messages WHERE session_id = %s ORDER BY id DESC LIMIT 1), %s) "
        "ON CONFLICT (platform, delivery_key) DO NOTHING",
        (platform, delivery_key, now, session_id, session_id, user_id),
    )
    # several nodes: a copy of it handed to this chat's owner is done (its question is stored)
    conn.execute(
        "UPDATE cluster_inbox SET done_at = extract(epoch from now())::float8, done_by = 'seen'"
        " WHERE platform = %s AND delivery_key = %s AND done_at IS NULL",
        (platform, delivery_key),
    )


def record_answer(conn: PgConnection, platform: str, delivery_key: str, answer: str) -> None:
    """The final word on a recorded message (the reply as sent), for its retries."""
    conn.execute(
        "UPDATE gateway_inbound_seen SET answer = %s WHERE platform = %s AND delivery_key = %s",
        (answer, platform, delivery_key),
    )


def get(conn: PgConnection, platform: str, delivery_key: str) -> SeenMessage | None:
    row = conn.execute(
        "SELECT seen_at, session_id, question_id, answer FROM gateway_inbound_seen "
        "WHERE platform = %s AND delivery_key = %s",
        (platform, delivery_key),
    ).fetchone()
    return None if row is None else SeenMessage(*tuple(row))


def question_open(conn: PgConnection, session_id: str, question_id: int) -> bool:
    """Whether message ``question_id`` is still in ``session_id`` and no user message came after it."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM messages WHERE id = %s AND session_id = %s AND role = 'user') "
        "AND NOT EXISTS (SELECT 1 FROM messages WHERE session_id = %s AND role = 'user' AND id > %s)",
        (question_id, session_id, session_id, question_id),
    ).fetchone()
    return bool(row is not None and row[0])


def sweep(conn: PgConnection, *, seen_before: float) -> int:
    """Forget messages seen before ``seen_before``; how many were forgotten."""
    return conn.execute("DELETE FROM gateway_inbound_seen WHERE seen_at < %s", (seen_before,)).rowcount


def park(conn: PgConnection, session_key: str, platform: str, user_id: str | None, payload: str, *,
         now: float, node_id: str | None = None, token: int | None = None) -> int:
    """Keep a message this node runs in ``session_key``'s lane (held under ``token``) until it
    is settled; the row's id. No NOTIFY: nobody else is to run it while this node lives."""
    if node_id is None or token is None:
        raise ValueError("a parked message on PostgreSQL belongs to the node holding its lane")
    row = conn.execute(
        "INSERT INTO cluster_inbox (session_key, payload, from_node, created_at, platform,"
        " claimed_by, claim_token, claimed_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (session_key, payload, node_id, now, platform, node_id, token, now),
    ).fetchone()
    assert row is not None
    return int(row[0])


def unpark(conn: PgConnection, park_id: int) -> None:
    """The parked message was answered: its row is done, by the node that claimed it (ran it)."""
    conn.execute("UPDATE cluster_inbox SET done_at = extract(epoch from now())::float8,"
                 " done_by = coalesce(claimed_by, 'answered') WHERE id = %s AND done_at IS NULL", (park_id,))


def is_parked(conn: PgConnection, park_id: int) -> bool:
    """Whether the parked (or handed) message is still unanswered: a handed one is done once a copy of
    it that reached this node directly stored its question."""
    row = conn.execute("SELECT 1 FROM cluster_inbox WHERE id = %s AND done_at IS NULL", (park_id,)).fetchone()
    return row is not None


def parked(conn: PgConnection) -> list[ParkedMessage]:
    """Nothing to take at start-up here: a dead node's parked rows go to its chats' next owners."""
    return []
