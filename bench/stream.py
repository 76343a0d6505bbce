"""Streaming benchmark: how soon an answer becomes visible, how many platform calls it costs, and
what streaming adds to the gateway's CPU, on each surface (bench/README.md, "Streaming").

* the model: a fake OpenAI server in its own process (``_model_main``) that, asked to stream, sends
  its first token after ``FIRST_TOKEN_S`` and then ``TOKENS`` tokens at ``TOKENS_PER_S``; asked for
  the whole answer, it sends it after the same time;
* the gateway under test: ``python -m gateway.cli run`` as a subprocess with one surface enabled,
  run twice: streaming (the defaults) and whole (``platforms.<name>.streaming: false``);
* the surfaces: the HTTP API (an aiohttp client reading the SSE body), and the Telegram, Discord
  and Slack emulators in this process, which record every API call with its arrival time.

``CHATS`` chats send one message each at once. Per chat: ``first_visible_ms`` is the time from
sending the message to the first call that shows text of the answer (an SSE chunk with content, a
draft, a post, an edit, a stream append), minus the model's first-token time; ``api_calls`` counts
the calls that show or change the answer. ``cpu_ms`` is the gateway's CPU time per answer while
streaming, ``whole_cpu_ms`` the same with the answer sent whole, and ``overhead_cpu_ms`` what
streaming adds (the difference); the target is an overhead of at most twice the whole answer's CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench._platform import child_env, stop
from bench.gateway import ROOT, close_child, free_port, http_get, pct, sample_proc

FIRST_TOKEN_S = 0.2
TOKENS = 400
TOKENS_PER_S = 50.0
CHATS = 12
EDIT_INTERVAL = 1.0
FIRST_DELAY = 1.0
ANSWER_S = FIRST_TOKEN_S + TOKENS / TOKENS_PER_S


def answer_tokens(token: str) -> list[str]:
    """The answer to the message carrying ``token``: it starts with the token and ends with END."""
    words = [f"{token}"] + [f" word{i % 37}" for i in range(1, TOKENS - 1)] + [" END"]
    return words


def _model_main() -> None:
    """Child process: a slow OpenAI-compatible model. Prints its port; exits at the end of stdin."""
    from aiohttp import web

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        last = next((m for m in reversed(body.get("messages", [])) if m.get("role") == "user"), {})
        token = str(last.get("content") or "x").split(" ", 1)[0]
        words = answer_tokens(token)
        base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": "fake-model"}
        if not body.get("stream"):
            await asyncio.sleep(ANSWER_S)
            return web.json_response({
                "id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()),
                "model": "fake-model",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "".join(words)}}],
                "usage": {"prompt_tokens": 20, "completion_tokens": TOKENS, "total_tokens": TOKENS + 20},
            })
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def event(payload: dict[str, Any]) -> None:
            await resp.write(b"data: " + json.dumps(payload).encode() + b"\n\n")

        await asyncio.sleep(FIRST_TOKEN_S)
        started = time.monotonic()
        for i, word in enumerate(words):
            # Paced against the clock, so the rate holds however long a write takes.
            await asyncio.sleep(max(0.0, started + i / TOKENS_PER_S - time.monotonic()))
            delta: dict[str, Any] = {"content": word} if i else {"role": "assistant", "content": word}
            await event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        await event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            await event({**base, "choices": [],
                         "usage": {"prompt_tokens": 20, "completion_tokens": TOKENS, "total_tokens": TOKENS + 20}})
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def serve() -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        print(port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        await runner.cleanup()

    asyncio.run(serve())


class Model:
    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.stream", "_model"], cwd=ROOT,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def close(self) -> None:
        close_child(self.proc, timeout=10)


@dataclass
class Leg:
    """One run of one surface: per chat, the first visible time and the calls; the gateway's CPU."""

    first_visible_ms: list[float] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    answer_s: list[float] = field(default_factory=list)
    cpu_ms_per_answer: float = 0.0
    errors: list[str] = field(default_factory=list)


@dataclass
class Gateway:
    proc: subprocess.Popen[bytes]
    port: int
    log: Any

    def close(self) -> int:
        rc = stop(self.proc, 60)
        self.log.close()
        return rc


