"""Transport benchmark: the client-side cost of one model call, per httpx transport.

Three transports under the same ``httpx.AsyncClient`` (built as ``core.llm.ModelClient``
builds it: its timeout, its default headers):

* ``httpx``: httpx's default transport (httpcore over anyio);
* ``ours``: ``gateway.daemon.transport.AiohttpTransport``, what the daemon ships;
* ``httpx_aiohttp``: ``httpx_aiohttp.AiohttpTransport`` (the PyPI package), skipped with a
  note when it is not installed.

Each request is shaped like a model call: a POST of a ~2 KB JSON chat body with a bearer
token, under ``asyncio.timeout`` as ``ModelClient._attempt`` does, and the ~1 KB JSON
answer parsed. The server is a bare aiohttp app on 127.0.0.1 in a child process of its
own, so its CPU is not counted and does not compete for this process's event loop.

One request in flight at a time. After a warm-up of every transport, each round runs
``PER_ROUND`` requests per transport, the order rotating from round to round so that the
machine's drift spreads evenly. A transport's figure is the median over the rounds of
its ``time.process_time`` per request (CPU) and ``perf_counter`` per request (wall time,
which includes the loopback round trip and the server's handler, the same for all
three); a ratio is the median of the per-round ratios, so a slow spell cancels out.
``BENCH_SCALE`` scales the number of rounds. The method and the figures: bench/README.md.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from gateway.daemon.transport import AiohttpTransport

ROOT = Path(__file__).resolve().parent.parent
SCALE = float(os.environ.get("BENCH_SCALE", "1"))
PER_ROUND = 100
WARMUP = 200
ROUNDS = max(5, round(31 * SCALE))
TIMEOUT = httpx.Timeout(120.0, connect=10.0)  # ModelSettings' defaults
HEADERS = {"User-Agent": "hermes-gateway/0.1", "Accept": "application/json"}

_SENTENCE = "The quick brown fox jumps over the lazy dog while the model thinks about it. "


def request_body() -> dict[str, object]:
    """A chat-completions body of about 2 KB: a system prompt and a few turns."""
    messages = [{"role": "system", "content": _SENTENCE * 6}]
    for i in range(4):
        messages.append({"role": "user", "content": f"question {i}: " + _SENTENCE * 2})
        messages.append({"role": "assistant", "content": f"answer {i}: " + _SENTENCE * 1})
    messages.append({"role": "user", "content": "and now? " + _SENTENCE})
    return {"model": "bench-model", "messages": messages, "temperature": 0.7}


def answer_body() -> bytes:
    """A chat.completion of about 1 KB."""
    return json.dumps({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 1700000000, "model": "bench-model",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": _SENTENCE * 10}}],
        "usage": {"prompt_tokens": 480, "completion_tokens": 160, "total_tokens": 640},
    }).encode()


# ------------------------------------------------------------------ the server (child process)


def serve() -> None:
    """Answer every POST with the same completion; print the port, then serve until stdin closes."""
    from aiohttp import web

    answer = answer_body()

    async def completions(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=answer, content_type="application/json")

    async def run() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", completions)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(runner.addresses[0][1], flush=True)
        await asyncio.to_thread(sys.stdin.read)  # the parent closes our stdin to stop us
        await runner.cleanup()

    asyncio.run(run())


# ------------------------------------------------------------------ the client (this process)


def transports() -> dict[str, Callable[[], httpx.AsyncBaseTransport]]:
    made: dict[str, Callable[[], httpx.AsyncBaseTransport]] = {
        "httpx": lambda: httpx.AsyncHTTPTransport(retries=0),
        "ours": AiohttpTransport,
    }
    try:
        import httpx_aiohttp
    except ImportError:
        print("  httpx_aiohttp is not installed: its transport is left out (pip install httpx-aiohttp)")
    else:
        made["httpx_aiohttp"] = httpx_aiohttp.AiohttpTransport
    return made


async def calls(client: httpx.AsyncClient, url: str, body: dict[str, object], n: int) -> None:
    headers = {"Authorization": "Bearer sk-bench"}
    for _ in range(n):
        async with asyncio.timeout(130.0):
            response = await client.post(url, json=body, headers=headers)
        if response.status_code != 200 or not json.loads(response.content)["choices"]:
            raise RuntimeError(f"unexpected answer: HTTP {response.status_code}")


async def measure(url: str) -> dict[str, tuple[list[float], list[float]]]:
    body = request_body()
    clients = {name: httpx.AsyncClient(transport=make(), timeout=TIMEOUT, headers=HEADERS)
               for name, make in transports().items()}
    names = list(clients)
    cpu: dict[str, list[float]] = {n: [] for n in names}
    wall: dict[str, list[float]] = {n: [] for n in names}
    try:
        for name in names:
            await calls(clients[name], url, body, WARMUP)
        for r in range(ROUNDS):
            for name in names[r % len(names):] + names[: r % len(names)]:
                gc.collect()
                c0, w0 = time.process_time(), time.perf_counter()
                await calls(clients[name], url, body, PER_ROUND)
                c1, w1 = time.process_time(), time.perf_counter()
                cpu[name].append((c1 - c0) / PER_ROUND * 1e6)
                wall[name].append((w1 - w0) / PER_ROUND * 1e6)
    finally:
        for client in clients.values():
            await client.aclose()
    return {n: (cpu[n], wall[n]) for n in names}


def main() -> int | None:
    # Loopback only: no proxy may stand between client and server (the transports read these).
    proxies = {k: os.environ.pop(k) for k in list(os.environ) if "proxy" in k.lower()}
    try:
        return _run()
    finally:
        os.environ.update(proxies)


def _run() -> int:
    print(f"transport: {PER_ROUND} requests x {ROUNDS} rounds per transport after {WARMUP} warm-up, "
          f"one in flight; {len(json.dumps(request_body()))} B body, {len(answer_body())} B answer; "
          f"Python {'.'.join(map(str, sys.version_info[:3]))}, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.2f}")
    server = subprocess.Popen([sys.executable, "-m", "bench.transport", "--serve"], cwd=ROOT,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        results = asyncio.run(measure(f"http://127.0.0.1:{port}/v1/chat/completions"))
    finally:
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    print(f"  {'transport':<14} {'CPU us/req (median, min-max)':>30} {'wall us/req (median, min-max)':>31}")
    for name, (cpu, wall) in results.items():
        print(f"  {name:<14} {statistics.median(cpu):>12.0f} ({min(cpu):5.0f}-{max(cpu):5.0f})"
              f" {statistics.median(wall):>15.0f} ({min(wall):5.0f}-{max(wall):5.0f})")
    for name, (cpu, wall) in results.items():
        print(f"transport.{name}_cpu_us_per_req={statistics.median(cpu):.0f}")
        print(f"transport.{name}_wall_us_per_req={statistics.median(wall):.0f}")
    ours_cpu = results["ours"][0]
    for name, (cpu, _) in results.items():
        if name != "ours":
            # Paired by round: both ran back to back, so a slow spell of the machine cancels out.
            ratio = statistics.median(c / o for c, o in zip(cpu, ours_cpu, strict=True))
            print(f"transport.ratio_{name}_vs_ours_cpu={ratio:.2f}")
    print(f"  load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        sys.exit(main())
