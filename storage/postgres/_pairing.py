"""Pairing on PostgreSQL (``gateway_pairing_codes``, ``gateway_pairing_allowed``,
``gateway_owners``): the codes strangers' DMs were given, the users an owner let in, the owners
pairing recorded.

The same functions as SQLite's ``storage.sqlite.pairing``, returning its row types. A code is
stored only as its keyed hash (``code_hash``, bytea); the code itself is never written anywhere.
Where state.db's one writer kept two requests or two approvals apart, here a lock does: one
advisory lock per sender for ``add_code`` (one pending code each), the code's row lock for
``code_by_hash`` (one approval of a code, whichever node gets it).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from .._records import AllowedUser as AllowedUser
from .._records import PairingCode as PairingCode
from .._records import RecordedOwner as RecordedOwner
from ._conn import PgConnection

__all__ = [
    "AllowedUser",
    "PairingCode",
    "RecordedOwner",
    "add_code",
    "add_failures",
    "allow",
    "allowed",
    "code_by_hash",
    "forget_user",
    "latest_request",
    "owners",
    "pending",
    "record_owner",
    "revoke",
    "settle",
    "sweep",
]

#: a code is pending while its status says so and it has not expired (``expires_at``)
PENDING = "pending"

#: the first key of this module's advisory locks (two-key locks never meet one-key ones)
_LOCK_CLASS = 0x7061_6972  # "pair"

_CODE_COLUMNS = ("id, platform, account_id, user_id, user_name, chat_id, created_at, expires_at, failures, "
                 "status")


def _code(row: Any) -> PairingCode:
    return PairingCode(int(row[0]), str(row[1]), str(row[2]), str(row[3]), None if row[4] is None else str(row[4]),
                       str(row[5]), float(row[6]), float(row[7]), int(row[8]), str(row[9]))


def _lock_key(*parts: str) -> int:
    """A signed 32-bit key for a sender (a collision only makes two senders wait for each other)."""
    digest = hashlib.blake2b(json.dumps(parts).encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def add_code(conn: PgConnection, *, platform: str, account_id: str, user_id: str, user_name: str | None,
             chat_id: str, code_hash: bytes, now: float, ttl: float) -> int:
    """A new pending code for ``user_id``; an older pending one of theirs is replaced (one at a time,
    also when two nodes take two DMs of theirs at once: the second waits here for the first)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (_LOCK_CLASS, _lock_key(platform, account_id, user_id)))
    conn.execute("UPDATE gateway_pairing_codes SET status = 'replaced' WHERE platform = %s AND account_id = %s "
                 "AND user_id = %s AND status = %s", (platform, account_id, user_id, PENDING))
    row = conn.execute(
        "INSERT INTO gateway_pairing_codes (platform, account_id, user_id, user_name, chat_id, code_hash, "
        "created_at, expires_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        (platform, account_id, user_id, user_name, chat_id, bytes(code_hash), now, now + ttl),
    ).fetchone()
    assert row is not None
    return int(row[0])


def latest_request(conn: PgConnection, platform: str, account_id: str, user_id: str) -> float | None:
    """When ``user_id`` was last given a code by this bot account (None: never, or swept)."""
    row = conn.execute("SELECT MAX(created_at) FROM gateway_pairing_codes WHERE platform = %s AND account_id = %s "
                       "AND user_id = %s", (platform, account_id, user_id)).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def pending(conn: PgConnection, *, now: float, platform: str | None = None,
            account_id: str | None = None) -> list[PairingCode]:
    """The codes waiting for an owner (not expired, not settled), oldest first; all, or one scope's."""
    sql = f"SELECT {_CODE_COLUMNS} FROM gateway_pairing_codes WHERE status = %s AND expires_at > %s"
    params: list[object] = [PENDING, now]
    if platform is not None:
        sql += " AND platform = %s"
        params.append(platform)
    if account_id is not None:
        sql += " AND account_id = %s"
        params.append(account_id)
    return [_code(r) for r in conn.execute(sql + " ORDER BY created_at, id", params).fetchall()]


def code_by_hash(conn: PgConnection, code_hash: bytes) -> PairingCode | None:
    """The code whose keyed hash is ``code_hash``, whatever its state (the newest, were two alike).

    Its row stays locked until the caller's transaction ends (so: call it in a write): an owner
    approving it on one node and denying it on another settle it once, the second reading the
    first's outcome."""
    row = conn.execute(f"SELECT {_CODE_COLUMNS} FROM gateway_pairing_codes WHERE code_hash = %s "
                       "ORDER BY id DESC LIMIT 1 FOR UPDATE", (bytes(code_hash),)).fetchone()
    return None if row is None else _code(row)