async def start_gateway(home: Path, model: Model, name: str, section: dict[str, Any], secrets: dict[str, str],
                        env_prefixes: tuple[str, ...], *, streaming: bool) -> Gateway:
    home.mkdir(parents=True)  # noqa: ASYNC240 - once, before the measurement
    port = free_port()
    platforms: dict[str, Any] = {"api_server": {"host": "127.0.0.1", "port": port}}
    if name == "api_server":
        platforms["api_server"]["streaming"] = streaming
    else:
        platforms[name] = {**section, "streaming": streaming}
    config = {
        "model": {"base_url": model.base_url, "default": "fake-model", "max_retries": 0, "stream": streaming},
        "platforms": platforms,
        "auth": {"allow_all_users": True},
        "agent": {"auto_title": False, "memory_nudge_interval": 0, "skill_nudge_interval": 0},
        "streaming": {"edit_interval": EDIT_INTERVAL, "first_delay": FIRST_DELAY},
    }
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    from bench._platform import Platform

    plat = Platform(name=name, token_prefix="S", env_prefixes=env_prefixes, chats="", fake="", baseline="",
                    baseline_kind="", tmp_prefix="")
    env = child_env(plat) | {"HERMES_HOME": str(home), **secrets}
    log = open(home.parent / f"gateway-{name}-{'stream' if streaming else 'whole'}.log", "w")  # closed by close()
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "run"], cwd=ROOT, env=env,  # noqa: ASYNC220
                            stdout=log, stderr=subprocess.STDOUT)
    gw = Gateway(proc, port, log)
    deadline = time.perf_counter() + 60
    while True:
        if proc.poll() is not None:
            gw.close()
            raise RuntimeError(f"the gateway exited with {proc.returncode}")
        with contextlib.suppress(OSError, ValueError, IndexError):
            status, _ = await http_get(port, "/readyz")
            if status == 200:
                return gw
        if time.perf_counter() > deadline:
            gw.close()
            raise RuntimeError("the gateway did not become ready within 60 s")
        await asyncio.sleep(0.05)


# ------------------------------------------------------------------ the HTTP API


async def api_leg(home: Path, model: Model, *, streaming: bool) -> Leg:
    import aiohttp

    gw = await start_gateway(home, model, "api_server", {}, {}, (), streaming=streaming)
    leg = Leg()
    cpu0 = sample_proc(gw.proc.pid).cpu_s
    try:
        async with aiohttp.ClientSession() as http:

            async def one(i: int) -> None:
                token = f"S{i:02d}"
                body = {"model": "fake-model", "stream": True, "user": f"bench{i}",
                        "messages": [{"role": "user", "content": f"{token} please write"}]}
                started = time.monotonic()
                first: float | None = None
                chunks = 0
                text = ""
                async with http.post(f"http://127.0.0.1:{gw.port}/v1/chat/completions", json=body) as resp:
                    async for raw in resp.content:
                        line = raw.decode().strip()
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        chunk = json.loads(line[6:])
                        for choice in chunk.get("choices") or []:
                            piece = (choice.get("delta") or {}).get("content") or ""
                            if piece:
                                chunks += 1
                                text += piece
                                if first is None:
                                    first = time.monotonic()
                done = time.monotonic()
                if first is None or not text.endswith("END"):
                    leg.errors.append(f"api chat {i}: no whole answer ({text[-40:]!r})")
                    return
                leg.first_visible_ms.append((first - started - FIRST_TOKEN_S) * 1000)
                leg.calls.append(chunks)
                leg.answer_s.append(done - started)

            await asyncio.gather(*(one(i) for i in range(CHATS)))
        leg.cpu_ms_per_answer = (sample_proc(gw.proc.pid).cpu_s - cpu0) * 1000 / CHATS
    finally:
        rc = gw.close()
        if rc != 0:
            leg.errors.append(f"gateway exit code {rc}")
    return leg


# ------------------------------------------------------------------ the chat platforms


@dataclass(frozen=True)
class ChatPlatform:
    """How the benchmark drives one platform's emulator (the ``Emulator`` of its own bench module)."""

    name: str
    env_prefixes: tuple[str, ...]
    emulator: Callable[[], Any]
    section: Callable[[Any], dict[str, Any]]
    secrets: Callable[[Any], dict[str, str]]
    #: (emulator, user) -> the user's chat, as the platform's calls name it
    chat_of: Callable[[Any, dict[str, Any]], Any]
    send: Callable[[Any, dict[str, Any], str], Awaitable[Any]]
    #: calls that show or change text in a chat: method -> the parameter naming the chat
    shows: dict[str, str]
    #: the text a call shows (or appends)
    text_of: Callable[[dict[str, Any]], str]
    connected: Callable[[Any], Awaitable[Any]] | None = None


