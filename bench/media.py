"""Media benchmark: what a 12-megapixel photo costs the gateway, alone and ten at once.

Three parties on 127.0.0.1:

* the emulator: ``FakeTelegram`` in this process. Each photo is a 4000x3000 JPEG
  (a gradient with noise, about 4-6 MB, as a phone writes one) offered as one
  PhotoSize, so the gateway downloads the whole 12 megapixels;
* the model: ``FakeOpenAI`` in this process, with ``model.vision: true``; its
  responder notes when each request arrives;
* the gateway under test: ``python -m gateway.cli run`` as a subprocess, Telegram
  only, media settings at their defaults.

Figures:

* ``media.photo_overhead_ms``: p50 over ``PHOTOS`` photos sent one after another,
  from the emulator's ``getFile`` call for a photo to the model request that
  carries it (download, storing, sniffing, decoding, resizing, encoding and the
  request itself). Target <= 150 ms.
* ``media.loop_lag_ms``: the gateway runs with a ticker on its event loop (``bench._loop_ticker``:
  a task that sleeps 5 ms at a time and writes how late it woke). While ``AT_ONCE`` photos arrive
  together, from the moment they are sent until the model has all of them, the p99 of those
  delays is how long the loop was held. Target <= 20 ms.
* ``media.rss_rise_mb``: the gateway's peak RSS during those photos minus its RSS
  before them (``VmHWM`` reset is not possible from outside, so the peak is read
  by sampling ``VmRSS`` every 5 ms). Target <= 80 MB.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench._platform import Platform, child_env, stop
from bench.gateway import ROOT, free_port, http_get, pct, sample_proc

PHOTOS = 10
AT_ONCE = 10
TARGETS = {"photo_overhead_ms": 150.0, "loop_lag_ms": 20.0, "rss_rise_mb": 80.0}


def twelve_megapixels(seed: int) -> bytes:
    """A 4000x3000 JPEG that compresses like a phone photo (gradients under fine grain, 4-5 MB at
    quality 90), not like a flat colour."""
    import random

    from PIL import Image

    grain = Image.frombytes("L", (4000, 3000), random.Random(seed).randbytes(4000 * 3000)).convert("RGB")
    base = Image.linear_gradient("L").resize((4000, 3000)).convert("RGB")
    out = io.BytesIO()
    Image.blend(base, grain, 0.12).save(out, "JPEG", quality=90)
    return out.getvalue()


def write_home(home: Path, config: dict[str, Any]) -> None:
    home.mkdir(parents=True)
    (home / "config.yaml").write_text(yaml.safe_dump(config))


async def start_gateway(home: Path, fake: Any, model_url: str) -> tuple[subprocess.Popen[bytes], int, Any]:
    port = free_port()
    config = {
        "model": {"base_url": model_url, "default": "fake-model", "max_retries": 0, "vision": True},
        "platforms": {"api_server": {"port": port},
                      "telegram": {"base_url": fake.base_url, "base_file_url": fake.base_file_url,
                                   "streaming": False}},
        "auth": {"allow_all_users": True},
        "agent": {"auto_title": False, "memory_nudge_interval": 0, "skill_nudge_interval": 0},
        "logging": {"level": "warning"},
    }
    write_home(home, config)
    plat = Platform(name="telegram", token_prefix="M", env_prefixes=("TELEGRAM_",), chats="", fake="",
                    baseline="", baseline_kind="", tmp_prefix="")
    env = child_env(plat) | {"HERMES_HOME": str(home), "TELEGRAM_BOT_TOKEN": fake.token}
    log = open(home.parent / "gateway-media.log", "w")  # closed with the process
    proc = subprocess.Popen([sys.executable, "-m", "bench._loop_ticker", str(home.parent / "ticks.txt")],  # noqa: ASYNC220
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.perf_counter() + 60
    while time.perf_counter() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the gateway exited with {proc.returncode}")
        try:
            status, _ = await http_get(port, "/readyz")
            if status == 200:
                return proc, port, log
        except (OSError, ValueError, IndexError):
            pass
        await asyncio.sleep(0.05)
    raise RuntimeError("the gateway did not become ready within 60 s")


def ticks_between(path: Path, start: float, end: float) -> list[float]:
    """The gateway's loop lags (ms) its ticker wrote for wake-ups between ``start`` and ``end``."""
    lags = []
    for line in path.read_text().splitlines():
        woke, lag = (float(v) for v in line.split())
        if start <= woke <= end:
            lags.append(lag)
    return lags


