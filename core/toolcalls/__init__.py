"""Tool calls for models that write them as text, and reasoning kept out of the answer.

The model client (``core.llm``) is the only user: it asks ``ToolFormats`` how a model
takes tools, makes a request fit (``text_request``), gates a stream (``StreamGate``) and
settles each answer into the OpenAI shape (``settle_message``). The agent loop sees
native ``tool_calls`` and a ``reasoning_content`` whatever the model wrote.

Modules: ``_strategy`` (formats, the refusal test, request and answer), ``_forms`` (the
text forms: tags, Gemma's ``call:``, fenced JSON), ``_relaxed`` (Gemma's argument syntax),
``_render`` (history rendered for a text model), ``_think`` (``<think>`` blocks),
``_gate`` (a stream held back where a form may start).
"""

from ._forms import ParsedAnswer, TextCall, parse_text_calls
from ._gate import StreamGate
from ._render import describe_tools, render_messages
from ._strategy import (
    INVALID_CALL_NAME,
    TOOL_FORMATS,
    ToolFormat,
    ToolFormats,
    offered_names,
    rejects_tools,
    settle_message,
    text_request,
    tool_format_for,
)
from ._think import split_think

__all__ = [
    "INVALID_CALL_NAME",
    "TOOL_FORMATS",
    "ParsedAnswer",
    "StreamGate",
    "TextCall",
    "ToolFormat",
    "ToolFormats",
    "describe_tools",
    "offered_names",
    "parse_text_calls",
    "rejects_tools",
    "render_messages",
    "settle_message",
    "split_think",
    "text_request",
    "tool_format_for",
]
