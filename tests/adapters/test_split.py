"""Splitting replies to a platform's limit: lossless, fence-safe, unit-aware.

* every chunk measures <= limit (``len``, and Telegram's UTF-16 units), none is
  empty, and ``join_chunks`` gives back the exact input (property tests over
  random text with emoji, fences, long unbroken runs);
* every chunk but the last has balanced fences; on well-formed Markdown the
  chunks read exactly like the original (each visible character stays code or
  prose) and reopened blocks repeat the original info string;
* boundaries are chosen in order: paragraph, line, word, then a point that does
  not break up a character.

The fence reading here is written independently of the module: a line whose
first non-blank characters are ``` toggles a code block.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters._split import join_chunks, split_text, utf16_len

# -- an independent reading of the output --------------------------------------------


def is_fence(line: str) -> bool:
    return line.lstrip().startswith("```")


def balanced(chunk: str) -> bool:
    return sum(is_fence(line) for line in chunk.split("\n")) % 2 == 0


def classes(text: str) -> list[str]:
    """Per character: F (fence line), C (code), P (prose); newlines count as their line."""
    out: list[str] = []
    inside = False
    for line in text.split("\n"):
        if is_fence(line):
            cls = "F"
            inside = not inside
        else:
            cls = "C" if inside else "P"
        out.extend(cls * (len(line) + 1))
    return out[: len(text)]


def openers(text: str) -> list[str]:
    """Per character: the stripped line of the block open there ("" outside).

    A fence line's own characters belong to the state before it (a cut in its
    indentation leaves it for the next chunk); its newline to the state after."""
    out: list[str] = []
    current = ""
    for line in text.split("\n"):
        out.extend([current] * len(line))
        if is_fence(line):
            current = "" if current else line.strip()
        out.append(current)
    return out[: len(text)]


@dataclass
class Piece:
    head: str  # reopening line added at the start ("" if none)
    body: str  # original text
    tail: str  # closing marker added at the end ("" if none)


def pieces(chunks: list[str]) -> list[Piece]:
    """Take chunks apart by the documented rule: a chunk ending in newline plus the
    backtick run that starts the next chunk got a closing marker, and then the
    next chunk's first line is the reopening marker."""
    out: list[Piece] = []
    reopened = False
    for i, chunk in enumerate(chunks):
        head = ""
        if reopened:
            head, _, chunk = chunk.partition("\n")
            head += "\n"
        tail = ""
        if i + 1 < len(chunks):
            nxt = chunks[i + 1]
            run = nxt[: len(nxt) - len(nxt.lstrip("`"))]
            if len(run) >= 3 and chunk.endswith("\n" + run):
                tail, chunk = chunk[-len(run) - 1 :], chunk[: -len(run) - 1]
        reopened = bool(tail)
        out.append(Piece(head, chunk, tail))
    return out


def check_basic(text: str, limit: int, measure: object, chunks: list[str]) -> None:
    assert callable(measure)
    assert all(chunk for chunk in chunks), chunks
    assert all(measure(chunk) <= limit for chunk in chunks), [(measure(c), c) for c in chunks]
    assert join_chunks(chunks) == text
    assert "".join(p.body for p in pieces(chunks)) == text
    assert all(balanced(chunk) for chunk in chunks[:-1]), chunks
    if measure(text) <= limit:
        assert chunks == ([text] if text else [])


def check_faithful(text: str, chunks: list[str]) -> None:
    """Each chunk, read on its own, shows the original's code and prose unchanged."""
    want, want_openers, at = classes(text), openers(text), 0
    for piece in pieces(chunks):
        local = classes(piece.head + piece.body + piece.tail)[len(piece.head) :]
        for offset, char in enumerate(piece.body):
            if not char.isspace():
                assert local[offset] == want[at + offset], (at + offset, text, chunks)
        if piece.head:
            assert piece.head == want_openers[at] + "\n", (at, text, chunks)
        at += len(piece.body)
    assert balanced(chunks[-1]) == balanced(text)


# -- generators ------------------------------------------------------------------------

