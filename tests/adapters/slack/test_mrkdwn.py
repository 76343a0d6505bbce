"""Markdown -> Slack mrkdwn, and splitting replies by the converted length without losing text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters._split import join_chunks, split_text
from adapters.slack import mrkdwn_budget, to_mrkdwn


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** and __also__", "*bold* and *also*"),
        ("*italic* here", "_italic_ here"),
        ("~~gone~~", "~gone~"),
        ("[docs](https://example.com/a?b=1&c=2)", "<https://example.com/a?b=1&amp;c=2|docs>"),
        ("# Heading", "*Heading*"),
        ("### Small **heading**", "*Small heading*"),
        ("- one\n* two\n+ three", "• one\n• two\n• three"),
        ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
        ("`**kept** <x>`", "`**kept** &lt;x&gt;`"),
        ("```python\nif a < b: **x**\n```\n**after**", "```python\nif a &lt; b: **x**\n```\n*after*"),
        ("2 * 3 * 4", "2 * 3 * 4"),
        ("snake_case_name", "snake_case_name"),
        ("<@U123> raw mention", "&lt;@U123&gt; raw mention"),
        ("", ""),
    ],
)
def test_to_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


_piece = st.sampled_from([*"ab *_~`#-[]()<>&|\n", "https://x.io", "```", "**", "[t](https://x.io)"])
_text = st.lists(_piece, max_size=120).map("".join)


@settings(max_examples=300, deadline=None)
@given(_text)
def test_budget_bounds_the_converted_length(text: str) -> None:
    assert len(to_mrkdwn(text)) <= mrkdwn_budget(text)


@settings(max_examples=100, deadline=None)
@given(_text, st.integers(min_value=20, max_value=120))
def test_split_by_budget_is_lossless_and_fits(text: str, limit: int) -> None:
    chunks = split_text(text, limit, mrkdwn_budget)
    assert join_chunks(chunks) == text
    assert all(len(to_mrkdwn(c)) <= limit for c in chunks)
