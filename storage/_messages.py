"""A message as both backends store and give it back: the columns of an OpenAI-format message,
JSON for its structured fields, and a stored row as the model reads it again. No SQL."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: the token columns ``record_usage`` adds to, and the billing columns it sets
USAGE_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
    "api_call_count",
)
BILLING_FIELDS = (
    "billing_provider",
    "billing_base_url",
    "billing_mode",
    "cost_status",
    "cost_source",
    "pricing_version",
)

#: columns holding JSON text, decoded when a message is read
JSON_FIELDS = ("tool_calls", "reasoning_details", "codex_reasoning_items", "codex_message_items")


def json_or_none(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def decode_json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def message_columns(message: Mapping[str, Any]) -> dict[str, Any]:
    """Map an OpenAI-format message dict onto append_message's keywords."""
    cols: dict[str, Any] = {"role": message["role"], "content": message.get("content")}
    if not isinstance(cols["content"], str | None):
        cols["content"] = json_or_none(cols["content"])  # multimodal parts
    for key in (
        "tool_call_id",
        "tool_calls",
        "token_count",
        "finish_reason",
        "reasoning",
        "reasoning_content",
        "reasoning_details",
        "codex_reasoning_items",
        "codex_message_items",
        "timestamp",
    ):
        if message.get(key) is not None:
            cols[key] = message[key]
    name = message.get("tool_name") or (message.get("name") if message["role"] == "tool" else None)
    if name is not None:
        cols["tool_name"] = name
    return cols


def to_conversation_message(row: dict[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": row["role"], "content": row["content"]}
    if row.get("tool_call_id"):
        msg["tool_call_id"] = row["tool_call_id"]
    if row["role"] == "tool" and row.get("tool_name"):
        msg["name"] = row["tool_name"]
    if row.get("tool_calls"):
        msg["tool_calls"] = row["tool_calls"]
    if row["role"] == "assistant":
        for key in ("finish_reason", "reasoning", "reasoning_content", "reasoning_details",
                    "codex_reasoning_items", "codex_message_items"):
            if row.get(key) is not None:
                msg[key] = row[key]
    return msg
