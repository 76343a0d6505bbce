"""The writer's settings and its counters (what /status and the metrics show)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

CheckpointMode = Literal["PASSIVE", "TRUNCATE"]


@dataclass(frozen=True)
class WriterSettings:
    batch_limit: int = 512
    queue_limit: int = 10_000
    checkpoint_every_commits: int = 50
    checkpoint_every_seconds: float = 30.0
    idle_truncate_after: float = 1.0
    busy_timeout_ms: int = 50
    busy_retry_budget: float = 15.0
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    take_lock: bool = True
    #: how long a committed message may wait for the FTS indexer while writes keep
    #: coming; in idle time it is indexed after ``index_idle_after`` seconds anyway
    index_lag_max: float = 1.0
    index_idle_after: float = 0.02
    #: rows per indexing transaction when idle
    index_batch: int = 128
    #: rows indexed between two batches under load once rows are older than index_lag_max,
    #: in the next batch's transaction
    index_slice: int = 4


@dataclass
class CheckpointResult:
    mode: str
    busy: int
    log_frames: int
    checkpointed_frames: int
    at: float


@dataclass
class WriterStats:
    """Counters for /status and metrics. Read from the event loop only."""

    submitted: int = 0
    committed_ops: int = 0
    failed_ops: int = 0
    commits: int = 0
    replays: int = 0
    busy_retries: int = 0
    busy_failures: int = 0
    full_failures: int = 0
    checkpoints: dict[str, int] = field(default_factory=lambda: {"PASSIVE": 0, "TRUNCATE": 0})
    last_checkpoint: CheckpointResult | None = None
    max_batch: int = 0
    recent_batch_sizes: deque[int] = field(default_factory=lambda: deque(maxlen=1024))
    recent_commit_ms: deque[float] = field(default_factory=lambda: deque(maxlen=1024))
    queue_depth: int = 0
    #: (epoch seconds, what a person reads) of the last write the disk or the file refused: full,
    #: I/O error, read-only, corrupt. An op's own errors are not kept. Set on the writer's thread,
    #: as one tuple so the event loop never reads half of it.
    last_disk_fault: tuple[float, str] | None = None
    #: FTS indexer: rows indexed, rows waiting (after the last step), indexing transactions
    indexed_rows: int = 0
    index_pending: int = 0
    index_steps: int = 0
    #: the move to the external FTS layout: (messages done, of total), None when settled
    fts_conversion: tuple[int, int] | None = None
