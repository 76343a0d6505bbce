"""Pairing's rows (``storage.pairing``) on both backends: codes kept only as keyed hashes, one
pending code per sender, wrong approvals counted to a lock, the allowlist and recorded owners
per bot account, revoke and forget; and on PostgreSQL, two nodes at once."""

from __future__ import annotations

import asyncio
import hashlib
from functools import partial
from typing import Any

from storage.postgres import PgStore

from ._people import _pg_server_before_the_loop, rows  # noqa: F401
from .conftest import Db

T0 = 1_800_000_000.0
TTL = 3600.0


def h(code: str) -> bytes:
    return hashlib.blake2b(code.encode(), key=b"k" * 32, digest_size=32).digest()


async def add(db: Db, user: str, code: str, *, platform: str = "telegram", account: str = "bot-A",
              now: float = T0) -> int:
    code_id: int = await db.write(partial(db.m.pairing.add_code, platform=platform, account_id=account,
                                          user_id=user, user_name=f"name-{user}", chat_id=f"dm-{user}",
                                          code_hash=h(code), now=now, ttl=TTL))
    return code_id


async def test_a_code_is_found_by_its_hash_only_and_the_code_is_never_stored(db: Db) -> None:
    code_id = await add(db, "u1", "ABCD2345")
    row = await db.read(partial(db.m.pairing.code_by_hash, code_hash=h("ABCD2345"))) if db.name == "sqlite" \
        else await db.write(partial(db.m.pairing.code_by_hash, code_hash=h("ABCD2345")))
    assert row == db.m.pairing.PairingCode(code_id, "telegram", "bot-A", "u1", "name-u1", "dm-u1", T0, T0 + TTL, 0,
                                           "pending")
    assert await db.write(partial(db.m.pairing.code_by_hash, code_hash=h("ZZZZZZZZ"))) is None
    stored = await rows(db, "SELECT code_hash FROM gateway_pairing_codes")
    assert [bytes(r[0]) for r in stored] == [h("ABCD2345")]
    everything = await rows(db, "SELECT * FROM gateway_pairing_codes")
    assert "ABCD2345" not in repr(everything)
    assert await db.read(partial(db.m.pairing.latest_request, platform="telegram", account_id="bot-A",
                                 user_id="u1")) == T0
    assert await db.read(partial(db.m.pairing.latest_request, platform="telegram", account_id="bot-B",
                                 user_id="u1")) is None


async def test_a_new_code_replaces_the_pending_one_and_pending_is_scoped_and_unexpired(db: Db) -> None:
    first = await add(db, "u1", "AAAA2222")
    await add(db, "u2", "BBBB2222", now=T0 + 1)
    await add(db, "d1", "CCCC2222", platform="discord", account="app-1", now=T0 + 2)
    newer = await add(db, "u1", "DDDD2222", now=T0 + 3)
    replaced = await db.write(partial(db.m.pairing.code_by_hash, code_hash=h("AAAA2222")))
    assert replaced is not None and (replaced.id, replaced.status) == (first, "replaced")
    waiting = await db.read(partial(db.m.pairing.pending, now=T0 + 10))
    assert [(c.user_id, c.platform) for c in waiting] == [("u2", "telegram"), ("d1", "discord"), ("u1", "telegram")]
    tg = await db.read(partial(db.m.pairing.pending, now=T0 + 10, platform="telegram", account_id="bot-A"))
    assert [c.id for c in tg] == [tg[0].id, newer]
    assert await db.read(partial(db.m.pairing.pending, now=T0 + 10, platform="telegram", account_id="bot-B")) == []
    # Expired codes wait no more, but are still recognised until swept.
    assert await db.read(partial(db.m.pairing.pending, now=T0 + 3 + TTL)) == []
    assert await db.write(partial(db.m.pairing.sweep, older_than=T0 + 2)) == 2
    assert await db.write(partial(db.m.pairing.code_by_hash, code_hash=h("BBBB2222"))) is None
    assert await db.write(partial(db.m.pairing.code_by_hash, code_hash=h("DDDD2222"))) is not None


async def test_wrong_approvals_lock_pending_codes_and_settled_codes_stay_settled(db: Db) -> None:
    a = await add(db, "u1", "AAAA2222")
    b = await add(db, "u2", "BBBB2222")
    await db.write(partial(db.m.pairing.settle, code_id=b, status="denied"))
    for _ in range(4):
        assert await db.write(partial(db.m.pairing.add_failures, code_ids=[a, b], lock_after=5)) == []
    assert await db.write(partial(db.m.pairing.add_failures, code_ids=[a, b, 999], lock_after=5)) == [a]
    got = await db.write(partial(db.m.pairing.code_by_hash, code_hash=h("AAAA2222")))
    assert got is not None and (got.failures, got.status) == (5, "locked")
    denied = await db.write(partial(db.m.pairing.code_by_hash, code_hash=h("BBBB2222")))
    assert denied is not None and (denied.failures, denied.status) == (0, "denied")
    assert await db.write(partial(db.m.pairing.add_failures, code_ids=[a], lock_after=5)) == []