async def chat_leg(platform: ChatPlatform, home: Path, model: Model, *, streaming: bool) -> Leg:
    emu = platform.emulator()
    await emu.start()
    leg = Leg()
    try:
        gw = await start_gateway(home, model, platform.name, platform.section(emu), platform.secrets(emu),
                                 platform.env_prefixes, streaming=streaming)
        try:
            if platform.connected is not None:
                await platform.connected(emu)
            cpu0 = sample_proc(gw.proc.pid).cpu_s

            def calls_in(chat: Any, since: float) -> list[Any]:
                return [c for c in emu.fake.calls if c.method in platform.shows and c.time >= since
                        and str(c.params.get(platform.shows[c.method])) == str(chat) and c.status is not None
                        and 200 <= c.status < 300]

            async def one(i: int) -> None:
                user = emu.users[i]
                chat = platform.chat_of(emu, user)
                token = f"S{i:02d}"
                started = time.monotonic()
                await platform.send(emu, user, f"{token} please write")
                deadline = started + ANSWER_S + 60
                while not any("END" in platform.text_of(c.params) for c in calls_in(chat, started)):
                    if time.monotonic() > deadline:
                        leg.errors.append(f"{platform.name} chat {i}: no whole answer within {ANSWER_S + 60:.0f} s")
                        return
                    await asyncio.sleep(0.02)
                calls = calls_in(chat, started)
                shown = [c for c in calls if platform.text_of(c.params).strip()]
                leg.first_visible_ms.append((shown[0].time - started - FIRST_TOKEN_S) * 1000)
                leg.calls.append(len(calls))
                leg.answer_s.append(calls[-1].time - started)

            await asyncio.gather(*(one(i) for i in range(CHATS)))
            leg.cpu_ms_per_answer = (sample_proc(gw.proc.pid).cpu_s - cpu0) * 1000 / CHATS
        finally:
            rc = gw.close()
            if rc != 0:
                leg.errors.append(f"gateway exit code {rc}")
    finally:
        await emu.stop()
    return leg


def _telegram() -> ChatPlatform:
    from bench import telegram

    return ChatPlatform(
        name="telegram", env_prefixes=("TELEGRAM_",), emulator=telegram.Emulator,
        section=lambda e: {"base_url": e.fake.base_url, "base_file_url": e.fake.base_file_url},
        secrets=lambda e: {"TELEGRAM_BOT_TOKEN": e.fake.token},
        chat_of=lambda e, user: user["id"],
        send=lambda e, user, text: e.fake.user_says(text, user=user),
        shows={"sendMessage": "chat_id", "editMessageText": "chat_id", "sendMessageDraft": "chat_id"},
        text_of=lambda p: str(p.get("text") or ""),
    )


def _discord() -> ChatPlatform:
    from bench import discord

    return ChatPlatform(
        name="discord", env_prefixes=("DISCORD_",), emulator=discord.Emulator,
        section=lambda e: {"base_url": e.fake.base_url, "gateway_url": e.fake.gateway_url},
        secrets=lambda e: {"DISCORD_BOT_TOKEN": e.fake.token},
        chat_of=lambda e, user: e.fake.dm_channel(user)["id"],
        send=lambda e, user, text: e.fake.user_says(text, user=user),
        shows={"create_message": "cid", "edit_message": "cid"},
        text_of=lambda p: str(p.get("content") or ""),
    )


def _slack() -> ChatPlatform:
    from bench import slack
    from tests.emulators.fake_slack import APP_TOKEN, BOT_TOKEN

    return ChatPlatform(
        name="slack", env_prefixes=("SLACK_",), emulator=slack.Emulator,
        section=lambda e: {"api_base_url": e.fake.api_base_url},
        secrets=lambda e: {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN},
        chat_of=lambda e, user: user["chat"],
        send=lambda e, user, text: e.fake.user_says(text, chat=user["chat"], user=user["id"]),
        shows={m: "channel" for m in ("chat.postMessage", "chat.update", "chat.startStream", "chat.appendStream",
                                      "chat.stopStream")},
        text_of=lambda p: str(p.get("text") or p.get("markdown_text") or ""),
        connected=lambda e: e.connected(1),
    )


# ------------------------------------------------------------------ report


