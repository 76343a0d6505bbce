"""Tool names, schemas and results of MCP tools, without a server."""

from __future__ import annotations

import mcp.types as mt
import pytest

from core.tools.mcp import (
    EMPTY_SCHEMA,
    MAX_TOOL_NAME,
    McpServerSpec,
    result_text,
    tool_name,
    unique_names,
    usable_schema,
)


def test_names_are_sanitised_and_fit_64_characters() -> None:
    assert tool_name("github", "list_issues") == "mcp_github_list_issues"
    assert tool_name("my server", "get.file/v2") == "mcp_my_server_get_file_v2"
    long = tool_name("s", "x" * 100)
    assert len(long) == MAX_TOOL_NAME and long.startswith("mcp_s_x")
    names = unique_names("s", ["a.b", "a_b", "a b"])
    assert list(names) == ["mcp_s_a_b", "mcp_s_a_b_2", "mcp_s_a_b_3"]
    assert list(names.values()) == ["a.b", "a_b", "a b"]
    cut = unique_names("s", ["y" * 100, "y" * 101])
    assert all(len(n) <= MAX_TOOL_NAME for n in cut) and len(cut) == 2


@pytest.mark.parametrize("schema", [None, [], {"type": "array"}, {"type": "object", "properties": 3},
                                    {"type": "object", "properties": {"x": {"type": "nonsense"}}}])
def test_an_invalid_schema_falls_back_to_an_empty_object(schema: object) -> None:
    assert usable_schema(schema) == EMPTY_SCHEMA


def test_a_valid_schema_is_kept() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert usable_schema(schema) is schema


def test_results_join_text_and_describe_the_rest() -> None:
    result = mt.CallToolResult(content=[
        mt.TextContent(text="first"),
        mt.ImageContent(data="QUFBQQ==", mime_type="image/png"),
        mt.ResourceLink(name="report", uri="file:///tmp/r.pdf"),
        mt.EmbeddedResource(resource=mt.TextResourceContents(uri="mem://note", text="inline text")),
        mt.TextContent(text="last"),
    ])
    text = result_text(result)
    assert text.splitlines()[0] == "first"
    assert "[image: image/png, 6 bytes]" in text
    assert "[resource link: report <file:///tmp/r.pdf>]" in text
    assert "[resource mem://note]\ninline text" in text
    assert text.endswith("last")
    assert result_text(mt.CallToolResult(content=[], structured_content={"n": 1})) == '{"n": 1}'


def test_a_spec_needs_one_transport_and_scrubs_its_secrets() -> None:
    with pytest.raises(ValueError, match="either command or url"):
        McpServerSpec("x")
    spec = McpServerSpec("x", url="https://mcp.example/mcp", headers={"Authorization": "Bearer abcdef123"})
    assert spec.transport == "http" and spec.toolset == "mcp:x"
    assert spec.scrub("sent Bearer abcdef123 twice: abcdef123") == "sent [redacted] twice: [redacted]"
    assert "abcdef123" not in repr(spec)
