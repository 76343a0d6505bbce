"""``<think>…</think>`` blocks of local reasoning models, taken out of an answer's text.

Qwen3, DeepSeek-R1 and their kin write their reasoning into the content between
these tags when the server does not split it off into ``reasoning_content``. Some
templates open the block in the prompt, so the answer holds only the closing tag:
everything before it is reasoning too.
"""

from __future__ import annotations

import re

__all__ = ["split_think"]

_BLOCK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.S)
_CLOSE = "</think>"


def split_think(text: str) -> tuple[str | None, str]:
    """``(reasoning, answer)`` of ``text``; reasoning is None when there was no think block."""
    if "think>" not in text:
        return None, text
    parts: list[str] = []
    close, opening = text.find(_CLOSE), text.find("<think>")
    if close >= 0 and (opening < 0 or close < opening):
        parts.append(text[:close])
        text = text[close + len(_CLOSE):]
    kept: list[str] = []
    at = 0
    for match in _BLOCK.finditer(text):
        kept.append(text[at:match.start()])
        parts.append(match.group(1))
        at = match.end()
    kept.append(text[at:])
    reasoning = "\n\n".join(p.strip() for p in parts if p.strip())
    return (reasoning or None), "".join(kept).strip()