async def run(tmp: Path) -> int:
    from tests.emulators.fake_telegram import FakeTelegram
    from tests.fakes.openai_server import FakeOpenAI, echo_last_user_message

    arrived: list[float] = []

    def respond(body: dict[str, Any]) -> str:
        arrived.append(time.monotonic())
        return echo_last_user_message(body)

    photos = [twelve_megapixels(seed) for seed in range(3)]
    print(f"Python {'.'.join(map(str, sys.version_info[:3]))}, {os.cpu_count()} CPUs; photos 4000x3000, "
          f"{min(map(len, photos)) / 2**20:.1f}-{max(map(len, photos)) / 2**20:.1f} MB")
    async with FakeOpenAI(responder=respond) as model:
        fake = FakeTelegram()
        await fake.start()
        try:
            proc, _port, log = await start_gateway(tmp / "home", fake, model.base_url)
            try:
                users = [fake.add_user(first_name=f"U{i}") for i in range(AT_ONCE)]

                async def send(user: dict[str, Any], n: int) -> tuple[float, float]:
                    """(getFile time, model request time) of one photo, on this process's clock."""
                    seen = len(arrived)
                    data = photos[n % len(photos)]
                    media = fake.photo(sizes=[(data, 4000, 3000)])
                    file_id = media["photo"][0]["file_id"]
                    await fake.user_sends(media, caption=f"photo {n}", user=user)
                    while True:
                        got = [c.time for c in fake.calls if c.method == "getFile" and c.params.get("file_id") == file_id]
                        if got and len(arrived) > seen:
                            return got[0], arrived[-1]
                        await asyncio.sleep(0.002)

                await send(users[0], 99)  # warm-up: imports, the first TLS-free connection, Pillow's codecs
                overhead = []
                for n in range(PHOTOS):
                    got_file, asked = await send(users[0], n)
                    overhead.append((asked - got_file) * 1000)
                    await asyncio.sleep(0.1)
                await asyncio.sleep(0.5)
                rss_before = sample_proc(proc.pid).rss_mb
                peak = rss_before
                count = len(arrived)
                window = time.monotonic()
                burst = asyncio.gather(*(fake.user_sends(fake.photo(sizes=[(photos[i % 3], 4000, 3000)]),
                                                         caption=f"burst {i}", user=users[i]) for i in range(AT_ONCE)))
                await burst
                deadline = time.monotonic() + 120
                while len(arrived) < count + AT_ONCE and time.monotonic() < deadline:
                    peak = max(peak, sample_proc(proc.pid).rss_mb)
                    await asyncio.sleep(0.005)
                window_end = time.monotonic()
            finally:
                stop(proc, 20)
                log.close()
        finally:
            await fake.stop()
    lags = ticks_between(tmp / "ticks.txt", window, window_end)
    figures = {"photo_overhead_ms": pct(overhead, 0.5), "loop_lag_ms": pct(lags, 0.99),
               "rss_rise_mb": peak - rss_before}
    print(f"media.photo_overhead_ms={figures['photo_overhead_ms']:.0f}")
    print(f"media.photo_overhead_p99_ms={pct(overhead, 0.99):.0f}")
    print(f"media.loop_lag_ms={figures['loop_lag_ms']:.1f}")
    print(f"media.loop_lag_max_ms={max(lags, default=float('nan')):.1f}")
    print(f"media.loop_lag_ticks={len(lags)}")
    print(f"media.rss_rise_mb={figures['rss_rise_mb']:.1f}")
    missed = [f"{k} {v:.1f} > {TARGETS[k]:g}" for k, v in figures.items() if not v <= TARGETS[k]]
    print("targets:\n  " + ("PASS  every target" if not missed else "\n  ".join(f"MISS  {m}" for m in missed)))
    return 0


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="hermes-bench-media-"))
    try:
        return asyncio.run(run(tmp))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