def settle(conn: PgConnection, code_id: int, status: str) -> None:
    conn.execute("UPDATE gateway_pairing_codes SET status = %s WHERE id = %s", (status, code_id))


def add_failures(conn: PgConnection, code_ids: list[int], *, lock_after: int) -> list[int]:
    """One more wrong approval against each of ``code_ids`` (pending ones); returns those now locked."""
    locked: list[int] = []
    for code_id in code_ids:
        row = conn.execute("UPDATE gateway_pairing_codes SET failures = failures + 1 WHERE id = %s AND status = %s "
                           "RETURNING failures", (code_id, PENDING)).fetchone()
        if row is not None and int(row[0]) >= lock_after:
            conn.execute("UPDATE gateway_pairing_codes SET status = 'locked' WHERE id = %s", (code_id,))
            locked.append(code_id)
    return locked


def sweep(conn: PgConnection, *, older_than: float) -> int:
    """Forget codes made before ``older_than`` (an expired code is still recognised until then)."""
    return conn.execute("DELETE FROM gateway_pairing_codes WHERE created_at < %s", (older_than,)).rowcount


def allow(conn: PgConnection, *, platform: str, account_id: str, user_id: str, user_name: str | None,
          approved_by: str | None, now: float) -> None:
    conn.execute(
        "INSERT INTO gateway_pairing_allowed (platform, account_id, user_id, user_name, approved_by, approved_at) "
        "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (platform, account_id, user_id) DO UPDATE SET "
        "user_name = excluded.user_name, approved_by = excluded.approved_by, approved_at = excluded.approved_at",
        (platform, account_id, user_id, user_name, approved_by, now),
    )


def allowed(conn: PgConnection) -> list[AllowedUser]:
    """Every user pairing let in, by platform, account and approval time."""
    rows = conn.execute("SELECT platform, account_id, user_id, user_name, approved_by, approved_at "
                        "FROM gateway_pairing_allowed ORDER BY platform COLLATE \"C\", account_id COLLATE \"C\", "
                        "approved_at").fetchall()
    return [AllowedUser(str(r[0]), str(r[1]), str(r[2]), None if r[3] is None else str(r[3]),
                        None if r[4] is None else str(r[4]), float(r[5])) for r in rows]


def record_owner(conn: PgConnection, *, platform: str, account_id: str, user_id: str, now: float) -> None:
    conn.execute("INSERT INTO gateway_owners (platform, account_id, user_id, recorded_at) VALUES (%s, %s, %s, %s) "
                 "ON CONFLICT (platform, account_id, user_id) DO NOTHING", (platform, account_id, user_id, now))


def owners(conn: PgConnection) -> list[RecordedOwner]:
    rows = conn.execute("SELECT platform, account_id, user_id, recorded_at FROM gateway_owners "
                        "ORDER BY platform COLLATE \"C\", recorded_at").fetchall()
    return [RecordedOwner(str(r[0]), str(r[1]), str(r[2]), float(r[3])) for r in rows]


def revoke(conn: PgConnection, platform: str, user_id: str) -> tuple[int, int]:
    """``user_id`` no longer let in by pairing on ``platform`` (any bot account), nor its recorded
    owner; returns (allowlist rows, owner rows) removed. config.yaml's lists are not the database's."""
    allowed_rows = conn.execute("DELETE FROM gateway_pairing_allowed WHERE platform = %s AND user_id = %s",
                                (platform, user_id)).rowcount
    owner_rows = conn.execute("DELETE FROM gateway_owners WHERE platform = %s AND user_id = %s",
                              (platform, user_id)).rowcount
    return allowed_rows, owner_rows


def forget_user(conn: PgConnection, platform: str, user_id: str) -> int:
    """Every pairing row of ``user_id`` on ``platform`` deleted (codes, allowlist, recorded owner),
    for /forget-me; returns how many rows went."""
    codes = conn.execute("DELETE FROM gateway_pairing_codes WHERE platform = %s AND user_id = %s",
                         (platform, user_id)).rowcount
    allowed_rows, owner_rows = revoke(conn, platform, user_id)
    return codes + allowed_rows + owner_rows
