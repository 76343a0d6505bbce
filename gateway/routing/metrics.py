"""Prometheus metrics on a registry of our own (never the library's global one).

Two kinds: events counted where they happen (messages in and out, turn
latency, deliveries re-sent after a restart) and state read at scrape time
from objects that already keep it (the writer's stats, the lanes, the
runner's adapter states, the size of the WAL). Reading at scrape time keeps
the hot paths free of metric bookkeeping and can never drift from the source.

No label carries a session key, chat id or user id: the scrape may leave the
machine (and /metrics is open on loopback). Lanes are labelled by rank.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from adapters.base import AdapterStateView
from gateway.routing.lanes import Lanes
from storage import Store

__all__ = ["CONTENT_TYPE", "GatewayMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: lanes listed one by one in hermes_lane_queue_depth, by rank: the deepest ones
TOP_LANES = 5
CRON_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 3600)
TURN_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300)


def _lane_depths(lanes: Lanes) -> list[int]:
    """The queue depth of every lane with a queue, deepest first (which lane each is stays private)."""
    keys: Iterable[str] = getattr(lanes, "_lanes", {}).keys()
    return sorted((n for n in (lanes.waiting(k) for k in list(keys)) if n > 0), reverse=True)


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


class _LiveCollector(Collector):
    """State read from the daemon's own objects at every scrape."""

    def __init__(self, source: Callable[[], _Live | None]) -> None:
        self._source = source

    def collect(self) -> Iterator[Metric]:
        live = self._source()
        if live is None:
            return
        yield from live.writer_metrics()
        yield from live.lane_metrics()
        yield from live.adapter_metrics()


class _Live:
    def __init__(self, store: Store, lanes: Lanes, adapter_states: Mapping[str, AdapterStateView],
                 adapters: Mapping[str, Any]) -> None:
        self.store = store
        self.lanes = lanes
        self.adapter_states = adapter_states
        self.adapters = adapters

    def writer_metrics(self) -> Iterator[Metric]:
        st = self.store.writer.stats
        yield GaugeMetricFamily("hermes_writer_queue_depth", "Writes waiting for the writer task.",
                                value=st.queue_depth)
        yield CounterMetricFamily("hermes_writer_commits", "Transactions committed by the writer.",
                                  value=st.commits)
        yield CounterMetricFamily("hermes_writer_ops", "Write operations committed.", value=st.committed_ops)
        yield CounterMetricFamily("hermes_writer_failed_ops", "Write operations that failed.",
                                  value=st.failed_ops)
        yield CounterMetricFamily("hermes_writer_busy_retries",
                                  "SQLITE_BUSY retries (another process held the lock).", value=st.busy_retries)
        yield CounterMetricFamily("hermes_writer_busy_failures",
                                  "Writes that failed after the SQLITE_BUSY retry budget.", value=st.busy_failures)
        yield CounterMetricFamily("hermes_fts_indexed_messages",
                                  "Messages indexed for search after their commit.", value=st.indexed_rows)
        yield GaugeMetricFamily("hermes_fts_unindexed_messages",
                                "Committed messages the search indexer has not reached yet.",
                                value=st.index_pending)
        conversion = st.fts_conversion
        yield GaugeMetricFamily("hermes_fts_conversion_ratio",
                                "The move to the compact search layout: messages done / all (1 when settled).",
                                value=1.0 if conversion is None else conversion[0] / max(1, conversion[1]))
        checkpoints = CounterMetricFamily("hermes_writer_checkpoints", "WAL checkpoints run, by mode.",
                                          labels=["mode"])
        for mode, n in sorted(st.checkpoints.items()):
            checkpoints.add_metric([mode], n)
        yield checkpoints
        last = st.last_checkpoint
        yield GaugeMetricFamily("hermes_writer_last_checkpoint_busy",
                                "1 if the last checkpoint could not finish because a reader held the log.",
                                value=1 if last is not None and last.busy else 0)
        batch = GaugeMetricFamily("hermes_writer_batch_size",
                                  "Operations per commit over the recent commits.", labels=["stat"])
        commit = GaugeMetricFamily("hermes_writer_commit_seconds",
                                   "Commit latency over the recent commits.", labels=["stat"])
        sizes = list(st.recent_batch_sizes)
        times = [ms / 1000.0 for ms in st.recent_commit_ms]
        for family, values in ((batch, sizes), (commit, times)):
            if values:
                family.add_metric(["p50"], float(statistics.median(values)))
                family.add_metric(["p99"], float(sorted(values)[int(0.99 * (len(values) - 1))]))
                family.add_metric(["max"], float(max(values)))
        yield batch
        yield commit
        path = self.store.path
        if path is not None:  # a database server's size is its own business (its own monitoring)
            yield GaugeMetricFamily("hermes_wal_bytes", "Size of state.db-wal.",
                                    value=_size(path.with_name(path.name + "-wal")))
            yield GaugeMetricFamily("hermes_db_bytes", "Size of state.db.", value=_size(path))

    def lane_metrics(self) -> Iterator[Metric]:
        yield GaugeMetricFamily("hermes_turns_running", "Agent turns running now.", value=self.lanes.running)
        yield GaugeMetricFamily("hermes_turns_waiting", "Messages queued behind a running turn.",
                                value=self.lanes.total_waiting)
        depth = GaugeMetricFamily("hermes_lane_queue_depth",
                                  f"Queued messages of the {TOP_LANES} deepest lanes; rank 1 is the deepest.",
                                  labels=["rank"])
        depths = _lane_depths(self.lanes)
        for rank, n in enumerate(depths[:TOP_LANES], 1):
            depth.add_metric([str(rank)], n)
        yield depth
        yield GaugeMetricFamily("hermes_lanes_queued", "Lanes (sessions) with messages queued.", value=len(depths))

    def adapter_metrics(self) -> Iterator[Metric]:
        reconnects = CounterMetricFamily("hermes_adapter_reconnects",
                                         "Times the runner restarted an adapter's connection.", labels=["adapter"])
        up = GaugeMetricFamily("hermes_adapter_up", "1 while the adapter is connected.", labels=["adapter"])
        for name, st in sorted(self.adapter_states.items()):
            # Telegram restarts a stalled poll itself, without the runner: those count too.
            own = getattr(self.adapters.get(name), "stall_restarts", 0)
            reconnects.add_metric([name], st.restarts + (own if isinstance(own, int) else 0))
            up.add_metric([name], 1 if st.state == "connected" else 0)
        yield reconnects
        yield up


