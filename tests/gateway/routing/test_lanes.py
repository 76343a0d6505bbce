"""gateway.routing.lanes.Lanes on its own: ordering, bounds, cancellation, drain.

Jobs are driven by asyncio events, so every interleaving the tests rely on is
forced, not hoped for; waits are bounded by timeouts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from gateway.errors import LaneFullError, LanesClosedError
from gateway.routing.lanes import Lanes

TIMEOUT = 5.0


async def until(predicate: Callable[[], bool], timeout: float = TIMEOUT) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.001)

    await asyncio.wait_for(poll(), timeout)


async def settle(rounds: int = 50) -> None:
    """Give every ready task many chances to run (no wall-clock assumptions)."""
    for _ in range(rounds):
        await asyncio.sleep(0)


@dataclass
class Board:
    """Records what jobs do; each job can be held on its own gate."""

    events: list[tuple[str, str]] = field(default_factory=list)
    gates: dict[str, asyncio.Event] = field(default_factory=dict)
    active: dict[str, int] = field(default_factory=dict)  # per key, right now
    max_active: dict[str, int] = field(default_factory=dict)  # per key, ever
    total_active: int = 0
    max_total: int = 0
    dropped: list[str] = field(default_factory=list)

    def gate(self, name: str) -> asyncio.Event:
        return self.gates.setdefault(name, asyncio.Event())

    def job(
        self, key: str, name: str, *, hold: bool = False, fail: BaseException | None = None
    ) -> Callable[[], Coroutine[Any, Any, None]]:
        gate = self.gate(name) if hold else None

        async def run() -> None:
            self.events.append(("start", name))
            self.active[key] = self.active.get(key, 0) + 1
            self.max_active[key] = max(self.max_active.get(key, 0), self.active[key])
            self.total_active += 1
            self.max_total = max(self.max_total, self.total_active)
            try:
                if gate is not None:
                    await gate.wait()
                await asyncio.sleep(0)
                if fail is not None:
                    raise fail
                self.events.append(("end", name))
            except asyncio.CancelledError:
                self.events.append(("cancelled", name))
                raise
            finally:
                self.active[key] -= 1
                self.total_active -= 1

        return run

    def on_drop(self, name: str) -> Callable[[], Coroutine[Any, Any, None]]:
        async def drop() -> None:
            self.dropped.append(name)

        return drop

    def started(self, name: str) -> bool:
        return ("start", name) in self.events

    def ended(self, name: str) -> bool:
        return ("end", name) in self.events

    def names(self, kind: str) -> list[str]:
        return [n for k, n in self.events if k == kind]


async def test_same_key_never_overlaps_and_runs_fifo() -> None:
    lanes, board = Lanes(max_concurrent=8, max_queued_per_key=100), Board()
    names = [f"j{i}" for i in range(6)]
    for name in names:
        lanes.submit("k", board.job("k", name, hold=True))
    for i, name in enumerate(names):
        await until(lambda name=name: board.started(name))
        await settle()
        # Only this one has started; the ones behind it wait however long it takes.
        assert board.names("start") == names[: i + 1]
        assert board.active["k"] == 1
        assert lanes.busy("k") and lanes.waiting("k") == len(names) - i - 1
        board.gate(name).set()
    await until(lambda: board.ended(names[-1]))
    assert board.events == [e for n in names for e in (("start", n), ("end", n))]
    assert board.max_active["k"] == 1
    await until(lambda: not lanes.busy("k"))


async def test_different_keys_run_concurrently_up_to_the_global_bound() -> None:
    lanes, board = Lanes(max_concurrent=3, max_queued_per_key=10), Board()
    keys = [f"k{i}" for i in range(6)]
    for key in keys:
        lanes.submit(key, board.job(key, key, hold=True))
    await until(lambda: len(board.names("start")) == 3)
    await settle()
    # Three different keys run at once; the other three wait for a slot.
    assert len(board.names("start")) == 3 and board.total_active == 3
    assert lanes.running == 3
    first = board.names("start")
    board.gate(first[0]).set()
    await until(lambda: len(board.names("start")) == 4)
    await settle()
    assert board.total_active == 3
    for key in keys:
        board.gate(key).set()
    await until(lambda: len(board.names("end")) == len(keys))
    assert board.max_total == 3
    assert sorted(board.names("end")) == sorted(keys)
    assert lanes.running == 0 and lanes.total_waiting == 0


async def test_different_keys_do_not_wait_for_each_other() -> None:
    lanes, board = Lanes(max_concurrent=4, max_queued_per_key=10), Board()
    lanes.submit("slow", board.job("slow", "slow", hold=True))
    lanes.submit("fast", board.job("fast", "fast"))
    await until(lambda: board.ended("fast"))
    assert not board.ended("slow")
    board.gate("slow").set()
    await until(lambda: board.ended("slow"))


async def test_ack_flag_once_per_burst() -> None:
    lanes, board = Lanes(max_concurrent=4, max_queued_per_key=10), Board()
    assert lanes.submit("k", board.job("k", "a", hold=True)) == (0, False)
    await until(lambda: board.started("a"))
    assert lanes.submit("k", board.job("k", "b")) == (1, True)
    assert lanes.submit("k", board.job("k", "c")) == (2, False)
    assert lanes.submit("k", board.job("k", "d")) == (3, False)
    # Another key has its own burst.
    assert lanes.submit("other", board.job("other", "o1", hold=True)) == (0, False)
    await until(lambda: board.started("o1"))
    assert lanes.submit("other", board.job("other", "o2")) == (1, True)
    board.gate("a").set()
    board.gate("o1").set()
    await until(lambda: board.ended("d") and board.ended("o2"))
    await until(lambda: not lanes.busy("k"))
    # The burst is over: the next wait is acknowledged again, once.
    assert lanes.submit("k", board.job("k", "e", hold=True)) == (0, False)
    await until(lambda: board.started("e"))
    assert lanes.submit("k", board.job("k", "f")) == (1, True)
    assert lanes.submit("k", board.job("k", "g")) == (2, False)
    board.gate("e").set()
    await until(lambda: board.ended("g"))


async def test_lane_full_beyond_max_queued_per_key() -> None:
    lanes, board = Lanes(max_concurrent=4, max_queued_per_key=2), Board()
    lanes.submit("k", board.job("k", "running", hold=True))
    await until(lambda: board.started("running"))
    lanes.submit("k", board.job("k", "q1", hold=True))
    lanes.submit("k", board.job("k", "q2"))
    with pytest.raises(LaneFullError):
        lanes.submit("k", board.job("k", "q3"))
    assert lanes.waiting("k") == 2
    # The bound is per key: another chat is unaffected.
    lanes.submit("other", board.job("other", "x"))
    await until(lambda: board.ended("x"))
    # Room again once the line moves.
    board.gate("running").set()
    await until(lambda: board.started("q1"))
    lanes.submit("k", board.job("k", "q4"))
    board.gate("q1").set()
    await until(lambda: board.ended("q4"))
    assert board.names("end") == ["x", "running", "q1", "q2", "q4"]
    assert not board.started("q3")


async def test_cancel_running_cancels_only_the_running_job() -> None:
    lanes, board = Lanes(max_concurrent=4, max_queued_per_key=10), Board()
    lanes.submit("k", board.job("k", "long", hold=True))
    lanes.submit("k", board.job("k", "next1"))
    lanes.submit("k", board.job("k", "next2"))
    lanes.submit("other", board.job("other", "neighbour", hold=True))
    await until(lambda: board.started("long") and board.started("neighbour"))
    assert await lanes.cancel_running("k") is True
    await until(lambda: board.ended("next2"))
    assert ("cancelled", "long") in board.events
    assert board.names("end") == ["next1", "next2"]
    # The other key's running job was not touched.
    assert board.active["other"] == 1 and ("cancelled", "neighbour") not in board.events
    board.gate("neighbour").set()
    await until(lambda: board.ended("neighbour"))


async def test_cancel_running_on_an_idle_key_is_false() -> None:
    lanes, board = Lanes(max_concurrent=4, max_queued_per_key=10), Board()
    assert await lanes.cancel_running("nobody") is False
    lanes.submit("k", board.job("k", "a"))
    await until(lambda: board.ended("a") and not lanes.busy("k"))
    assert await lanes.cancel_running("k") is False


async def test_a_crashing_job_does_not_kill_the_lane() -> None:
    lanes, board = Lanes(max_concurrent=4, max_queued_per_key=10), Board()
    lanes.submit("k", board.job("k", "boom", fail=RuntimeError("job exploded")))
    lanes.submit("k", board.job("k", "after"))
    await until(lambda: board.ended("after"))
    assert board.names("start") == ["boom", "after"]
    await until(lambda: not lanes.busy("k"))
    # And a fresh submission on the same key still runs.
    lanes.submit("k", board.job("k", "later"))
    await until(lambda: board.ended("later"))


async def test_drain_lets_running_and_queued_finish_within_grace() -> None:
    lanes, board = Lanes(max_concurrent=4, max_queued_per_key=10), Board()
    lanes.submit("k", board.job("k", "running", hold=True), on_drop=board.on_drop("running"))
    lanes.submit("k", board.job("k", "queued1"), on_drop=board.on_drop("queued1"))
    lanes.submit("k", board.job("k", "queued2"), on_drop=board.on_drop("queued2"))
    lanes.submit("k2", board.job("k2", "other"), on_drop=board.on_drop("other"))
    await until(lambda: board.started("running"))
    drain = asyncio.create_task(lanes.drain(grace=60))
    await settle()
    assert not drain.done()
    with pytest.raises(LanesClosedError):
        lanes.submit("k", board.job("k", "late"))
    board.gate("running").set()
    cut = await asyncio.wait_for(drain, TIMEOUT)
    assert cut == 0
    assert board.dropped == []
    assert sorted(board.names("end")) == ["other", "queued1", "queued2", "running"]
    assert [n for n in board.names("end") if n != "other"] == ["running", "queued1", "queued2"]
    assert not board.started("late")


async def test_drain_deadline_drops_queued_and_cancels_running() -> None:
    lanes, board = Lanes(max_concurrent=4, max_queued_per_key=10), Board()
    lanes.submit("k1", board.job("k1", "stuck1", hold=True), on_drop=board.on_drop("stuck1"))
    lanes.submit("k1", board.job("k1", "waiting1"), on_drop=board.on_drop("waiting1"))
    lanes.submit("k1", board.job("k1", "waiting2"), on_drop=board.on_drop("waiting2"))
    lanes.submit("k2", board.job("k2", "stuck2", hold=True), on_drop=board.on_drop("stuck2"))
    lanes.submit("k3", board.job("k3", "quick"), on_drop=board.on_drop("quick"))
    await until(lambda: board.started("stuck1") and board.started("stuck2") and board.ended("quick"))
    cut = await asyncio.wait_for(lanes.drain(grace=0.2), TIMEOUT)
    assert cut == 4  # two queued, two running
    assert board.dropped == ["waiting1", "waiting2"]  # only what never started, in order
    assert not board.started("waiting1") and not board.started("waiting2")
    await until(lambda: ("cancelled", "stuck1") in board.events and ("cancelled", "stuck2") in board.events)
    assert board.total_active == 0
    with pytest.raises(LanesClosedError):
        lanes.submit("k1", board.job("k1", "after"))
    assert lanes.running == 0 and lanes.total_waiting == 0


async def test_drain_drops_a_job_waiting_for_a_global_slot() -> None:
    """A job whose lane has picked it up but that still waits for the global
    semaphore has not started: at the drain deadline it must go through its
    ``on_drop`` (so the platform can redeliver it), like any other queued job.
    """
    lanes, board = Lanes(max_concurrent=1, max_queued_per_key=10), Board()
    lanes.submit("k1", board.job("k1", "stuck", hold=True), on_drop=board.on_drop("stuck"))
    await until(lambda: board.started("stuck"))
    lanes.submit("k2", board.job("k2", "starved"), on_drop=board.on_drop("starved"))
    await settle()
    assert not board.started("starved")
    cut = await asyncio.wait_for(lanes.drain(grace=0.2), TIMEOUT)
    assert not board.started("starved")
    assert board.dropped == ["starved"]
    assert cut == 2


async def test_a_job_waiting_for_a_global_slot_counts_as_waiting() -> None:
    """/status and the "queued" acknowledgement must see a job that waits for a
    free slot: it is ahead of the next message of the same chat."""
    lanes, board = Lanes(max_concurrent=1, max_queued_per_key=10), Board()
    lanes.submit("k1", board.job("k1", "stuck", hold=True))
    await until(lambda: board.started("stuck"))
    lanes.submit("k2", board.job("k2", "first"))
    await settle()
    assert lanes.busy("k2")
    assert lanes.submit("k2", board.job("k2", "second")) == (1, True)
    board.gate("stuck").set()
    await until(lambda: board.ended("second"))
    assert board.names("end") == ["stuck", "first", "second"]


async def test_submit_after_drain_raises() -> None:
    lanes = Lanes(max_concurrent=1, max_queued_per_key=1)
    assert await asyncio.wait_for(lanes.drain(grace=1), TIMEOUT) == 0
    board = Board()
    with pytest.raises(LanesClosedError):
        lanes.submit("k", board.job("k", "x"))
    await settle()
    assert board.events == []
