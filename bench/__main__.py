"""``python -m bench [name ...]``: run every benchmark module that exists, in order.

Without arguments runs all of ``MODULES`` whose file is present in this
directory; with arguments, only those. Exits non-zero only when a benchmark
crashed (missed targets are printed as MISS, they are not failures).
"""

from __future__ import annotations

import importlib
import sys
import time
import traceback
from pathlib import Path

# Run order. A module is picked up as soon as bench/<name>.py exists.
MODULES = ("storage", "scale", "pg", "gateway", "http", "telegram", "discord", "slack", "transport", "bigreply",
           "llm_client", "stream", "media", "tools_terminal", "tools_mcp", "cron", "userdata", "pg_failover")

HERE = Path(__file__).resolve().parent


def available() -> list[str]:
    return [name for name in MODULES if (HERE / f"{name}.py").is_file()]


def run(names: list[str]) -> int:
    failed: list[str] = []
    for name in names:
        print(f"=== bench.{name} ===", flush=True)
        started = time.perf_counter()
        try:
            module = importlib.import_module(f"bench.{name}")
            rc = module.main()
        except Exception:
            traceback.print_exc()
            rc = 1
        took = time.perf_counter() - started
        print(f"=== bench.{name}: {'done' if not rc else 'FAILED'} in {took:.1f} s ===", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print(f"benchmarks that crashed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    names = argv or available()
    unknown = [n for n in names if n not in available()]
    if unknown:
        print(f"no such benchmark: {', '.join(unknown)} (available: {', '.join(available())})", file=sys.stderr)
        return 2
    if not names:
        print("no benchmark modules found", file=sys.stderr)
        return 2
    return run(names)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
