"""Model-client benchmark: the client CPU of one model call, whole and streamed, ours and the SDK's.

Two processes on 127.0.0.1: ``tests.fakes.FakeOpenAI`` in a child process
(``python -m bench.llm_client _fake-model``; its CPU is not counted), answering
every call with the same ``TOKENS``-token answer as fast as the socket takes it,
and this process, which makes ``CALLS`` calls one after another per client and
divides its CPU time (``time.process_time``) by the calls:

* ``ours_json``: ``core.ModelClient`` over the daemon's transport
  (``gateway.daemon.transport.AiohttpTransport``), no listener: today's call;
* ``ours_stream``: the same client with a listener: ``stream: true``, the SSE
  events parsed and assembled by ``core._stream``;
* ``bare_aiohttp``: the floor: the same streamed request by aiohttp alone, its
  body read and thrown away (no httpx, no parsing): what any client pays for
  the packets;
* ``sdk_json`` / ``sdk_stream``: the official ``openai`` SDK, ``AsyncOpenAI``
  over its ``DefaultAioHttpClient``, retries off; streamed through its
  ``chat.completions.stream`` helper (which assembles content and tool calls),
  the listener fed from its ``content.delta`` events.

Then the same streamed calls against a second fake that writes as a model does,
its first token after ``FIRST_TOKEN_S`` and then ``TOKENS_PER_S`` tokens a second
(each chunk its own packet, so each one wakes the client): ``PACED`` calls at
once, the CPU divided by the calls (``*_paced``).

The SDK is an optional extra (``pip install -e '.[bench]'``); without it only
our figures are printed. ``BENCH_SCALE`` scales the calls. See bench/README.md.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCALE = float(os.environ.get("BENCH_SCALE", "1"))
CALLS = max(20, round(300 * SCALE))
WARMUP = 20
TOKENS = 400
PACED = max(5, round(20 * SCALE))
FIRST_TOKEN_S = 0.2
TOKENS_PER_S = 50.0
HELLO = [{"role": "user", "content": "write me something long"}]


class _Listener:
    def __init__(self) -> None:
        self.pieces = 0

    def text(self, delta: str) -> None:
        self.pieces += 1

    def discard(self) -> None:
        pass

    def tool(self, name: str) -> None:
        pass


async def _fake_model(paced: bool) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.fakes import FakeOpenAI

    answer = " ".join(f"word{i}" for i in range(TOKENS))
    pace = {"first_token_delay": FIRST_TOKEN_S, "tokens_per_second": TOKENS_PER_S} if paced else {}
    async with FakeOpenAI(responder=lambda body: answer, **pace) as fake:  # type: ignore[arg-type]
        print(fake.port, flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the parent closes our stdin


async def _measure_paced(call: Callable[[], Awaitable[str]]) -> tuple[float, float]:
    """(client CPU ms per call, wall ms per call) of ``PACED`` calls at once."""
    await call()
    cpu, wall = time.process_time(), time.perf_counter()
    texts = await asyncio.gather(*(call() for _ in range(PACED)))
    assert all(text.endswith(f"word{TOKENS - 1}") for text in texts)
    return (time.process_time() - cpu) * 1000 / PACED, (time.perf_counter() - wall) * 1000


async def _measure(call: Callable[[], Awaitable[str]]) -> tuple[float, float]:
    """(client CPU ms per call, wall ms per call)."""
    for _ in range(WARMUP):
        await call()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(CALLS):
        text = await call()
        assert text.endswith(f"word{TOKENS - 1}"), text[-40:]
    return (time.process_time() - cpu) * 1000 / CALLS, (time.perf_counter() - wall) * 1000 / CALLS


async def _ours(base_url: str, paced_url: str) -> dict[str, tuple[float, float]]:
    from core import ModelClient, ModelSettings
    from gateway.daemon.transport import AiohttpTransport

    figures: dict[str, tuple[float, float]] = {}
    async with ModelClient(ModelSettings(base_url=base_url, model="m"), transport=AiohttpTransport()) as client:

        async def whole() -> str:
            return (await client.chat(HELLO)).content or ""

        async def streamed() -> str:
            return (await client.chat(HELLO, listener=_Listener())).content or ""

        figures["ours_json"] = await _measure(whole)
        figures["ours_stream"] = await _measure(streamed)
    async with ModelClient(ModelSettings(base_url=paced_url, model="m"), transport=AiohttpTransport()) as client:
        figures["ours_stream_paced"] = await _measure_paced(streamed)
    return figures


async def _bare(base_url: str, paced_url: str) -> dict[str, tuple[float, float]]:
    import aiohttp

    figures: dict[str, tuple[float, float]] = {}
    body = {"model": "m", "messages": HELLO, "stream": True, "stream_options": {"include_usage": True}}
    async with aiohttp.ClientSession() as session:
        for url, paced in ((base_url, False), (paced_url, True)):

            async def streamed(url: str = url) -> str:
                last = b""
                async with session.post(f"{url}/chat/completions", json=body) as response:
                    async for chunk in response.content.iter_any():
                        last = chunk
                assert last.endswith(b"[DONE]\n\n")
                return f"word{TOKENS - 1}"

            if paced:
                figures["bare_aiohttp_paced"] = await _measure_paced(streamed)
            else:
                figures["bare_aiohttp"] = await _measure(streamed)
    return figures


async def _sdk(base_url: str, paced_url: str) -> dict[str, tuple[float, float]]:
    figures: dict[str, tuple[float, float]] = {}
    for url, paced in ((base_url, False), (paced_url, True)):
        figures |= await _sdk_against(url, paced)
    return figures


async def _sdk_against(base_url: str, paced: bool) -> dict[str, tuple[float, float]]:
    from openai import AsyncOpenAI, DefaultAioHttpClient

    figures: dict[str, tuple[float, float]] = {}
    async with AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0,
                           http_client=DefaultAioHttpClient()) as client:

        async def whole() -> str:
            completion = await client.chat.completions.create(model="m", messages=HELLO)  # type: ignore[arg-type]
            return completion.choices[0].message.content or ""

        async def streamed() -> str:
            listener = _Listener()
            async with client.chat.completions.stream(model="m", messages=HELLO,  # type: ignore[arg-type]
                                                      stream_options={"include_usage": True}) as stream:
                async for event in stream:
                    if event.type == "content.delta":
                        listener.text(event.delta)
                final: Any = await stream.get_final_completion()
            return final.choices[0].message.content or ""

        if paced:
            figures["sdk_stream_paced"] = await _measure_paced(streamed)
        else:
            figures["sdk_json"] = await _measure(whole)
            figures["sdk_stream"] = await _measure(streamed)
    return figures


async def _run(base_url: str, paced_url: str) -> None:
    figures = await _ours(base_url, paced_url)
    figures |= await _bare(base_url, paced_url)
    try:
        import openai  # noqa: F401
    except ImportError:
        print("llm_client.sdk=not installed (pip install -e '.[bench]')")
    else:
        figures |= await _sdk(base_url, paced_url)
    print(f"llm_client.calls={CALLS}")
    print(f"llm_client.paced_calls={PACED}")
    print(f"llm_client.answer_tokens={TOKENS}")
    for name, (cpu_ms, wall_ms) in figures.items():
        print(f"llm_client.{name}.cpu_ms_per_call={cpu_ms:.2f}")
        wall = "wall_ms" if name.endswith("_paced") else "wall_ms_per_call"
        print(f"llm_client.{name}.{wall}={wall_ms:.2f}")
    if "sdk_stream" in figures:
        for name in ("sdk_stream", "sdk_stream_paced"):
            ratio = figures[name][0] / figures[name.replace("sdk", "ours")][0]
            print(f"llm_client.{name}_over_ours_cpu={ratio:.2f}")
    print(f"llm_client.ours_stream_over_json_cpu={figures['ours_stream'][0] / figures['ours_json'][0]:.2f}")


def _start(*args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "bench.llm_client", "_fake-model", *args], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        raise RuntimeError(f"the fake model did not start (said {line!r})")
    return proc, f"http://127.0.0.1:{int(line)}/v1"


def main() -> int:
    from bench.gateway import close_child

    fast, fast_url = _start()
    try:
        paced, paced_url = _start("paced")
        try:
            asyncio.run(_run(fast_url, paced_url))
        finally:
            close_child(paced, timeout=10)
    finally:
        close_child(fast, timeout=10)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["_fake-model"]:
        asyncio.run(_fake_model(paced=sys.argv[2:] == ["paced"]))
    else:
        sys.exit(main())