ASTRAL = ["😀", "🎉", "𝔘", "👨\u200d👩\u200d👧", "🇫🇷", "👍🏽", "❤️"]
TOKENS = [
    *ASTRAL,
    "a",
    "word",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\t",
    "`",
    "``",
    "```",
    "````",
    "```python\n",
    "```js\n",
    "\n```\n",
    "````md\n",
    "e\u0301",
    "中文",
    "\r\n",
    "x" * 40,
    "`code span`",
    "`" * 20,
    "\n" + "`" * 20,
]
# Anything at all: random tokens and random unicode.
ANY_TEXT = st.lists(st.sampled_from(TOKENS) | st.text(max_size=6), max_size=80).map("".join)

WORD = st.sampled_from(
    ["the", "gateway", "splits", "replies", "😀", "🇫🇷", "naïve", "中文", "`x`", "a_b"]
) | st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=25)
PROSE_LINE = st.lists(WORD, min_size=1, max_size=12).map(" ".join)
CODE_LINE = st.lists(WORD | st.sampled_from(["=", "(", ")", "{", "}", "  "]), max_size=10).map("".join)


@st.composite
def markdown(draw: st.DrawFn) -> str:
    """Well-formed replies: paragraphs, lists and fenced blocks with info strings."""
    blocks: list[str] = []
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):
            lines = draw(st.lists(PROSE_LINE, min_size=1, max_size=4))
            bullet = draw(st.sampled_from(["", "- ", "1. "]))
            blocks.append("\n".join(bullet + line for line in lines))
        else:
            info = draw(st.sampled_from(["", "python", "js", "bash", "typescript"]))
            fence = draw(st.sampled_from(["```", "```", "````"]))
            indent = draw(st.sampled_from(["", "", "   "]))
            body = draw(st.lists(CODE_LINE, max_size=8))
            blocks.append(
                "\n".join([indent + fence + info, *(indent + line for line in body), indent + fence])
            )
    text = draw(st.sampled_from(["\n\n", "\n"])).join(blocks)
    if draw(st.integers(0, 9)) == 0:  # sometimes the model forgets to close its last block
        text += "\n```python\nunclosed = True"
    return text


# -- properties ----------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(text=ANY_TEXT, limit=st.integers(16, 90))
def test_any_text_len(text: str, limit: int) -> None:
    check_basic(text, limit, len, split_text(text, limit))


@settings(max_examples=200, deadline=None)
@given(text=ANY_TEXT, limit=st.sampled_from([16, 17, 23, 50, 64]))
def test_any_text_utf16(text: str, limit: int) -> None:
    check_basic(text, limit, utf16_len, split_text(text, limit, utf16_len))


@settings(max_examples=100, deadline=None)
@given(text=ANY_TEXT, limit=st.integers(2, 15))
def test_tiny_limits_stay_lossless(text: str, limit: int) -> None:
    # Too small for fence markers: plain splitting, still within the limit and exact.
    chunks = split_text(text, limit, utf16_len)
    assert all(chunk and utf16_len(chunk) <= limit for chunk in chunks)
    assert join_chunks(chunks) == text


@settings(max_examples=200, deadline=None)
@given(text=markdown(), limit=st.integers(40, 160), telegram=st.booleans())
def test_markdown_reads_the_same_in_every_chunk(text: str, limit: int, telegram: bool) -> None:
    measure = utf16_len if telegram else len
    chunks = split_text(text, limit, measure)
    check_basic(text, limit, measure, chunks)
    check_faithful(text, chunks)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=50) | ANY_TEXT)
def test_utf16_len_counts_astral_characters_twice(text: str) -> None:
    assert utf16_len(text) == sum(2 if ord(char) > 0xFFFF else 1 for char in text)


# -- units ---------------------------------------------------------------------------


def test_empty_and_short_text() -> None:
    assert split_text("", 10) == []
    assert join_chunks([]) == ""
    assert split_text("hello", 5) == ["hello"]
    assert split_text("```py\nunclosed", 100) == ["```py\nunclosed"]


@pytest.mark.parametrize("limit", [0, -1])
def test_limit_must_be_positive(limit: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        split_text("abc", limit)


def test_character_larger_than_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="too small"):
        split_text("ab😀", 1, utf16_len)


