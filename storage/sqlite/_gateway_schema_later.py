"""The gateway's tables, steps 11 on: settings changed at run time, pairing, a person's data,
conversation controls. Appended to ``_gateway_schema``'s; the same rule holds: a released step
is never edited, a new one is appended here."""

from __future__ import annotations

import sqlite3

from ._gateway_step import Migration, add_columns

__all__ = ["LATER_MIGRATIONS"]


def _dedupe_sender(conn: sqlite3.Connection) -> None:
    add_columns(conn, "gateway_inbound_seen", (("user_id", "TEXT"),))
    conn.execute("CREATE INDEX IF NOT EXISTS idx_gateway_inbound_seen_user ON gateway_inbound_seen(platform, user_id)")


LATER_MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        11,
        "settings a chat or an owner changes at run time: per session (its model, ...) and global",
        (
            # name -> value (text; JSON where a setting needs structure). A session's settings
            # go with it: a new session (/new) starts with none.
            """
            CREATE TABLE IF NOT EXISTS gateway_session_settings (
                session_id TEXT NOT NULL,
                name TEXT NOT NULL,
                value TEXT NOT NULL,
                updated_at REAL NOT NULL,
                PRIMARY KEY (session_id, name)
            ) WITHOUT ROWID
            """,
            """
            CREATE TABLE IF NOT EXISTS gateway_settings (
                name TEXT PRIMARY KEY,
                value TEXT NOT NULL,
                updated_by TEXT,
                updated_at REAL NOT NULL
            )
            """,
        ),
    ),
    Migration(
        12,
        "pairing: codes a stranger's DM was given (hashed), the users owners let in, owners recorded",
        (
            # A code is kept only as its keyed hash (HMAC, the key outside state.db); each is scoped to the platform and the bot
            # account (a Telegram bot, a Discord application, a Slack workspace's bot) that gave it.
            """
            CREATE TABLE IF NOT EXISTS gateway_pairing_codes (
                id INTEGER PRIMARY KEY,
                platform TEXT NOT NULL,
                account_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                user_name TEXT,
                chat_id TEXT NOT NULL,
                code_hash BLOB NOT NULL,
                created_at REAL NOT NULL,
                expires_at REAL NOT NULL,
                failures INTEGER NOT NULL DEFAULT 0,
                status TEXT NOT NULL DEFAULT 'pending'
            )
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_pairing_codes_user ON gateway_pairing_codes(platform, user_id)",
            "CREATE INDEX IF NOT EXISTS idx_gateway_pairing_codes_hash ON gateway_pairing_codes(code_hash)",
            """
            CREATE TABLE IF NOT EXISTS gateway_pairing_allowed (
                platform TEXT NOT NULL,
                account_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                user_name TEXT,
                approved_by TEXT,
                approved_at REAL NOT NULL,
                PRIMARY KEY (platform, account_id, user_id)
            ) WITHOUT ROWID
            """,
            """
            CREATE TABLE IF NOT EXISTS gateway_owners (
                platform TEXT NOT NULL,
                account_id TEXT NOT NULL,
                user_id TEXT NOT NULL,
                recorded_at REAL NOT NULL,
                PRIMARY KEY (platform, account_id, user_id)
            ) WITHOUT ROWID
            """,
        ),
    ),
    Migration(
        13,
        "who sent each stored user message, and the requests to forget a sender (/forget-me)",
        (
            # The reference's messages have no sender: in a shared session (a thread, a group
            # without per-user sessions) several people's messages are alike. From this step on
            # the question's transaction writes its sender here; messages stored before have
            # no row, and only the session's bindings can tell whose they were.
            """
            CREATE TABLE IF NOT EXISTS gateway_message_senders (
                message_id INTEGER PRIMARY KEY,
                session_id TEXT NOT NULL,
                platform TEXT NOT NULL,
                user_id TEXT NOT NULL
            )
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_message_senders_user "
            "ON gateway_message_senders(platform, user_id)",
            "CREATE INDEX IF NOT EXISTS idx_gateway_message_senders_session "
            "ON gateway_message_senders(session_id)",
            # A forget commits its rows in one transaction with this row ('files'); the files
            # (media, the memory profile) and VACUUM come after the commit, and a daemon that
            # starts with a row still 'files' finishes them. Once 'done' the person is no
            # longer named (user_id NULL): the counts stay as the operator's record.
            """
            CREATE TABLE IF NOT EXISTS gateway_forget_requests (
                id INTEGER PRIMARY KEY,
                platform TEXT NOT NULL,
                user_id TEXT,
                requested_by TEXT NOT NULL,
                state TEXT NOT NULL CHECK (state IN ('files', 'done')),
                forget_memory INTEGER NOT NULL DEFAULT 0,
                digests TEXT NOT NULL DEFAULT '[]',
                report TEXT NOT NULL,
                created_at REAL NOT NULL,
                finished_at REAL
            )
            """,
        ),
        # Dedupe rows say whose message they were (from now on), so a forget finds them.
        run=lambda conn: _dedupe_sender(conn),
    ),
    Migration(
        14,
        "conversation controls: answers a /retry superseded, background turns (/bg)",
        (
            # A message replaced by /retry: kept (a v11 row like any other, which readers of the
            # reference schema still see), but never loaded as history again. Keyed by the message:
            # a message deleted by /undo or with its session takes its mark with it.
            """
            CREATE TABLE IF NOT EXISTS gateway_superseded (
                message_id INTEGER PRIMARY KEY,
                session_id TEXT NOT NULL,
                superseded_at REAL NOT NULL
            )
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_superseded_session ON gateway_superseded(session_id)",
            # status: running -> done | failed | stopped | interrupted. A row still 'running' when the
            # daemon starts was cut off by a crash (the answer, once stored, settles it in its
            # transaction with its delivery-ledger row).
            """
            CREATE TABLE IF NOT EXISTS gateway_background_tasks (
                id TEXT PRIMARY KEY,
                chat_session_key TEXT NOT NULL,
                platform TEXT NOT NULL,
                chat_id TEXT NOT NULL,
                thread_id TEXT,
                user_id TEXT,
                reply_to TEXT,
                prompt TEXT NOT NULL,
                session_id TEXT,
                status TEXT NOT NULL,
                ledger_id INTEGER,
                error TEXT,
                created_at REAL NOT NULL,
                finished_at REAL
            )
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_background_running ON gateway_background_tasks(status) "
            "WHERE status = 'running'",
        ),
    ),
    Migration(
        15,
        "messages taken from a platform and not yet answered, kept across a crash",
        (
            # Written before the platform is told the message was taken; deleted in the transaction
            # that stores its answer (or once it was answered otherwise). A row left at start-up is
            # a message a crash or a stop cut off: it is taken again, in order.
            """
            CREATE TABLE IF NOT EXISTS gateway_parked (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_key TEXT NOT NULL,
                platform TEXT NOT NULL,
                user_id TEXT,
                payload TEXT NOT NULL,
                parked_at REAL NOT NULL
            )
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_parked_user ON gateway_parked(platform, user_id)",
        ),
    ),
)
