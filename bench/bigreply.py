"""Big-answer benchmark: how late the event loop runs while a 20 MB model answer arrives.

Two processes on 127.0.0.1:

* the model: a minimal aiohttp server in a child process of its own
  (``python -m bench.bigreply _fake-model``) that answers every
  ``POST /v1/chat/completions`` with the same ready-made chat completion of
  ``ANSWER_MB`` MiB (UTF-8 prose with quotes, newlines, accents and emoji, so
  the JSON has escapes and multi-byte characters), built once at start-up;
* this process: the real ``ModelClient`` over the daemon's own transport
  (``gateway.daemon.transport.AiohttpTransport``), and a ticker coroutine that
  loops on ``await asyncio.sleep(0.001)`` and records how much each sleep
  overran 1 ms (the event-loop lag), and samples RSS every 10 ms.

Modes, in this order, each ``REPEATS`` answers one after the other:

* ``after``: ``ModelClient`` with the defaults (``model.max_response_bytes``
  4 MiB): the answer is read up to the cap, cut there, and parsed in steps;
* ``after-8MiB``: the same at the largest cap config.yaml accepts;
* ``before+thread``: what the client did before, with the parse moved to a
  thread: the whole body read, then ``asyncio.to_thread(json.loads, body)``;
* ``before``: what the client did before: the whole body, one ``json.loads``
  on the event loop.

``http.big_answer_loop_lag_ms`` is the ticker's p99 over the ``after`` mode
(target <= 20 ms). ``BENCH_SCALE`` scales the repeats. See bench/README.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.gateway import close_child

ROOT = Path(__file__).resolve().parents[1]
SCALE = float(os.environ.get("BENCH_SCALE", "1"))
ANSWER_MB = 20
REPEATS = max(3, round(10 * SCALE))
LAG_P99_TARGET_MS = 20.0
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096

_SENTENCES = (
    'The "quick" brown fox jumps over the lazy dog.\n',
    "Crème brûlée, naïve café, jalapeño — déjà vu. ",
    "Path: C:\\Users\\hermes\\notes.txt\t(tabbed)\n",
    "Emoji too 😀🚀 and CJK 漢字かな. ",
    "Plain words make up most of a long answer, one after another, for pages and pages. ",
)


# ---------------------------------------------------------------- the model


def _body(megabytes: int) -> bytes:
    unit = "".join(_SENTENCES)
    content = unit * (megabytes * 2**20 // len(unit.encode()) + 1)
    completion = {
        "id": "chatcmpl-big", "object": "chat.completion", "created": 0, "model": "big-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": len(content) // 4},
    }
    return json.dumps(completion, ensure_ascii=False).encode()


def _fake_model_main() -> None:
    """Child process: prints its port, answers every chat completion with the big body; stdin EOF -> exit."""
    from aiohttp import web

    body = _body(ANSWER_MB)

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="application/json")

    async def serve() -> None:
        app = web.Application(client_max_size=2**24)
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        print(runner.addresses[0][1], flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await runner.cleanup()

    asyncio.run(serve())


class ModelProcess:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.bigreply", "_fake-model"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.proc.kill()
            raise RuntimeError(f"the fake model did not start (said {line!r})")
        self.base_url = f"http://127.0.0.1:{int(line)}/v1"

    def close(self) -> None:
        close_child(self.proc, timeout=10)


# ---------------------------------------------------------------- measuring


def _rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE / 2**20
    except OSError:
        return float("nan")


@dataclass
class ModeResult:
    name: str
    lags_ms: list[float] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    chars: int = 0
    rss_peak_mb: float = 0.0
    note: str = ""


async def _ticker(result: ModeResult, stop: asyncio.Event) -> None:
    last_rss = 0.0
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        result.lags_ms.append((now - started - 0.001) * 1000)
        if now - last_rss >= 0.01:
            result.rss_peak_mb, last_rss = max(result.rss_peak_mb, _rss_mb()), now


async def _measure(name: str, answer: object) -> ModeResult:
    """``answer()`` REPEATS times with the ticker running; it returns (chars, note).

    One answer first, unmeasured: a fresh transport loads the CA bundle into its SSL
    context on first use (30-40 ms, once per daemon run), which is not what is measured.
    """
    await answer()  # type: ignore[operator]
    result, stop = ModeResult(name), asyncio.Event()
    ticker = asyncio.create_task(_ticker(result, stop))
    await asyncio.sleep(0.05)
    result.lags_ms.clear()
    for _ in range(REPEATS):
        started = time.perf_counter()
        result.chars, result.note = await answer()  # type: ignore[operator]
        result.seconds.append(time.perf_counter() - started)
    stop.set()
    await ticker
    return result


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def run_all(base_url: str) -> list[ModeResult]:
    import httpx

    from core.llm import ModelClient, ModelSettings
    from gateway.daemon.transport import AiohttpTransport

    messages = [{"role": "user", "content": "Tell me everything."}]
    results: list[ModeResult] = []
    idle, stop = ModeResult("idle"), asyncio.Event()
    ticker = asyncio.create_task(_ticker(idle, stop))
    await asyncio.sleep(0.5)
    stop.set()
    await ticker
    results.append(idle)

    for name, cap in (("after", None), ("after-8MiB", 8 * 2**20)):
        settings = ModelSettings(base_url=base_url, model="big-model")
        if cap is not None:
            settings = ModelSettings(base_url=base_url, model="big-model", max_response_bytes=cap)
        async with ModelClient(settings, transport=AiohttpTransport()) as client:

            async def cut_answer(client: ModelClient = client) -> tuple[int, str]:
                reply = await client.chat(messages)
                return len(reply.content or ""), f"cut at {reply.cut_at} bytes" if reply.cut_at else "whole"

            results.append(await _measure(name, cut_answer))

    url = f"{base_url}/chat/completions"
    async with httpx.AsyncClient(transport=AiohttpTransport(), timeout=120) as http:
        for name, threaded in (("before+thread", True), ("before", False)):

            async def whole_answer(threaded: bool = threaded) -> tuple[int, str]:
                response = await http.post(url, json={"model": "big-model", "messages": messages})
                payload = (await asyncio.to_thread(json.loads, response.content) if threaded
                           else json.loads(response.content))
                return len(payload["choices"][0]["message"]["content"]), "whole"

            results.append(await _measure(name, whole_answer))
    return results


def main() -> int:
    print(f"Python {'.'.join(map(str, sys.version_info[:3]))}, {os.cpu_count()} CPUs, BENCH_SCALE={SCALE:g}; "
          f"{ANSWER_MB} MiB answer from a fake model in its own process, {REPEATS} answers per mode; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    model = ModelProcess()
    try:
        results = asyncio.run(run_all(model.base_url))
    finally:
        model.close()
    by_name = {r.name: r for r in results}
    print()
    for r in results:
        answer = f"{r.chars / 2**20:5.1f} Mchars {r.note}" if r.seconds else ""
        took = f"answer p50 {pct(r.seconds, 0.5) * 1000:6.0f} ms" if r.seconds else ""
        print(f"  {r.name:<14} lag p50 {pct(r.lags_ms, 0.5):6.2f} p99 {pct(r.lags_ms, 0.99):7.2f} "
              f"max {max(r.lags_ms, default=float('nan')):7.1f} ms over {len(r.lags_ms):5d} ticks | "
              f"peak RSS {r.rss_peak_mb:5.0f} MB | {took} {answer}")
    after, before = by_name["after"], by_name["before"]
    p99 = pct(after.lags_ms, 0.99)
    print()
    print(f"http.big_answer_loop_lag_ms={p99:.2f}")
    print(f"http.big_answer_loop_lag_max_ms={max(after.lags_ms):.2f}")
    print(f"http.big_answer_rss_peak_mb={after.rss_peak_mb:.0f}")
    print(f"http.big_answer_before_loop_lag_ms={pct(before.lags_ms, 0.99):.2f}")
    print(f"http.big_answer_before_loop_lag_max_ms={max(before.lags_ms):.2f}")
    print(f"http.big_answer_before_rss_peak_mb={before.rss_peak_mb:.0f}")
    print()
    print("targets:")
    verdict = "PASS" if p99 <= LAG_P99_TARGET_MS else "MISS"
    print(f"  {verdict}  event-loop lag p99 <= {LAG_P99_TARGET_MS:g} ms while a {ANSWER_MB} MiB answer arrives: "
          f"{p99:.2f} ms (max {max(after.lags_ms):.1f} ms; before: p99 {pct(before.lags_ms, 0.99):.2f}, "
          f"max {max(before.lags_ms):.1f} ms)")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["_fake-model"]:
        _fake_model_main()
    else:
        sys.exit(main())