SurfaceLeg = Callable[[Path, Model], Awaitable[Leg]]


def report(name: str, streamed: Leg, whole: Leg, *, chat_platform: bool) -> list[str]:
    """Print the figures of ``name``; the targets it missed."""
    fv = pct(streamed.first_visible_ms, 0.5) if streamed.first_visible_ms else float("nan")
    calls = pct([float(c) for c in streamed.calls], 0.5) if streamed.calls else float("nan")
    # What streaming adds to an answer's CPU, against what the answer costs sent whole.
    overhead = streamed.cpu_ms_per_answer - whole.cpu_ms_per_answer
    ratio = streamed.cpu_ms_per_answer / whole.cpu_ms_per_answer if whole.cpu_ms_per_answer else float("nan")
    overhead_ratio = overhead / whole.cpu_ms_per_answer if whole.cpu_ms_per_answer else float("nan")
    print(f"stream.{name}.first_visible_ms={fv:.0f}")
    print(f"stream.{name}.first_visible_p99_ms="
          f"{pct(streamed.first_visible_ms, 0.99) if streamed.first_visible_ms else float('nan'):.0f}")
    print(f"stream.{name}.api_calls_per_answer={calls:.0f}")
    print(f"stream.{name}.cpu_ms={streamed.cpu_ms_per_answer:.1f}")
    print(f"stream.{name}.whole_cpu_ms={whole.cpu_ms_per_answer:.1f}")
    print(f"stream.{name}.overhead_cpu_ms={overhead:.1f}")
    print(f"stream.{name}.overhead_vs_whole={overhead_ratio:.2f}")
    print(f"stream.{name}.cpu_ratio_vs_whole={ratio:.2f}")
    missed = []
    fv_target = (FIRST_DELAY * 1000 + 300) if chat_platform else 300.0
    if not fv <= fv_target:
        missed.append(f"{name}: first visible p50 {fv:.0f} ms > {fv_target:.0f} ms")
    calls_target = ANSWER_S / EDIT_INTERVAL + 3
    if chat_platform and not calls <= calls_target:
        missed.append(f"{name}: {calls:.0f} platform calls per answer > {calls_target:.1f}")
    if not overhead_ratio <= 2.0:
        missed.append(f"{name}: streaming adds {overhead_ratio:.2f}x the whole answer's CPU")
    for e in (streamed.errors + whole.errors)[:5]:
        print(f"  error: {e}")
    return missed


async def run_all(tmp: Path, surfaces: dict[str, tuple[SurfaceLeg, SurfaceLeg, bool]]) -> int:
    print(f"Python {'.'.join(map(str, sys.version_info[:3]))}, {os.cpu_count()} CPUs; {CHATS} chats at once, "
          f"model: first token after {FIRST_TOKEN_S * 1000:.0f} ms, then {TOKENS} tokens at {TOKENS_PER_S:g}/s; "
          f"edit_interval {EDIT_INTERVAL:g} s, first_delay {FIRST_DELAY:g} s")
    model = Model()
    missed: list[str] = []
    invalid = False
    try:
        for name, (streamed_leg, whole_leg, chat_platform) in surfaces.items():
            streamed = await streamed_leg(tmp / f"{name}-stream", model)
            whole = await whole_leg(tmp / f"{name}-whole", model)
            missed += report(name, streamed, whole, chat_platform=chat_platform)
            invalid = invalid or bool(streamed.errors or whole.errors)
            print(flush=True)
    finally:
        model.close()
    print("targets:")
    print("  " + ("PASS  every surface" if not missed else "\n  ".join(f"MISS  {m}" for m in missed)))
    return 1 if invalid else 0


def surfaces() -> dict[str, tuple[SurfaceLeg, SurfaceLeg, bool]]:
    legs: dict[str, tuple[SurfaceLeg, SurfaceLeg, bool]] = {
        "api": (lambda h, m: api_leg(h, m, streaming=True), lambda h, m: api_leg(h, m, streaming=False), False),
    }
    for make in (_telegram, _discord, _slack):
        platform = make()
        legs[platform.name] = (
            lambda h, m, p=platform: chat_leg(p, h, m, streaming=True),
            lambda h, m, p=platform: chat_leg(p, h, m, streaming=False),
            True,
        )
    return legs


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-stream-"))
    try:
        return asyncio.run(run_all(tmp, surfaces()))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["_model"]:
        _model_main()
    else:
        sys.exit(main())
