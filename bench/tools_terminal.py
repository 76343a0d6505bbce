"""Terminal tool benchmark: what the ``terminal`` tool adds to running a command.

Two ways to run ``true``, in this process, one after the other, interleaved (the order
swaps every round so that the machine's drift hits both alike):

* ``tool``: ``ToolRegistry([terminal_tool(settings)]).dispatch("terminal", {"command": "true"}, ctx)``,
  the whole path a model's call takes: argument validation, the dangerous-list check, the
  workspace folder, the scrubbed environment, the process group, the capture, the group
  kill at the end and the result text. Settings are the defaults (``terminal_settings``),
  logs go through structlog to /dev/null (formatted, not shown).
* ``bare``: ``asyncio.create_subprocess_exec(<the same shell>, "-c", "true")`` with stdin
  /dev/null and stdout+stderr on one pipe, read to the end (``communicate``): the least any
  asyncio code pays to run the command and read its output.

``WARMUP`` runs of each first, then ``RUNS`` of each (``BENCH_SCALE`` scales RUNS, at least 50).
``tools.terminal_overhead_ms`` = p50(tool) - p50(bare), target <= 10 ms. The paired
median (each round's tool minus its bare) is printed beside it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import structlog

from core.tools import ToolContext, ToolRegistry
from core.tools.terminal import terminal_settings, terminal_tool
from storage import StateStore

SCALE = float(os.environ.get("BENCH_SCALE", "1"))
RUNS = max(50, round(200 * SCALE))
WARMUP = 20
TARGET_MS = 10.0


async def _bare(shell: str) -> float:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(shell, "-c", "true", stdin=asyncio.subprocess.DEVNULL,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    await proc.communicate()
    return (time.perf_counter() - started) * 1000


async def _tool(registry: ToolRegistry, ctx: ToolContext) -> float:
    started = time.perf_counter()
    outcome = await registry.dispatch("terminal", {"command": "true"}, ctx)
    took = (time.perf_counter() - started) * 1000
    if outcome.content != "exit code 0\n(no output)":
        raise RuntimeError(f"unexpected result: {outcome.content!r}")
    return took


async def run(tmp: Path) -> int:
    settings = terminal_settings(tmp / "home")
    registry = ToolRegistry([terminal_tool(settings)])
    print(f"tools_terminal: `true` {RUNS} times through the tool and bare, interleaved, after {WARMUP} "
          f"warm-up each; shell {settings.shell}; Python {'.'.join(map(str, sys.version_info[:3]))}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    async with StateStore(tmp / "home" / "state.db") as store:
        ctx = ToolContext(session_id="bench", platform="bench", home=settings.home, store=store)
        for _ in range(WARMUP):
            await _tool(registry, ctx)
            await _bare(settings.shell)
        tool: list[float] = []
        bare: list[float] = []
        for i in range(RUNS):
            if i % 2:
                tool.append(await _tool(registry, ctx))
                bare.append(await _bare(settings.shell))
            else:
                bare.append(await _bare(settings.shell))
                tool.append(await _tool(registry, ctx))
        sh = [await _bare("/bin/sh") for _ in range(min(RUNS, 100))]
    tool_p50, bare_p50 = statistics.median(tool), statistics.median(bare)
    overhead = tool_p50 - bare_p50
    paired = statistics.median(t - b for t, b in zip(tool, bare, strict=True))
    print(f"tools.terminal_overhead_ms={overhead:.2f}")
    print(f"tools.terminal_tool_p50_ms={tool_p50:.2f}")
    print(f"tools.terminal_bare_p50_ms={bare_p50:.2f}")
    print(f"tools.terminal_overhead_paired_p50_ms={paired:.2f}")
    print(f"tools.terminal_tool_p99_ms={statistics.quantiles(tool, n=100)[98]:.2f}")
    print(f"tools.terminal_bare_p99_ms={statistics.quantiles(bare, n=100)[98]:.2f}")
    print(f"  for comparison, bare /bin/sh -c true p50: {statistics.median(sh):.2f} ms; "
          f"load average after: {os.getloadavg()[0]:.2f}")
    verdict = "PASS" if overhead <= TARGET_MS else "MISS"
    print(f"targets:\n  {verdict}  tools.terminal_overhead_ms {overhead:.2f} <= {TARGET_MS:g}")
    return 0


def main() -> int:
    # The tool logs every call; keep the formatting cost, drop the lines.
    devnull = open(os.devnull, "w")  # closed below, after the run
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(devnull))
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-terminal-"))
    try:
        return asyncio.run(run(tmp))
    finally:
        structlog.reset_defaults()
        devnull.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
