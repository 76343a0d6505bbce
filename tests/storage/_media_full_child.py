"""Put a file into a media store on a tmpfs too small for it; print what happened as JSON.

Run by test_media_store.py inside its own mount namespace (``unshare``), where
``argv[1]`` is a freshly mounted tmpfs of a few hundred KB: the disk really is full.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from storage import MediaStore, StorageFullError


async def chunks(n: int) -> AsyncIterator[bytes]:
    for _ in range(n):
        yield os.urandom(256 * 1024)


async def main(root: Path) -> dict[str, object]:
    store = MediaStore(root / "media")
    small = await store.put_bytes(b"fits")
    try:
        await store.put(chunks(8), limit=1 << 30)
        outcome = "stored"
    except StorageFullError as exc:
        outcome = f"full: {exc}"
    leftovers = sorted(p.name for p in (root / "media" / "tmp").iterdir())
    return {"outcome": outcome, "tmp": leftovers, "small_kept": small.path.read_bytes() == b"fits",
            "blobs": [b.sha256 for b in await store.list_blobs()]}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(Path(sys.argv[1])))))
