"""An MCP tool's answer as the text the model reads, and its input schema as one we can validate."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jsonschema
import mcp.types as mt
from jsonschema.exceptions import SchemaError

EMPTY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}


def usable_schema(schema: object) -> Mapping[str, Any]:
    """The tool's ``inputSchema`` when it is a valid JSON schema of an object; otherwise an empty
    object schema (the model may still call the tool; the server checks the arguments itself)."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return EMPTY_SCHEMA
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except SchemaError:
        return EMPTY_SCHEMA
    except Exception:  # a $schema the library does not know, a broken $ref: not worth a failed server
        return EMPTY_SCHEMA
    return schema


def _size(data: str) -> str:
    # base64: four characters carry three bytes
    n = len(data) * 3 // 4
    return f"{n / 1024:.1f} KB" if n >= 1024 else f"{n} bytes"


def _describe(part: mt.ContentBlock) -> str:
    if isinstance(part, mt.TextContent):
        return part.text
    if isinstance(part, mt.ImageContent):
        return f"[image: {part.mime_type}, {_size(part.data)}]"
    if isinstance(part, mt.AudioContent):
        return f"[audio: {part.mime_type}, {_size(part.data)}]"
    if isinstance(part, mt.ResourceLink):
        return f"[resource link: {part.name} <{part.uri}>]"
    if isinstance(part, mt.EmbeddedResource):
        res = part.resource
        if isinstance(res, mt.TextResourceContents):
            return f"[resource {res.uri}]\n{res.text}"
        return f"[resource {res.uri}: {res.mime_type or 'binary'}, {_size(res.blob)}]"
    return f"[{getattr(part, 'type', 'unknown')} content]"


def result_text(result: mt.CallToolResult) -> str:
    """Text parts joined; images, audio and resources described in a line each; the structured
    content when there is nothing else."""
    parts = [_describe(p) for p in result.content]
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts)
