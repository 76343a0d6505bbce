"""The text forms of a tool call, the refusal test and the stream gate, on their own."""

from __future__ import annotations

import json

import pytest

from core.toolcalls import StreamGate, parse_text_calls, rejects_tools, split_think
from tests.fakes._openai_local import refusal


@pytest.mark.parametrize(
    ("text", "name", "arguments"),
    [
        ('<tool_call>{"name": "memory", "arguments": {"a": 1}}</tool_call>', "memory", {"a": 1}),
        ('<tool_call>{"name": "memory", "arguments": "{\\"a\\": 1}"}', "memory", {"a": 1}),  # unclosed, args as text
        ('<tool_call>{"name": "memory", "parameters": {"a": 1}}</tool_call>', "memory", {"a": 1}),
        ('<|tool_call>call:web_fetch{url:<|"|>https://x.org/a,b<|"|>,max:3}<tool_call|>', "web_fetch",
         {"url": "https://x.org/a,b", "max": 3}),
        ("<start_function_call>call:memory{action:<escape>add<escape>}<end_function_call>", "memory",
         {"action": "add"}),
        ('call:terminal{command: "ls -la", opts: {deep: true, n: [1, 2.5]}}', "terminal",
         {"command": "ls -la", "opts": {"deep": True, "n": [1, 2.5]}}),
        ("call:search(query: 'bees', limit=5)", "search", {"query": "bees", "limit": 5}),
        ('```tool_call\n{"name": "memory", "arguments": {}}\n```', "memory", {}),
    ],
)
def test_each_form_is_read(text: str, name: str, arguments: dict[str, object]) -> None:
    [call] = parse_text_calls(text).calls
    assert call.problem is None and call.name == name and json.loads(call.arguments) == arguments


@pytest.mark.parametrize(
    "text",
    [
        "Use `call:` in your config, like call:this.",
        '```json\n{"name": "Bob", "age": 3}\n```',
        '```python\nprint({"name": "x", "arguments": 1})\n```',
        "no forms at all",
    ],
)
def test_ordinary_text_is_not_a_call(text: str) -> None:
    parsed = parse_text_calls(text)
    assert parsed.calls == [] and parsed.content == text


def test_a_tag_inside_a_think_block_is_reasoning_not_a_call() -> None:
    reasoning, answer = split_think('<think>maybe <tool_call>{"name": "x"}</tool_call></think>Plain answer.')
    assert reasoning is not None and "tool_call" in reasoning
    assert answer == "Plain answer." and parse_text_calls(answer).calls == []


@pytest.mark.parametrize("server", ["ollama", "llamacpp"])
def test_the_real_refusals_are_recognised(server: str) -> None:
    _, body = refusal(server, "gemma3:4b")  # type: ignore[arg-type]
    assert rejects_tools(body)
    assert rejects_tools({"error": "registry.ollama.ai/library/llama3:8b does not support tools"})  # /api/chat shape
    assert rejects_tools({"error": {"message": "Unsupported param: tool_choice"}})


@pytest.mark.parametrize(
    "body",
    [
        {"error": {"message": "the request exceeds the available context size"}},
        {"error": {"message": "Invalid 'messages[3]': a tool message must follow tool_calls"}},
        {"error": {"message": "model 'x' not found"}},
        None,
        "plain text",
    ],
)
def test_other_errors_are_not_refusals(body: object) -> None:
    assert not rejects_tools(body)


def _gate(pieces: list[str], *, calls: bool = True) -> list[str]:
    out: list[str] = []
    gate = StreamGate(out.append, lambda: out.append("<restart>"), calls=calls)
    for piece in pieces:
        gate.feed(piece)
    gate.close()
    return out


def test_the_gate_holds_a_tag_split_over_pieces_and_shows_nothing_of_it() -> None:
    assert "".join(_gate(["Checking.\n", "<tool", '_call>{"name"', ': "x"}</tool_call>'])) == "Checking.\n"


def test_the_gate_lets_an_ordinary_code_block_through_once_it_closes() -> None:
    shown = "".join(_gate(["See:\n``", "`py\nprint(1)\n", "```\nDone."]))
    assert shown == "See:\n```py\nprint(1)\n```\nDone."


def test_the_gate_holds_a_fenced_call_and_a_call_line() -> None:
    assert "".join(_gate(["Ok\n```json\n", '{"name": "m", "arguments": {}}\n', "```"])) == "Ok\n"
    assert "".join(_gate(["ca", "ll:memory{a: ", '"b"}\n', "more"])) == ""


def test_the_gate_takes_back_reasoning_whose_block_opened_in_the_prompt() -> None:
    assert _gate(["thinking ", "hard</thi", "nk>\n\nAnswer"], calls=False) == ["thinking ", "hard", "<restart>",
                                                                             "Answer"]


def test_without_calls_the_gate_passes_forms_through() -> None:
    assert "".join(_gate(['<tool_call>{"name": "x"}</tool_call>'], calls=False)) == '<tool_call>{"name": "x"}</tool_call>'


def test_a_code_block_is_shown_as_it_comes_not_held_to_its_end() -> None:
    out: list[str] = []
    gate = StreamGate(out.append, lambda: None, calls=True)
    for piece in ["Run:\n```sh\n", "ls -la\n", "echo hi\n"]:
        gate.feed(piece)
    assert "".join(out) == "Run:\n```sh\nls -la\necho hi\n"  # shown before the block closed
    for piece in ["``", "`\nThen ```inline``` and ", "more"]:
        gate.feed(piece)
    gate.close()
    assert "".join(out) == "Run:\n```sh\nls -la\necho hi\n```\nThen ```inline``` and more"
