"""Build a state.db exactly as the gateway left it before it had its own schema counter.

That release (commit f53571a) counted its own steps 12..14 on the reference's
``schema_version`` and keyed Discord and Slack threads as
``agent:main:<platform>:thread:<chat>:<thread>``. The schema is
``gateway_v14_schema.sql``, dumped from a file that release created; the rows
below are what its code wrote for a few chats (a Discord thread with a live
session, a Slack thread, a Telegram topic and a DM), in every table that holds
a session key.

The tests never trust these constants for expected values beyond the keys:
they read every row back before upgrading the file.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

SCHEMA_SQL = Path(__file__).with_name("gateway_v14_schema.sql")
RELEASED_COUNTER = 14

DISCORD_THREAD_OLD = "agent:main:discord:thread:1100:1200"
DISCORD_THREAD_NEW = "agent:main:discord:group:1100:1200"
# Per-user threads (thread_sessions_per_user) append the user; an id with ':' stays escaped.
SLACK_THREAD_OLD = "agent:main:slack:thread:C042:1714000000.000100:U7"
SLACK_THREAD_NEW = "agent:main:slack:group:C042:1714000000.000100:U7"
ESCAPED_OLD = "agent:main:slack:thread:C%3A1:17.5"
ESCAPED_NEW = "agent:main:slack:group:C%3A1:17.5"
# Keys the old release already wrote in the documented format: left alone.
TELEGRAM_TOPIC = "agent:main:telegram:group:-1002285219667:17585"
TELEGRAM_DM = "agent:main:telegram:dm:99"
UNCHANGED = (TELEGRAM_TOPIC, TELEGRAM_DM)
RENAMED = {DISCORD_THREAD_OLD: DISCORD_THREAD_NEW, SLACK_THREAD_OLD: SLACK_THREAD_NEW, ESCAPED_OLD: ESCAPED_NEW}

DISCORD_SESSION = "20260101_100000_d15c0001"
SLACK_SESSION = "20260101_100000_5ac00001"
ESCAPED_SESSION = "20260101_100000_5ac00002"
TOPIC_SESSION = "20260101_100000_7e1e0001"
DM_SESSION = "20260101_100000_7e1e0002"
OLD_DISCORD_SESSION = "20251201_100000_d15c0000"  # the thread's session before a /new

# (key, session, platform, chat_id, chat_type, thread_id, user_id)
_INDEX = (
    (DISCORD_THREAD_OLD, DISCORD_SESSION, "discord", "1100", "thread", "1200", "alice"),
    (SLACK_THREAD_OLD, SLACK_SESSION, "slack", "C042", "thread", "1714000000.000100", "U7"),
    (ESCAPED_OLD, ESCAPED_SESSION, "slack", "C:1", "thread", "17.5", "U8"),
    (TELEGRAM_TOPIC, TOPIC_SESSION, "telegram", "-1002285219667", "group", "17585", "42"),
    (TELEGRAM_DM, DM_SESSION, "telegram", "99", "dm", None, "99"),
)


def build_release_db(path: Path | str, *, now: float) -> Path:
    """Create ``path`` as the release with ``schema_version`` 14 left it; activity at ``now``."""
    path = Path(path)
    if path.exists():
        raise FileExistsError(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(SCHEMA_SQL.read_text())
        conn.execute("BEGIN")
        conn.execute("INSERT INTO schema_version(version) VALUES (?)", (RELEASED_COUNTER,))
        sessions = [(OLD_DISCORD_SESSION, "discord", "alice", now - 7200, now - 3600, "new_session")]
        sessions += [(sid, platform, user, now - 600, None, None) for _, sid, platform, _, _, _, user in _INDEX]
        for sid, platform, user, started, ended, reason in sessions:
            conn.execute("INSERT INTO sessions (id, source, user_id, started_at, ended_at, end_reason) "
                         "VALUES (?, ?, ?, ?, ?, ?)", (sid, platform, user, started, ended, reason))
            conn.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'user', ?, ?)",
                         (sid, f"hello from {sid}", started + 1))
            conn.execute("INSERT INTO messages (session_id, role, content, timestamp) VALUES (?, 'assistant', ?, ?)",
                         (sid, f"answer in {sid}", started + 2))
        for key, sid, platform, chat, chat_type, thread, user in _INDEX:
            conn.execute("INSERT INTO gateway_session_index (session_key, session_id, platform, chat_id, chat_type, "
                         "thread_id, user_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (key, sid, platform, chat, chat_type, thread, user, now - 600, now - 500))
            conn.execute("INSERT INTO gateway_session_bindings (session_key, session_id, platform, user_id, "
                         "first_bound_at) VALUES (?, ?, ?, ?, ?)", (key, sid, platform, user, now - 600))
            conn.execute("INSERT INTO gateway_outbound (session_key, session_id, platform, chat_id, thread_id, text, "
                         "status, attempts, created_at, sent_at) VALUES (?, ?, ?, ?, ?, 'answer', 'sent', 1, ?, ?)",
                         (key, sid, platform, chat, thread, now - 499, now - 498))
            conn.execute("INSERT INTO state_meta (key, value) VALUES (?, ?)",
                         (f"learning:{key}", '{"turns_since_memory": 3, "iters_since_skill": 5}'))
        # The thread's earlier session (before /new) is still the thread's: /resume may pick it.
        conn.execute("INSERT INTO gateway_session_bindings (session_key, session_id, platform, user_id, "
                     "first_bound_at) VALUES (?, ?, 'discord', 'alice', ?)",
                     (DISCORD_THREAD_OLD, OLD_DISCORD_SESSION, now - 7200))
        conn.execute("INSERT INTO gateway_pending_titles (session_key, title, created_at) VALUES (?, ?, ?)",
                     (SLACK_THREAD_OLD, "Quarterly numbers", now - 100))
        conn.execute("INSERT INTO gateway_outbound (session_key, session_id, platform, chat_id, thread_id, text, "
                     "status, created_at) VALUES (?, ?, 'discord', '1100', '1200', 'not yet sent', 'pending', ?)",
                     (DISCORD_THREAD_OLD, DISCORD_SESSION, now - 10))
        # A terminal session handed off into a Slack thread (the target key is the thread's).
        conn.execute("INSERT INTO gateway_handoffs (session_id, source_key, source_platform, target_platform, "
                     "target_chat_id, target_thread_id, target_key, state, created_at, updated_at) "
                     "VALUES (?, 'agent:main:cli:dm:t-1a2b3c', 'cli', 'slack', 'C042', '1714000000.000100', ?, "
                     "'completed', ?, ?)", (SLACK_SESSION, SLACK_THREAD_OLD, now - 900, now - 890))
        conn.execute("INSERT INTO state_meta (key, value) VALUES ('last_auto_prune', ?)", (repr(now - 86400),))
        conn.execute("COMMIT")
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(RELEASED_COUNTER,)]
    finally:
        conn.close()
    return path
