"""Markdown -> MarkdownV2: escaping, conversions, and Telegram's parser never refusing the result.

The parser used as the judge is the emulator's ``parse_markdown_v2`` (modelled on TDLib's), so
"parses" here means what Telegram would accept.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters._split import join_chunks, split_text, utf16_len
from adapters.telegram._format import RESERVED, escape, markdown_v2_budget, to_markdown_v2
from tests.emulators.fake_telegram import parse_markdown_v2

RESERVED_CHARS = "_*[]()~`>#+-=|{}.!\\"


def unescape(text: str) -> str:
    """Undo MarkdownV2 escaping (a backslash before any ASCII character)."""
    return re.sub(r"\\([\x01-\x7e])", r"\1", text)


def rendered(markdown: str) -> tuple[str, list[dict[str, object]]]:
    return parse_markdown_v2(to_markdown_v2(markdown))


# -- escaping ----------------------------------------------------------------------------


def test_reserved_set_is_telegrams() -> None:
    assert frozenset(RESERVED_CHARS) == RESERVED


@pytest.mark.parametrize("char", list(RESERVED_CHARS))
def test_every_reserved_character_is_escaped_alone(char: str) -> None:
    assert to_markdown_v2(char) == "\\" + char
    assert rendered(char) == (char, [])


@pytest.mark.parametrize("char", list(RESERVED_CHARS))
def test_every_reserved_character_is_escaped_in_prose(char: str) -> None:
    text = f"a{char}b {char}{char} end{char}"
    plain, entities = parse_markdown_v2(escape(text))
    assert plain == text and entities == []


def test_plain_prose_keeps_its_text() -> None:
    text = "Version 1.2.3 (beta) costs $5 - 10% off! a+b=c; {x|y} #tag > quote. C:\\path"
    plain, entities = rendered(text)
    assert plain == text and entities == []


def test_backslashes_and_escapes_in_the_source_are_literal() -> None:
    text = r"a \* b \\ c \_ d"
    assert rendered(text) == (text, [])


def test_emoji_and_astral_characters_pass_through() -> None:
    text = "👍🏽 family 👨‍👩‍👧 flag 🇫🇷 math 𝔸 — ok."
    assert rendered(text) == (text, [])


# -- code -------------------------------------------------------------------------------


def test_code_block_is_untouched_except_backtick_and_backslash() -> None:
    code = "x = a_b * 2  # [c](d) {e} | f! ~g~ > h.\ny = 'q\\n' + `z`\n"
    source = f"Look:\n```python\n{code}```\nDone."
    converted = to_markdown_v2(source)
    inner = code.replace("\\", "\\\\").replace("`", "\\`")
    assert converted == f"Look:\n```python\n{inner}```\nDone\\."
    plain, entities = parse_markdown_v2(converted)
    assert plain == f"Look:\n{code}\nDone."
    assert entities == [{"type": "pre", "offset": 6, "length": utf16_len(code), "language": "python"}]


def test_code_block_without_language_and_indented_fences() -> None:
    source = "  ```\n  indented *code*\n  ```\nafter"
    plain, entities = rendered(source)
    assert "indented *code*" in plain and plain.endswith("after")
    assert [e["type"] for e in entities] == ["pre"]


def test_unusual_info_string_stays_inside_the_block() -> None:
    source = "```python title=x.py\nprint(1)\n```"
    plain, entities = rendered(source)
    assert plain == "python title=x.py\nprint(1)\n"
    assert entities[0]["type"] == "pre" and "language" not in entities[0]


def test_unclosed_code_block_is_closed() -> None:
    plain, entities = rendered("text\n```js\nlet a = `x`;")
    assert plain == "text\nlet a = `x`;"
    assert entities == [{"type": "pre", "offset": 5, "length": 12, "language": "js"}]


def test_inline_code_escapes_only_backtick_and_backslash() -> None:
    assert to_markdown_v2("run `rm -rf ./a_b` now.") == "run `rm -rf ./a_b` now\\."
    plain, entities = rendered("use ``a`b`` here")
    assert plain == "use a`b here" and entities == [{"type": "code", "offset": 4, "length": 3}]


def test_unmatched_backtick_is_literal() -> None:
    assert rendered("it's a ` tick") == ("it's a ` tick", [])


# -- inline formatting ---------------------------------------------------------------------


def test_bold_italic_strike() -> None:
    plain, entities = rendered("**bold** and *it* and _it2_ and ~~gone~~.")
    assert plain == "bold and it and it2 and gone."
    assert [(e["type"], e["offset"], e["length"]) for e in entities] == [
        ("bold", 0, 4),
        ("italic", 9, 2),
        ("italic", 16, 3),
        ("strikethrough", 24, 4),
    ]


def test_nested_italic_in_bold_but_never_code_in_bold() -> None:
    plain, entities = rendered("**very _much_ so** and **`code` here**")
    assert plain == "very much so and `code` here"
    assert {e["type"] for e in entities} == {"bold", "italic"}


def test_snake_case_and_arithmetic_stay_literal() -> None:
    for text in ("snake_case_name and __init__", "2 * 3 * 4", "a * b", "* bullet\n* bullet", "x_1 = y_2"):
        assert rendered(text) == (text, []), text


def test_unbalanced_markers_stay_literal() -> None:
    for text in ("**bold start", "half *italic", "_open", "~~strike", "[label](https://x", "***x***"):
        assert rendered(text) == (text, []), text


def test_adjacent_italics_do_not_become_underline() -> None:
    plain, entities = rendered("*a*_b_")
    assert plain in ("a_b_", "ab")
    assert all(e["type"] != "underline" for e in entities)


def test_heading_becomes_bold() -> None:
    plain, entities = rendered("## Results (2024)\nbody")
    assert plain == "Results (2024)\nbody"
    assert entities == [{"type": "bold", "offset": 0, "length": 14}]


# -- links ------------------------------------------------------------------------------


def test_link_with_parentheses_and_backslash_in_url() -> None:
    converted = to_markdown_v2("see [the docs](https://ex.com/a_(b)\\c) now")
    assert converted == "see [the docs](https://ex.com/a_(b\\)\\\\c) now"
    plain, entities = parse_markdown_v2(converted)
    assert plain == "see the docs now"
    assert entities == [{"type": "text_link", "offset": 4, "length": 8, "url": "https://ex.com/a_(b)\\c"}]


def test_link_label_is_escaped() -> None:
    plain, entities = rendered("[a.b_c!](http://x.y)")
    assert plain == "a.b_c!" and entities[0]["url"] == "http://x.y"


def test_non_web_links_stay_literal() -> None:
    for text in ("[x](javascript:alert(1))", "[x](relative/path)", "[](https://x.y)", "[x] (https://x.y)"):
        assert rendered(text) == (text, []), text


# -- properties -------------------------------------------------------------------------

MARKDOWNISH = st.lists(
    st.sampled_from([*"ab _*~`[]()#>!.\\|{}=+-\n\t", "```", "**", "](", "http://x", "👍", "é"]),
    max_size=60,
).map("".join)
ANY_TEXT = st.text(max_size=200)


@given(st.one_of(MARKDOWNISH, ANY_TEXT, st.lists(MARKDOWNISH, max_size=8).map("".join)))
@settings(max_examples=400, deadline=None)
def test_telegram_always_parses_the_conversion(text: str) -> None:
    converted = to_markdown_v2(text)
    plain, entities = parse_markdown_v2(converted)  # raises EntityParseError if Telegram would refuse it
    # Nothing but markup is lost: every other character is shown, or is a link's URL or a code language.
    shown = Counter(plain + "".join(str(e.get("url", "")) + str(e.get("language", "")) for e in entities))
    wanted = Counter(ch for ch in text if ch not in "*_~`[]()#" and ch.strip())
    assert not wanted - shown, (text, plain, entities)


@given(st.one_of(MARKDOWNISH, ANY_TEXT))
@settings(max_examples=300, deadline=None)
def test_budget_bounds_the_converted_length_and_is_additive(text: str) -> None:
    assert utf16_len(to_markdown_v2(text)) <= markdown_v2_budget(text)
    cut = len(text) // 2
    assert markdown_v2_budget(text) == markdown_v2_budget(text[:cut]) + markdown_v2_budget(text[cut:])


ESCAPE_ONLY = st.text(
    alphabet=st.characters(blacklist_characters="*_~`[#\r", blacklist_categories=("Cs",)), max_size=200
)


@given(ESCAPE_ONLY)
@settings(max_examples=200, deadline=None)
def test_text_without_markup_is_rendered_exactly(text: str) -> None:
    assert parse_markdown_v2(to_markdown_v2(text))[0] == text
    assert unescape(to_markdown_v2(text)) == text


@given(st.lists(st.one_of(ESCAPE_ONLY, st.just("\n```python\nx = `a` \\ b\n```\n"), st.just("😀")), max_size=40))
@settings(max_examples=100, deadline=None)
def test_split_then_convert_fits_and_is_lossless(parts: list[str]) -> None:
    text = "".join(parts)
    chunks = split_text(text, 300, markdown_v2_budget)
    sent = [to_markdown_v2(c) for c in chunks]
    for s in sent:
        assert utf16_len(s) <= 300
        parse_markdown_v2(s)
    assert join_chunks([unescape(s) for s in sent]) == text
