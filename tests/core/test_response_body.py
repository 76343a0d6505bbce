"""``core._body``: a large response body parsed in steps, and a body cut at the cap closed where it was cut.

Slices are made tiny here (64 bytes) so that every escape, UTF-8 sequence and
surrogate pair lands on a slice boundary somewhere in the generated cases.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core._body import parse_json

TINY = {"inline_bytes": 0, "slice_bytes": 64}

# Text that exercises every escape: quotes, backslashes, control characters, non-ASCII, astral characters.
_TEXT = st.text(st.sampled_from(['"', "\\", "\n", "\t", "\x01", "a", " ", "é", "€", "😀", "\ud800", "/"]) | st.characters(),
                max_size=400)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)


def _completion(content: str, **message: Any) -> dict[str, Any]:
    return {"id": "c1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content, **message},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5}}


@settings(max_examples=300, deadline=None)
@given(value=_JSON, ascii_only=st.booleans())
async def test_any_json_parses_in_steps_as_json_loads_parses_it(value: Any, ascii_only: bool) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert await parse_json(body, **TINY) == json.loads(body)


@settings(max_examples=300, deadline=None)
@given(content=_TEXT, ascii_only=st.booleans(), data=st.data())
async def test_a_body_cut_inside_the_answer_keeps_what_came_before_the_cut(
    content: str, ascii_only: bool, data: st.DataObject
) -> None:
    body = json.dumps(_completion(content), ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    start = body.index(b'"content": "') + len(b'"content": "')
    end = start + len(json.dumps(content, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")) - 2
    cut = data.draw(st.integers(start, end), label="cut")

    payload = await parse_json(body[:cut], cut=True, **TINY)

    message = payload["choices"][0]["message"]
    assert message["role"] == "assistant"
    kept = message["content"]
    assert content.startswith(kept)
    # What is lost at the cut is at most the last escape (a surrogate pair: 12 bytes) and a character.
    def encoded(n: int) -> int:
        return len(json.dumps(content[:n], ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")) - 2

    surely_kept = max((n for n in range(len(content) + 1) if encoded(n) <= cut - start - 20), default=0)
    assert len(kept) >= surely_kept


# Each unit encodes to an odd number of bytes, so the windows fall at a different place in it each time.
@pytest.mark.parametrize(("unit", "ascii_only"), [('ab"\\c\n', False), ('x\\\\"😀é\t', False),
                                                  ("\\" * 7 + '"q', False), ('😀é"\\z', True)])
async def test_long_bodies_parse_whole_and_cut_wherever_the_scan_and_slice_windows_fall(unit: str,
                                                                                      ascii_only: bool) -> None:
    # ~1 MB of escape-dense text: the 32 KB scan windows and 128 KB slices end at every kind of byte
    # (ensure_ascii: an emoji is a surrogate pair of escapes, \ud83d\ude00).
    content = unit * (2**20 // len(unit.encode()))
    body = json.dumps(_completion(content), ensure_ascii=ascii_only).encode()
    assert (await parse_json(body, inline_bytes=0))["choices"][0]["message"]["content"] == content
    start = body.index(b'"content": "') + len(b'"content": "')
    for cut in range(start + 300_000, start + 300_000 + 23):
        kept = (await parse_json(body[:cut], cut=True))["choices"][0]["message"]["content"]
        assert content.startswith(kept)
        assert len(json.dumps(kept, ensure_ascii=ascii_only).encode()) - 2 > 300_000 - 40  # what the cut held


async def test_a_cut_in_a_key_or_between_values_drops_only_the_unfinished_part() -> None:
    body = json.dumps(_completion("x" * 300)).encode()
    usage_key = body.index(b'"completion_tokens"')
    payload = await parse_json(body[: usage_key + 5], cut=True, **TINY)
    assert payload["usage"] == {"prompt_tokens": 3}
    assert payload["choices"][0]["message"]["content"] == "x" * 300


async def test_a_body_that_is_not_json_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        await parse_json(b"<html>" + b"x" * 1000 + b"</html>", **TINY)
    with pytest.raises(ValueError):
        await parse_json(b'{"a": 1, "b": ', cut=True, **TINY)


async def test_the_loop_runs_between_the_slices_of_a_long_answer() -> None:
    content = "word " * 800_000  # 4 MB: 32 slices of the default size
    body = json.dumps(_completion(content)).encode()
    ticks = 0
    stop = asyncio.Event()

    async def heartbeat() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0)

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0)
    before = ticks
    payload = await parse_json(body)
    during = ticks - before
    stop.set()
    await beat
    assert payload["choices"][0]["message"]["content"] == content
    assert during >= 15