def test_prefers_paragraph_then_line_then_word() -> None:
    text = "first paragraph\n\nsecond line one\nsecond line two and more words"
    assert split_text(text, 40) == ["first paragraph\n\nsecond line one\n", "second line two and more words"]
    assert split_text("one line\nanother line", 15) == ["one line\n", "another line"]
    assert split_text("alpha beta gamma delta", 12) == ["alpha beta ", "gamma delta"]


def test_boundary_must_be_in_the_second_half() -> None:
    # A newline near the start would waste most of the chunk: cut at a word instead.
    assert split_text("ab\ncdefgh ijklmnop", 12) == ["ab\ncdefgh ", "ijklmnop"]


def test_long_run_without_spaces_is_cut_hard() -> None:
    chunks = split_text("x" * 25, 10)
    assert chunks == ["x" * 10, "x" * 10, "x" * 5]


def test_code_block_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"print({i})" for i in range(8))
    text = f"Here:\n```python\n{code}\n```\nDone."
    chunks = split_text(text, 50)
    assert len(chunks) > 2
    assert chunks[0].startswith("Here:\n```python\n") and chunks[0].endswith("\n```")
    for chunk in chunks[1:-1]:
        assert chunk.startswith("```python\n") and chunk.endswith("\n```")
    assert all(balanced(chunk) for chunk in chunks)
    assert join_chunks(chunks) == text


def test_longer_fence_is_closed_with_the_same_run() -> None:
    text = "````md\n" + "\n".join(f"line {i}" for i in range(12)) + "\n````"
    chunks = split_text(text, 40)
    assert len(chunks) > 2
    assert chunks[0].startswith("````md\n") and chunks[0].endswith("\n````")
    assert chunks[1].startswith("````md\n") and chunks[1].endswith("\n````")
    assert join_chunks(chunks) == text


def test_any_fence_line_closes_a_block() -> None:
    # Chat platforms end a block at the next ```, whatever its length or info
    # string; so does the splitter, or its markers would land in the wrong place.
    text = "````md\n" + "\n".join(["```", "nested", "```"] * 6) + "\n````"
    chunks = split_text(text, 30)
    assert all(balanced(chunk) for chunk in chunks[:-1])
    assert join_chunks(chunks) == text
    check_faithful(text, chunks)


def test_markers_shrink_when_the_info_string_is_too_long() -> None:
    info = "python " + "x" * 30  # longer than half the limit
    text = f"```{info}\n" + "\n".join(f"line {i}" for i in range(20)) + "\n```"
    chunks = split_text(text, 60)
    assert all(chunk.startswith("```\n") for chunk in chunks[1:])
    assert all(len(chunk) <= 60 for chunk in chunks)
    assert join_chunks(chunks) == text


def test_text_that_looks_like_a_marker_survives() -> None:
    # A real closing fence right at a cut, followed by another fence: a decoder that
    # strips any trailing "\n```" would eat it.
    text = "```\n" + "a" * 20 + "\n```" + "```\nb\n```"
    for limit in range(16, len(text) + 1):
        chunks = split_text(text, limit)
        assert join_chunks(chunks) == text, (limit, chunks)
        assert all(len(chunk) <= limit for chunk in chunks)


@pytest.mark.parametrize("limit", range(20, 40))
def test_forced_cut_never_mimics_a_marker(limit: int) -> None:
    # The opening line is too long to end a chunk with its closing marker, so a
    # forced cut is needed. Right after three of the six backticks of the
    # closing line, the chunk would end in "\n```" and the next start with
    # exactly "```": what an added marker pair looks like. That cut is refused.
    text = "````" + "z" * (limit - 8) + "\n" + "`" * 6 + "\nafter"
    chunks = split_text(text, limit)
    assert all(0 < len(chunk) <= limit for chunk in chunks)
    assert all(balanced(chunk) for chunk in chunks[:-1])
    assert join_chunks(chunks) == text, chunks


def test_draft_markers_were_never_removed() -> None:
    # Regression: the first draft checked for an open fence *after* the added
    # closer had closed it, so join_chunks kept every marker.
    text = "```python\n" + "x = 1\n" * 20 + "```"
    chunks = split_text(text, 40)
    assert len(chunks) > 1
    assert join_chunks(chunks) == text


