"""The gateway's own tables in state.db, as numbered migrations (``gateway_schema_version``).

Issues that need a table append a step (to ``_gateway_schema_later``), never edit a released one. The
reference's tables (``_schema``) are never touched by these steps.
"""

from __future__ import annotations

from ._gateway_schema_later import LATER_MIGRATIONS
from ._gateway_step import Migration, add_columns
from ._rekey import rekey_threads

__all__ = ["GATEWAY_MIGRATIONS", "Migration"]


#: the steps of the first releases (1-10); the later ones are in ``_gateway_schema_later``
_EARLY: tuple[Migration, ...] = (
    Migration(
        1,
        "gateway routing index, inbound dedupe, outbound delivery ledger, queued titles",
        (
            # key -> the session a chat is talking to now (rebindable by
            # /resume and /handoff). No foreign key: a session deleted by a CLI
            # leaves a stale entry that the router heals, never a failed write.
            """
            CREATE TABLE IF NOT EXISTS gateway_session_index (
                session_key TEXT PRIMARY KEY,
                session_id TEXT NOT NULL,
                platform TEXT NOT NULL,
                chat_id TEXT,
                chat_type TEXT,
                thread_id TEXT,
                user_id TEXT,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            )
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_session_index_session ON gateway_session_index(session_id)",
            """
            CREATE TABLE IF NOT EXISTS gateway_inbound_seen (
                platform TEXT NOT NULL,
                delivery_key TEXT NOT NULL,
                seen_at REAL NOT NULL,
                PRIMARY KEY (platform, delivery_key)
            ) WITHOUT ROWID
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_inbound_seen_at ON gateway_inbound_seen(seen_at)",
            """
            CREATE TABLE IF NOT EXISTS gateway_outbound (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_key TEXT,
                session_id TEXT,
                platform TEXT NOT NULL,
                chat_id TEXT NOT NULL,
                thread_id TEXT,
                reply_to TEXT,
                text TEXT NOT NULL,
                status TEXT NOT NULL DEFAULT 'pending',
                attempts INTEGER NOT NULL DEFAULT 0,
                error TEXT,
                created_at REAL NOT NULL,
                sent_at REAL
            )
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_outbound_status ON gateway_outbound(status, created_at)",
            """
            CREATE TABLE IF NOT EXISTS gateway_pending_titles (
                session_key TEXT PRIMARY KEY,
                title TEXT NOT NULL,
                created_at REAL NOT NULL
            )
            """,
            # Messages are read back in the order they were produced (row id).
            "CREATE INDEX IF NOT EXISTS idx_messages_session_id ON messages(session_id, id)",
        ),
    ),
    Migration(
        2,
        "home channels per platform, handoff state machine",
        (
            # /sethome: where a platform's proactive work (handoffs) lands.
            """
            CREATE TABLE IF NOT EXISTS gateway_home_channels (
                platform TEXT PRIMARY KEY,
                chat_id TEXT NOT NULL,
                thread_id TEXT,
                chat_type TEXT,
                set_by TEXT,
                updated_at REAL NOT NULL
            )
            """,
            # pending -> claimed -> completed | failed; every transition is a
            # compare-and-set (UPDATE ... WHERE state = ?), so a late timeout can
            # never overwrite a claimed or completed row.
            """
            CREATE TABLE IF NOT EXISTS gateway_handoffs (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_id TEXT NOT NULL,
                source_key TEXT NOT NULL,
                source_platform TEXT NOT NULL,
                source_chat_id TEXT,
                source_thread_id TEXT,
                target_platform TEXT NOT NULL,
                target_chat_id TEXT,
                target_thread_id TEXT,
                target_key TEXT,
                state TEXT NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'claimed', 'completed', 'failed')),
                error TEXT,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            )
            """,
            # At most one live handoff per session; failed/completed rows stay as
            # history and no longer block a retry.
            "CREATE UNIQUE INDEX IF NOT EXISTS idx_gateway_handoffs_live ON gateway_handoffs(session_id) "
            "WHERE state IN ('pending', 'claimed')",
        ),
    ),
    Migration(
        3,
        "where each session has lived: the keys it was ever bound to",
        (
            # The routing index keeps only a key's current session; /resume needs
            # to know which chats a session belongs to after the chat moved on
            # (/new, /handoff), so every binding is remembered here.
            """
            CREATE TABLE IF NOT EXISTS gateway_session_bindings (
                session_key TEXT NOT NULL,
                session_id TEXT NOT NULL,
                platform TEXT NOT NULL,
                user_id TEXT,
                first_bound_at REAL NOT NULL,
                PRIMARY KEY (session_key, session_id)
            ) WITHOUT ROWID
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_session_bindings_session ON gateway_session_bindings(session_id)",
            # What is known of the past: current bindings, and where replies of a session went.
            "INSERT OR IGNORE INTO gateway_session_bindings (session_key, session_id, platform, user_id, "
            "first_bound_at) SELECT session_key, session_id, platform, user_id, created_at FROM gateway_session_index",
            "INSERT OR IGNORE INTO gateway_session_bindings (session_key, session_id, platform, user_id, "
            "first_bound_at) SELECT session_key, session_id, platform, NULL, MIN(created_at) FROM gateway_outbound "
            "WHERE session_key IS NOT NULL AND session_id IS NOT NULL GROUP BY session_key, session_id, platform",
        ),
    ),
    Migration(4, "thread session keys in the reference's documented format (group:<chat>:<thread>)", (),
              rekey_threads),
    Migration(
        5,
        "what became of a message that became a turn: its stored question and its answer",
        (
            # A retried HTTP request (same Idempotency-Key) is answered from here,
            # also after a crash: the answer if it was stored, else the turn is
            # resumed on the stored question (never stored twice).
            "ALTER TABLE gateway_inbound_seen ADD COLUMN session_id TEXT",
            "ALTER TABLE gateway_inbound_seen ADD COLUMN question_id INTEGER",
            "ALTER TABLE gateway_inbound_seen ADD COLUMN answer TEXT",
        ),
    ),
    Migration(
        6,
        "the platform messages of a streamed answer, so that a restart can finish what a crash cut off",
        (
            # A JSON list of message ids; NULL for a reply sent whole. A streamed answer's row
            # exists from its first visible message on, as 'streaming' (no text yet).
            "ALTER TABLE gateway_outbound ADD COLUMN message_ids TEXT",
        ),
    ),
    Migration(
        7,
        "the files that came with messages: one row per attachment, its bytes in the media store",
        (
            # The message's content keeps the text (caption, transcript, a marker per file), so a
            # reader of the reference schema sees the whole conversation; the file itself is
            # media/ab/cd/<sha256>. No foreign key: a reference tool deleting a session must not
            # fail on our rows (they are found by attachments.delete_dangling instead).
            """
            CREATE TABLE IF NOT EXISTS gateway_attachments (
                id INTEGER PRIMARY KEY,
                message_id INTEGER NOT NULL,
                session_id TEXT NOT NULL,
                kind TEXT NOT NULL,
                mime TEXT,
                name TEXT,
                size INTEGER NOT NULL,
                sha256 TEXT NOT NULL,
                description TEXT,
                created_at REAL NOT NULL
            )
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_attachments_message ON gateway_attachments(message_id)",
            "CREATE INDEX IF NOT EXISTS idx_gateway_attachments_session ON gateway_attachments(session_id)",
            "CREATE INDEX IF NOT EXISTS idx_gateway_attachments_sha256 ON gateway_attachments(sha256)",
            "CREATE INDEX IF NOT EXISTS idx_gateway_attachments_created ON gateway_attachments(created_at)",
        ),
    ),
    Migration(
        8,
        "the files that go with a reply, and how many of them went out",
        # A JSON list of {sha256, name, mime, kind, size} (NULL: a reply of text alone), and the
        # count of them the platform has taken (NULL: none): a retry after a crash sends only the rest.
        (),
        run=lambda conn: add_columns(conn, "gateway_outbound",
                                      (("files", "TEXT"), ("files_sent", "INTEGER"))),
    ),
    Migration(
        9,
        "approvals answered \"always\": an action's pattern that runs unasked for the rest of a session",
        (
            # Session ids are never reused, so a row of a deleted session is only dead weight
            # (no foreign key: a reference tool deleting a session must not fail on our rows).
            """
            CREATE TABLE IF NOT EXISTS gateway_approvals_always (
                session_id TEXT NOT NULL,
                pattern TEXT NOT NULL,
                tool TEXT NOT NULL,
                approved_by TEXT,
                created_at REAL NOT NULL,
                PRIMARY KEY (session_id, pattern)
            )
            """,
        ),
    ),
    Migration(
        10,
        "scheduled jobs and their runs",
        (
            # next_due is the one due time not yet claimed: starting a run moves it on in the
            # same transaction that writes the run's row, so one due time never runs twice.
            """
            CREATE TABLE IF NOT EXISTS gateway_cron_jobs (
                id TEXT PRIMARY KEY,
                name TEXT NOT NULL,
                prompt TEXT NOT NULL,
                schedule TEXT NOT NULL,
                kind TEXT NOT NULL,
                deliver TEXT NOT NULL,
                toolsets TEXT,
                catch_up TEXT NOT NULL,
                owner_platform TEXT NOT NULL,
                owner_chat_id TEXT NOT NULL,
                owner_thread_id TEXT,
                owner_user_id TEXT,
                owner_session_key TEXT NOT NULL,
                owner_chat_type TEXT NOT NULL,
                paused INTEGER NOT NULL DEFAULT 0,
                next_due REAL,
                run_requested INTEGER NOT NULL DEFAULT 0,
                last_run_at REAL,
                last_status TEXT,
                failures INTEGER NOT NULL DEFAULT 0,
                created_at REAL NOT NULL,
                updated_at REAL NOT NULL
            )
            """,
            "CREATE UNIQUE INDEX IF NOT EXISTS idx_gateway_cron_jobs_name "
            "ON gateway_cron_jobs(owner_session_key, name)",
            "CREATE INDEX IF NOT EXISTS idx_gateway_cron_jobs_user ON gateway_cron_jobs(owner_platform, owner_user_id)",
            # status: running -> ok | failed | interrupted. A row still 'running' when the daemon
            # starts was cut off by a crash (the answer, once stored, settles it in its transaction).
            """
            CREATE TABLE IF NOT EXISTS gateway_cron_runs (
                id INTEGER PRIMARY KEY,
                job_id TEXT NOT NULL,
                due_at REAL,
                started_at REAL NOT NULL,
                finished_at REAL,
                status TEXT NOT NULL,
                attempt INTEGER NOT NULL DEFAULT 1,
                missed INTEGER NOT NULL DEFAULT 0,
                session_id TEXT,
                ledger_id INTEGER,
                error TEXT
            )
            """,
            "CREATE INDEX IF NOT EXISTS idx_gateway_cron_runs_job ON gateway_cron_runs(job_id, started_at)",
            "CREATE INDEX IF NOT EXISTS idx_gateway_cron_runs_running ON gateway_cron_runs(status) "
            "WHERE status = 'running'",
        ),
    ),
)

GATEWAY_MIGRATIONS: tuple[Migration, ...] = _EARLY + LATER_MIGRATIONS
