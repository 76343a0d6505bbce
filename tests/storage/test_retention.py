"""Media retention: which rows and files a pass removes (the pure plan), and the pass as the
daemon runs it on a real state.db and media directory."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from storage import AttachmentRow, MediaStore, RetentionPlan, StateStore, attachments, ops, retention_plan

DAY = 86400.0
NOW = 1_800_000_000.0


def row(id: int, sha: str, *, days_old: float, size: int = 100, session: str = "s1") -> AttachmentRow:
    return AttachmentRow(id, id, session, "image", "image/jpeg", None, size, sha * 64, None, NOW - days_old * DAY)


def test_rows_older_than_the_age_limit_go_and_a_file_goes_with_its_last_row() -> None:
    rows = [row(1, "a", days_old=40), row(2, "b", days_old=40), row(3, "b", days_old=2), row(4, "c", days_old=29)]
    plan = retention_plan(rows, now=NOW, retention_days=30, max_total_bytes=None)
    # "b" was sent again two days ago: its old row goes, its file stays for the new one.
    assert plan == RetentionPlan(row_ids=(1, 2), sha256s=("a" * 64,), freed_bytes=100, kept_bytes=200)


def test_over_the_size_limit_the_least_recently_used_files_go_with_all_their_rows() -> None:
    rows = [row(1, "a", days_old=10, size=400), row(2, "b", days_old=9, size=300),
            row(3, "a", days_old=1, size=400),  # "a" used yesterday: newer than "b"
            row(4, "c", days_old=5, size=200), row(5, "d", days_old=3, size=100)]
    plan = retention_plan(rows, now=NOW, retention_days=30, max_total_bytes=600)
    # 1000 bytes in four files: "b" (last used 9 days ago) goes, then "c" (5 days): 500 left.
    assert plan.row_ids == (2, 4)
    assert plan.sha256s == ("b" * 64, "c" * 64)
    assert (plan.freed_bytes, plan.kept_bytes) == (500, 500)


def test_limits_that_are_met_or_off_remove_nothing() -> None:
    rows = [row(1, "a", days_old=400, size=10**9)]
    assert retention_plan(rows, now=NOW, retention_days=None, max_total_bytes=None) == RetentionPlan((), (), 0, 10**9)
    assert retention_plan(rows, now=NOW, retention_days=500, max_total_bytes=10**9).row_ids == ()
    assert retention_plan([], now=NOW, retention_days=1, max_total_bytes=0) == RetentionPlan((), (), 0, 0)


def test_a_zero_size_limit_removes_everything() -> None:
    rows = [row(1, "a", days_old=1), row(2, "b", days_old=2)]
    plan = retention_plan(rows, now=NOW, retention_days=30, max_total_bytes=0)
    assert plan.row_ids == (2, 1) and plan.kept_bytes == 0 and plan.freed_bytes == 200


async def test_a_retention_pass_on_a_real_store(store: StateStore, tmp_path: Path) -> None:
    media = MediaStore(tmp_path / "home" / "media")
    old, recent, shared = (await media.put_bytes(b"old photo"), await media.put_bytes(b"recent photo"),
                           await media.put_bytes(b"sent then and now"))
    await store.write(lambda c: ops.create_session(c, "s1", "telegram", started_at=NOW - 60 * DAY))

    def message(conn: sqlite3.Connection, blob_sha: str, size: int, days_old: float) -> None:
        at = NOW - days_old * DAY
        mid = ops.append_message(conn, "s1", "user", "[image]", timestamp=at)
        attachments.add(conn, message_id=mid, session_id="s1", kind="image", mime="image/jpeg", name=None,
                        size=size, sha256=blob_sha, description=None, created_at=at)

    for blob, days in ((old, 45), (shared, 45), (shared, 1), (recent, 1)):
        await store.write(lambda c, b=blob, d=days: message(c, b.sha256, b.size, d))
    media.release(old.sha256, recent.sha256, shared.sha256)

    plan = retention_plan(await store.read(attachments.all_rows), now=NOW, retention_days=30, max_total_bytes=None)
    let_go = await store.write(lambda c: attachments.delete_rows(c, plan.row_ids))
    assert sorted(let_go) == sorted([old.sha256, shared.sha256])

    async def referenced(digests: set[str]) -> set[str]:
        return await store.read(lambda c: attachments.referenced(c, digests))

    assert await media.sweep(referenced, only=let_go) == (1, old.size)
    assert [b.sha256 for b in await media.list_blobs()] == sorted([recent.sha256, shared.sha256])
    assert plan.sha256s == (old.sha256,)