class GatewayMetrics:
    """The daemon's metrics; ``attach`` once the objects it reads exist, ``render`` for /metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.messages_in = Counter("hermes_messages_in", "Inbound messages from each platform.",
                                   ["platform"], registry=r)
        self.messages_out = Counter("hermes_messages_out", "Messages (chunks) sent to each platform.",
                                    ["platform"], registry=r)
        self.send_failures = Counter("hermes_send_failures", "Sends a platform refused or that failed.",
                                     ["platform"], registry=r)
        self.deliveries_retried = Counter("hermes_deliveries_retried",
                                          "Replies sent again after a restart cut them off.", ["platform"],
                                          registry=r)
        self.turn_seconds = Histogram("hermes_turn_seconds", "Agent turn latency (model and tools).",
                                      buckets=TURN_BUCKETS, registry=r)
        self.cron_runs = Counter("hermes_cron_runs", "Runs of scheduled jobs, by how they ended "
                                 "(ok, failed, interrupted).", ["status"], registry=r)
        self.cron_lateness = Histogram("hermes_cron_lateness_seconds",
                                       "From a scheduled job's due time to the start of its run.",
                                       buckets=CRON_BUCKETS, registry=r)
        for status in ("ok", "failed", "interrupted"):
            self.cron_runs.labels(status)
        self._live: _Live | None = None
        r.register(_LiveCollector(lambda: self._live))

    def attach(self, store: Store, lanes: Lanes, adapter_states: Mapping[str, AdapterStateView],
               adapters: Mapping[str, Any]) -> None:
        self._live = _Live(store, lanes, adapter_states, adapters)
        # Every platform's series exists from the start at 0, so rate() and absence alerts work at once.
        for platform in adapters:
            for counter in (self.messages_in, self.messages_out, self.send_failures, self.deliveries_retried):
                counter.labels(platform)

    def render(self) -> bytes:
        return generate_latest(self.registry)
