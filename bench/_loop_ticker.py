"""Run the gateway (``hermes-gateway run``) with a ticker on its event loop, for ``bench/media.py``.

``python -m bench._loop_ticker FILE``: the daemon as ``python -m gateway.cli run`` would run it, plus
one task that sleeps 5 ms at a time and writes, per wake-up, the ``time.monotonic()`` it woke at and
how much later than asked (ms) to ``FILE``. The monotonic clock is the machine's, so the bench reads
the samples of any window it timed itself. Bench-only: nothing of it is in the product.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Coroutine
from typing import Any

TICK_S = 0.005


async def _ticker(path: str) -> None:
    with open(path, "w", buffering=1 << 16) as out:
        while True:
            asked = time.monotonic()
            await asyncio.sleep(TICK_S)
            woke = time.monotonic()
            out.write(f"{woke:.6f} {(woke - asked - TICK_S) * 1000:.3f}\n")
            if int(woke * 10) % 5 == 0:
                out.flush()


def main() -> None:
    path = sys.argv[1]
    real_run = asyncio.run

    def run(main: Coroutine[Any, Any, Any], **kw: Any) -> Any:
        async def with_ticker() -> Any:
            tick = asyncio.create_task(_ticker(path))
            try:
                return await main
            finally:
                tick.cancel()

        return real_run(with_ticker(), **kw)

    asyncio.run = run  # type: ignore[assignment]
    from gateway.cli import main as cli

    sys.argv = ["hermes-gateway", "run"]
    cli()


if __name__ == "__main__":
    main()
