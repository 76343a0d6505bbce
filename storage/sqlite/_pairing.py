"""Pairing (``gateway_pairing_codes``, ``gateway_pairing_allowed``, ``gateway_owners``): the codes
strangers' DMs were given, the users an owner let in, and the owners pairing recorded.

Every row is scoped to a platform and a bot account (``account_id``: the Telegram bot, the Discord
application, the Slack workspace's bot), so that what one bot's owner approved never lets anyone
talk to another bot. A code is stored only as its keyed hash (``code_hash``); the code itself is
never written anywhere.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from .._records import AllowedUser, PairingCode, RecordedOwner

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


_CODE_COLUMNS = ("id, platform, account_id, user_id, user_name, chat_id, created_at, expires_at, failures, "
                 "status")


def _code(row: sqlite3.Row | tuple[Any, ...]) -> PairingCode:
    return PairingCode(int(row[0]), str(row[1]), str(row[2]), str(row[3]), None if row[4] is None else str(row[4]),
                       str(row[5]), float(row[6]), float(row[7]), int(row[8]), str(row[9]))


def add_code(conn: sqlite3.Connection, *, platform: str, account_id: str, user_id: str, user_name: str | None,
             chat_id: str, code_hash: bytes, now: float, ttl: float) -> int:
    """A new pending code for ``user_id``; an older pending one of theirs is replaced (one at a time)."""
    conn.execute("UPDATE gateway_pairing_codes SET status = 'replaced' WHERE platform = ? AND account_id = ? "
                 "AND user_id = ? AND status = ?", (platform, account_id, user_id, PENDING))
    cur = conn.execute(
        "INSERT INTO gateway_pairing_codes (platform, account_id, user_id, user_name, chat_id, code_hash, "
        "created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (platform, account_id, user_id, user_name, chat_id, code_hash, now, now + ttl),
    )
    return int(cur.lastrowid or 0)


def latest_request(conn: sqlite3.Connection, platform: str, account_id: str, user_id: str) -> float | None:
    """When ``user_id`` was last given a code by this bot account (None: never, or swept)."""
    row = conn.execute("SELECT MAX(created_at) FROM gateway_pairing_codes WHERE platform = ? AND account_id = ? "
                       "AND user_id = ?", (platform, account_id, user_id)).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def pending(conn: sqlite3.Connection, *, now: float, platform: str | None = None,
            account_id: str | None = None) -> list[PairingCode]:
    """The codes waiting for an owner (not expired, not settled), oldest first; all, or one scope's."""
    sql = f"SELECT {_CODE_COLUMNS} FROM gateway_pairing_codes WHERE status = ? AND expires_at > ?"
    params: list[object] = [PENDING, now]
    if platform is not None:
        sql += " AND platform = ?"
        params.append(platform)
    if account_id is not None:
        sql += " AND account_id = ?"
        params.append(account_id)
    return [_code(r) for r in conn.execute(sql + " ORDER BY created_at, id", params)]


def code_by_hash(conn: sqlite3.Connection, code_hash: bytes) -> PairingCode | None:
    """The code whose keyed hash is ``code_hash``, whatever its state (the newest, were two alike)."""
    row = conn.execute(f"SELECT {_CODE_COLUMNS} FROM gateway_pairing_codes WHERE code_hash = ? "
                       "ORDER BY id DESC LIMIT 1", (code_hash,)).fetchone()
    return None if row is None else _code(row)


def settle(conn: sqlite3.Connection, code_id: int, status: str) -> None:
    conn.execute("UPDATE gateway_pairing_codes SET status = ? WHERE id = ?", (status, code_id))


def add_failures(conn: sqlite3.Connection, code_ids: list[int], *, lock_after: int) -> list[int]:
    """One more wrong approval against each of ``code_ids`` (pending ones); returns those now locked."""
    locked: list[int] = []
    for code_id in code_ids:
        row = conn.execute("UPDATE gateway_pairing_codes SET failures = failures + 1 WHERE id = ? AND status = ? "
                           "RETURNING failures", (code_id, PENDING)).fetchone()
        if row is not None and int(row[0]) >= lock_after:
            conn.execute("UPDATE gateway_pairing_codes SET status = 'locked' WHERE id = ?", (code_id,))
            locked.append(code_id)
    return locked


def sweep(conn: sqlite3.Connection, *, older_than: float) -> int:
    """Forget codes made before ``older_than`` (an expired code is still recognised until then)."""
    return conn.execute("DELETE FROM gateway_pairing_codes WHERE created_at < ?", (older_than,)).rowcount


def allow(conn: sqlite3.Connection, *, platform: str, account_id: str, user_id: str, user_name: str | None,
          approved_by: str | None, now: float) -> None:
    conn.execute(
        "INSERT INTO gateway_pairing_allowed (platform, account_id, user_id, user_name, approved_by, approved_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(platform, account_id, user_id) DO UPDATE SET "
        "user_name = excluded.user_name, approved_by = excluded.approved_by, approved_at = excluded.approved_at",
        (platform, account_id, user_id, user_name, approved_by, now),
    )


def allowed(conn: sqlite3.Connection) -> list[AllowedUser]:
    """Every user pairing let in, by platform, account and approval time."""
    rows = conn.execute("SELECT platform, account_id, user_id, user_name, approved_by, approved_at "
                        "FROM gateway_pairing_allowed ORDER BY platform, account_id, approved_at")
    return [AllowedUser(str(r[0]), str(r[1]), str(r[2]), None if r[3] is None else str(r[3]),
                        None if r[4] is None else str(r[4]), float(r[5])) for r in rows]


def record_owner(conn: sqlite3.Connection, *, platform: str, account_id: str, user_id: str, now: float) -> None:
    conn.execute("INSERT INTO gateway_owners (platform, account_id, user_id, recorded_at) VALUES (?, ?, ?, ?) "
                 "ON CONFLICT(platform, account_id, user_id) DO NOTHING", (platform, account_id, user_id, now))


def owners(conn: sqlite3.Connection) -> list[RecordedOwner]:
    rows = conn.execute("SELECT platform, account_id, user_id, recorded_at FROM gateway_owners "
                        "ORDER BY platform, recorded_at")
    return [RecordedOwner(str(r[0]), str(r[1]), str(r[2]), float(r[3])) for r in rows]


def revoke(conn: sqlite3.Connection, platform: str, user_id: str) -> tuple[int, int]:
    """``user_id`` no longer let in by pairing on ``platform`` (any bot account), nor its recorded
    owner; returns (allowlist rows, owner rows) removed. config.yaml's lists are not state.db's."""
    allowed_rows = conn.execute("DELETE FROM gateway_pairing_allowed WHERE platform = ? AND user_id = ?",
                                (platform, user_id)).rowcount
    owner_rows = conn.execute("DELETE FROM gateway_owners WHERE platform = ? AND user_id = ?",
                              (platform, user_id)).rowcount
    return allowed_rows, owner_rows


def forget_user(conn: sqlite3.Connection, platform: str, user_id: str) -> int:
    """Every pairing row of ``user_id`` on ``platform`` deleted (codes, allowlist, recorded owner),
    for /forget-me; returns how many rows went."""
    codes = conn.execute("DELETE FROM gateway_pairing_codes WHERE platform = ? AND user_id = ?",
                         (platform, user_id)).rowcount
    allowed_rows, owner_rows = revoke(conn, platform, user_id)
    return codes + allowed_rows + owner_rows