def has_empty_block(chunk: str) -> bool:
    inside, content = False, False
    for line in chunk.split("\n"):
        if is_fence(line):
            if inside and not content:
                return True
            inside, content = not inside, False
        elif line.strip():
            content = True
    return False


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("Some words here\n```python\ncode()\n```\nmore words after", 30),
        ("intro " * 6 + "\n```python\n" + "code()\n" * 10 + "```", 45),
        ("```\nline one\nline two\n```\nand the rest goes here", 24),
    ],
)
def test_no_empty_code_block_at_a_line_cut(text: str, limit: int) -> None:
    chunks = split_text(text, limit)
    assert len(chunks) > 1
    assert not any(has_empty_block(chunk) for chunk in chunks), chunks
    assert join_chunks(chunks) == text


def test_unclosed_block_stays_open_only_in_the_last_chunk() -> None:
    text = "```python\n" + "value = 1\n" * 12
    chunks = split_text(text, 40)
    assert all(balanced(chunk) for chunk in chunks[:-1])
    assert not balanced(chunks[-1])
    assert join_chunks(chunks) == text


def test_no_cut_right_before_inline_backticks() -> None:
    # Cutting at the space would start the next chunk with a ``` line, which a
    # platform would read as a code block.
    text = "see this example ```inline code``` ok"
    chunks = split_text(text, 20)
    assert all(not is_fence(chunk.split("\n")[0]) for chunk in chunks[1:]), chunks
    assert join_chunks(chunks) == text


def test_no_cut_inside_inline_code_when_a_word_boundary_exists() -> None:
    text = "call it like `run fast now` please"
    chunks = split_text(text, 24)
    assert chunks == ["call it like ", "`run fast now` please"]


def test_fence_line_longer_than_the_limit_still_splits() -> None:
    # No cut can keep such a line whole; chunks stay within the limit and exact.
    text = "```" + "y" * 50 + "\nbody\n```"
    chunks = split_text(text, 20)
    assert all(0 < len(chunk) <= 20 for chunk in chunks)
    assert all(balanced(chunk) for chunk in chunks[:-1])
    assert join_chunks(chunks) == text


@pytest.mark.parametrize(
    "cluster",
    ["👨\u200d👩\u200d👧\u200d👦", "🇫🇷", "👍🏽", "e\u0301", "❤\ufe0f"],
    ids=["zwj-family", "flag", "skin-tone", "combining-accent", "variation-selector"],
)
def test_hard_cuts_keep_character_clusters_whole(cluster: str) -> None:
    text = cluster * 12
    for limit in range(16, 30):
        chunks = split_text(text, limit, utf16_len)
        assert all(utf16_len(chunk) <= limit for chunk in chunks)
        assert all(
            len(chunk) % len(cluster) == 0 and chunk == cluster * (len(chunk) // len(cluster))
            for chunk in chunks
        )
        assert join_chunks(chunks) == text


def test_telegram_units_count_astral_characters_twice() -> None:
    text = "😀" * 10
    chunks = split_text(text, 16, utf16_len)
    assert chunks == ["😀" * 8, "😀" * 2]
    assert split_text(text, 16) == [text]  # in code points it fits


def test_split_never_separates_a_surrogate_pair() -> None:
    # Text decoded with surrogatepass keeps astral characters as two code points.
    raw = "😀".encode("utf-16-le").decode("utf-16-le", "surrogatepass")
    paired = "a" + "\ud83d\ude00" * 10
    assert raw == "😀"  # normal decoding joins them; build the pair by hand instead
    chunks = split_text(paired, 4)
    assert all(not ("\ud800" <= chunk[-1] <= "\udbff") for chunk in chunks)
    assert join_chunks(chunks) == paired


def test_reply_of_realistic_size() -> None:
    code = "\n".join(f"    result.append(compute({i}))  # step {i}" for i in range(300))
    text = ("Some explanation. " * 200 + "\n\n```python\ndef f():\n" + code + "\n```\n\nThat is all. 🎉") * 3
    chunks = split_text(text, 4096, utf16_len)
    check_basic(text, 4096, utf16_len, chunks)
    check_faithful(text, chunks)
    assert len(chunks) == pytest.approx(utf16_len(text) / 4096, abs=2)
