"""File descriptors: how many a process has open, against its limit (``RLIMIT_NOFILE``).

Every connection, state.db file, model and platform socket is one; a daemon at its limit can
accept nothing and open nothing, so /readyz and ``doctor`` report the headroom. Counted from
``/proc/<pid>/fd`` (Linux; ``/dev/fd`` for this process elsewhere); ``None`` where unknown.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LOW_HEADROOM", "FdUsage", "fd_usage", "open_file_limit"]

#: under this share of the limit still free, the daemon is not ready
LOW_HEADROOM = 0.10


@dataclass(frozen=True)
class FdUsage:
    open: int
    #: the soft limit; None when unlimited
    limit: int | None

    @property
    def free_share(self) -> float:
        return 1.0 if self.limit is None else max(0, self.limit - self.open) / self.limit

    @property
    def low(self) -> bool:
        return self.free_share < LOW_HEADROOM

    def describe(self) -> str:
        if self.limit is None:
            return f"{self.open} file descriptors open (no limit)"
        return f"{self.open} of {self.limit} file descriptors open ({self.free_share:.0%} free)"


def open_file_limit(pid: int | None = None) -> int | None:
    """The soft ``RLIMIT_NOFILE`` of this process, or of ``pid`` (from /proc); None when unlimited
    or unreadable."""
    if pid is None or pid == os.getpid():
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        return None if soft == resource.RLIM_INFINITY else soft
    try:
        text = Path(f"/proc/{pid}/limits").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("Max open files"):
            soft_text = line[len("Max open files"):].split()[0]
            return int(soft_text) if soft_text.isdigit() else None
    return None


def _count_open(pid: int | None) -> int | None:
    for where in ((f"/proc/{pid}/fd",) if pid is not None else ("/proc/self/fd", "/dev/fd")):
        try:
            names = os.listdir(where)
        except OSError:
            continue
        # Listing this process's own directory opens one descriptor of its own, counted in the list.
        return len(names) - (1 if pid is None else 0)
    return None


def fd_usage(pid: int | None = None) -> FdUsage | None:
    """Open descriptors and the soft limit of this process (or of ``pid``); None when unreadable."""
    count = _count_open(None if pid == os.getpid() else pid)
    if count is None:
        return None
    return FdUsage(count, open_file_limit(pid))