async def test_allowlist_and_owners_per_bot_account_revoke_and_forget(db: Db) -> None:
    await db.write(partial(db.m.pairing.allow, platform="telegram", account_id="bot-A", user_id="u1",
                           user_name="one", approved_by="cli", now=T0))
    await db.write(partial(db.m.pairing.allow, platform="telegram", account_id="bot-A", user_id="u1",
                           user_name="one again", approved_by="o", now=T0 + 5))
    await db.write(partial(db.m.pairing.allow, platform="discord", account_id="app-1", user_id="u1",
                           user_name=None, approved_by=None, now=T0 + 1))
    await db.write(partial(db.m.pairing.allow, platform="telegram", account_id="bot-A", user_id="u2",
                           user_name="two", approved_by="o", now=T0 + 2))
    allowed = await db.read(db.m.pairing.allowed)
    assert allowed == [db.m.pairing.AllowedUser("discord", "app-1", "u1", None, None, T0 + 1),
                       db.m.pairing.AllowedUser("telegram", "bot-A", "u2", "two", "o", T0 + 2),
                       db.m.pairing.AllowedUser("telegram", "bot-A", "u1", "one again", "o", T0 + 5)]
    for now in (T0, T0 + 9):
        await db.write(partial(db.m.pairing.record_owner, platform="telegram", account_id="bot-A", user_id="u1",
                               now=now))
    await db.write(partial(db.m.pairing.record_owner, platform="Telegram", account_id="bot-B", user_id="u1",
                           now=T0 + 3))
    owners = await db.read(db.m.pairing.owners)
    # Binary order of the platform (upper case first), the first record of each kept.
    assert owners == [db.m.pairing.RecordedOwner("Telegram", "bot-B", "u1", T0 + 3),
                      db.m.pairing.RecordedOwner("telegram", "bot-A", "u1", T0)]

    assert await db.write(partial(db.m.pairing.revoke, platform="telegram", user_id="u1")) == (1, 1)
    assert await db.write(partial(db.m.pairing.revoke, platform="telegram", user_id="nobody")) == (0, 0)
    assert [u.user_id for u in await db.read(db.m.pairing.allowed)] == ["u1", "u2"]  # discord's u1 stays

    await add(db, "u2", "BBBB2222")
    assert await db.write(partial(db.m.pairing.forget_user, platform="telegram", user_id="u2")) == 2
    left = await rows(db, "SELECT platform, user_id FROM gateway_pairing_codes UNION ALL "
                          "SELECT platform, user_id FROM gateway_pairing_allowed UNION ALL "
                          "SELECT platform, user_id FROM gateway_owners")
    assert sorted(left) == [("Telegram", "u1"), ("discord", "u1")]


async def test_two_nodes_pairing_at_once_keep_one_code_per_sender_and_settle_a_code_once(pg_url: str) -> None:
    import storage.postgres as pg

    a, b = PgStore(pg_url, max_size=4), PgStore(pg_url, max_size=4)
    await asyncio.gather(a.open(), b.open())
    try:
        # One sender's DMs reach both nodes at once, many times: one pending code is left.
        await asyncio.gather(*(node.write(partial(pg.pairing.add_code, platform="telegram", account_id="bot-A",
                                                  user_id="u1", user_name=None, chat_id="dm", code_hash=h(f"C{i}"),
                                                  now=T0 + i, ttl=TTL))
                               for i in range(20) for node in (a, b)))
        assert len(await a.read(partial(pg.pairing.pending, now=T0))) == 1

        code_id = await a.write(partial(pg.pairing.add_code, platform="telegram", account_id="bot-A", user_id="u2",
                                        user_name=None, chat_id="dm", code_hash=h("APPROVE1"), now=T0, ttl=TTL))

        def settle_once(status: str, conn: Any) -> bool:
            row = pg.pairing.code_by_hash(conn, h("APPROVE1"))
            if row is None or row.status != "pending":
                return False
            pg.pairing.settle(conn, row.id, status)
            return True

        outcomes = await asyncio.gather(*(node.write(partial(settle_once, status))
                                          for _ in range(5) for node, status in ((a, "approved"), (b, "denied"))))
        assert outcomes.count(True) == 1
        final = await a.read(lambda c: c.execute("SELECT status FROM gateway_pairing_codes WHERE id = %s",
                                                 (code_id,)).fetchone())
        assert final is not None and final[0] in ("approved", "denied")
    finally:
        await asyncio.gather(a.close(), b.close())
