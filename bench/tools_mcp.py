"""MCP benchmark: what one tool call costs through ``McpManager`` over stdio.

The server is the suite's own (``tests/fakes/mcp_server.py``, the official SDK's ``MCPServer``)
as a child process; its ``noop`` tool does nothing and returns an empty text. Two legs, one after
the other, each with its own server process:

* raw: a bare SDK ``ClientSession`` over ``stdio_client``: ``session.call_tool("noop", {})``;
* ours: the same call as an agent makes it, through the ``Tool`` that ``McpManager.tools()``
  offers (``mcp_bench_noop``): the manager's connection lookup, the per-call timeout, the
  result turned into text, the secret scrub.

Each leg warms up with ``WARMUP`` calls, then times ``CALLS`` calls one after another
(``BENCH_SCALE`` scales them) with ``time.perf_counter_ns``.

``tools.mcp_call_overhead_ms`` = p50 of our leg: the whole round trip of a no-op call (both
processes' JSON-RPC work and the pipe), since that is what a model's tool call waits for.
Target: <= 5 ms. ``tools.mcp_raw_p50_ms`` is the bare SDK's p50 for comparison; the difference
is what our layer adds.
"""

from __future__ import annotations

import asyncio
import logging
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog
from mcp import ClientSession, StdioServerParameters, stdio_client

from core.tools.mcp import McpManager, McpServerSpec

SCALE = float(os.environ.get("BENCH_SCALE", "1"))
WARMUP = 50
CALLS = max(50, int(1000 * SCALE))
TARGET_MS = 5.0
SERVER = str(Path(__file__).resolve().parents[1] / "tests" / "fakes" / "mcp_server.py")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _time(call: Callable[[], Awaitable[Any]]) -> list[float]:
    for _ in range(WARMUP):
        await call()
    samples: list[float] = []
    for _ in range(CALLS):
        started = time.perf_counter_ns()
        await call()
        samples.append((time.perf_counter_ns() - started) / 1e6)
    return samples


async def _raw() -> list[float]:
    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    with open(os.devnull, "w") as quiet:  # the server's request log is not the bench's output
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            return await _time(lambda: session.call_tool("noop", {}))


async def _ours() -> list[float]:
    manager = McpManager([McpServerSpec("bench", command=sys.executable, args=(SERVER,), timeout=30)])
    await manager.start()
    try:
        if not await manager.wait_ready(60):
            raise RuntimeError(f"the MCP server did not start: {manager.status()}")
        [tool] = [t for t in manager.tools() if t.name == "mcp_bench_noop"]
        return await _time(lambda: tool.handler({}, None))  # type: ignore[arg-type]
    finally:
        await manager.aclose()


async def _run() -> int:
    # The manager's start and ready lines are not figures.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    print(f"Python {'.'.join(map(str, sys.version_info[:3]))}, {os.cpu_count()} CPUs, BENCH_SCALE={SCALE:g}; "
          f"{CALLS} no-op calls per leg after {WARMUP} warm-up calls, stdio, one call at a time; "
          f"load average {os.getloadavg()[0]:.2f}")
    raw = await _raw()
    ours = await _ours()
    for name, samples in (("raw SDK ClientSession", raw), ("McpManager tool", ours)):
        print(f"  {name:<22} p50 {pct(samples, 0.5):6.3f}  p90 {pct(samples, 0.9):6.3f}  "
              f"p99 {pct(samples, 0.99):6.3f}  mean {statistics.fmean(samples):6.3f} ms")
    p50 = pct(ours, 0.5)
    print()
    print(f"tools.mcp_raw_p50_ms={pct(raw, 0.5):.3f}")
    print(f"tools.mcp_call_overhead_ms={p50:.3f}")
    print(f"tools.mcp_layer_p50_ms={p50 - pct(raw, 0.5):.3f}")
    print()
    print("targets:")
    print(f"  {'PASS' if p50 <= TARGET_MS else 'MISS'}  no-op MCP tool call p50 <= {TARGET_MS:g} ms: {p50:.3f} ms")
    return 0


def main() -> int:
    return asyncio.run(_run())


if __name__ == "__main__":
    sys.exit(main())
