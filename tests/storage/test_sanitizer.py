"""The FTS5 query sanitizer: its rules, and a fuzz proof that no user text can
turn into an FTS5 syntax error against the real tables of a state.db."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from storage import StateStore, WriterSettings, sanitize_fts5_query

FTS_TABLES = ("messages_fts", "messages_fts_trigram")

# ------------------------------------------------------------------- rules


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # Unmatched quotes are dropped, the words stay.
        ('hello "world', '"hello" "world"'),
        ('"unterminated phrase', '"unterminated" "phrase"'),
        ('"a b" "c', '"a b" "c"'),
        # Balanced quotes stay an exact phrase.
        ('"exact phrase"', '"exact phrase"'),
        # Special characters are removed.
        ("hello!!! (world)", '"hello" "world"'),
        ("^caret {braces} [brackets] +plus", '"caret" "braces" "brackets" "plus"'),
        ("col:umn", '"col:umn"'),
        ("{}[]()^:*+", ""),
        # Hyphenated and dotted terms become phrases.
        ("chat-send", '"chat-send"'),
        ("use chat-send now", '"use" "chat-send" "now"'),
        ("v1.2.3", '"v1.2.3"'),
        # Operators survive between terms, dangling ones go.
        ("docker OR kubernetes", '"docker" OR "kubernetes"'),
        ("python NOT java", '"python" NOT "java"'),
        ("hello AND", '"hello"'),
        ("hello AND world", '"hello" AND "world"'),
        ("OR hello", '"hello"'),
        ("NOT hello", '"hello"'),
        ("hello NOT", '"hello"'),
        ("hello AND OR world", '"hello" AND "world"'),
        ("AND OR NOT", ""),
        # Lower-case words are words, as in FTS5.
        ("rock and roll", '"rock" "and" "roll"'),
        # Prefix search.
        ("deploy*", '"deploy"*'),
        ("deploy** x", '"deploy"* "x"'),
        # Nothing searchable.
        ("", ""),
        ("   ", ""),
        ('"', ""),
        ('""', ""),
        ("*", ""),
        ("\x00\x01", ""),
    ],
)
def test_sanitizer_rules(query: str, expected: str) -> None:
    assert sanitize_fts5_query(query) == expected


# ------------------------------------------------------- a real state.db


@dataclass
class FuzzDb:
    loop: asyncio.AbstractEventLoop
    store: StateStore
    conn: sqlite3.Connection


CORPUS = [
    "docker deployment of the api",
    "chat-send posts a message",
    "python NOT java (really)",
    "exact phrase here",
    '"quoted" text with * and ^ and : colons',
    "你好，世界。我们讨论了机器学习",
    "Ünïcödé façade naïve",
    "AND OR NOT NEAR",
    "",
]


@pytest.fixture(scope="module")
def fuzz_db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzDb]:
    path = tmp_path_factory.mktemp("fuzz") / "state.db"
    loop = asyncio.new_event_loop()
    store = StateStore(path, writer_settings=WriterSettings(synchronous="NORMAL"))

    async def fill() -> None:
        await store.open()
        await store.create_session("s1", "cli", started_at=1.0)
        for i, text in enumerate(CORPUS):
            await store.append_message(
                "s1",
                "user" if i % 2 == 0 else "assistant",
                text,
                tool_name="terminal" if i % 3 == 0 else None,
                tool_calls=[{"id": f"c{i}", "function": {"name": "web_search", "arguments": text}}]
                if i % 2
                else None,
            )
        await store.catch_up_index()  # these tests read the FTS tables themselves

    loop.run_until_complete(fill())
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        yield FuzzDb(loop, store, conn)
    finally:
        conn.close()
        loop.run_until_complete(store.close())
        loop.close()


def _match_all(conn: sqlite3.Connection, fts_query: str) -> dict[str, list[int]]:
    return {
        table: [r[0] for r in conn.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (fts_query,))]
        for table in FTS_TABLES
    }


def test_unsanitized_syntax_does_raise(fuzz_db: FuzzDb) -> None:
    """The harness can see a syntax error: raw user text does break FTS5."""
    for raw in ('hello "world', "chat-send", "hello AND", "(", "a:b", "NOT"):
        with pytest.raises(sqlite3.OperationalError):
            _match_all(fuzz_db.conn, raw)


@pytest.mark.parametrize(
    ("query", "row"),
    [("chat-send", 2), ('"exact phrase"', 4), ("docker deploy*", 1), ("python NOT kotlin", 3),
     ("机器学习", 6), ("façade", 7)],
)  # fmt: skip
def test_sanitized_queries_still_find_what_they_mean(fuzz_db: FuzzDb, query: str, row: int) -> None:
    table = "messages_fts_trigram" if any(ord(c) > 0x2E80 for c in query) else "messages_fts"
    assert _match_all(fuzz_db.conn, sanitize_fts5_query(query))[table] == [row]


# -------------------------------------------------------------------- fuzz

_SYNTAX_ATOMS = st.sampled_from(
    ['"', "*", "(", ")", ":", "^", "-", "+", " ", " ", "AND", "OR", "NOT", "NEAR", "NEAR(", ",",
     ".", "'", "{", "}", "[", "]", "\\", "_", "docker", "a", "x1", "你好", "机器学习", "\u200b",
     "\t", "\n", "\x00", "tool_name:", "content:", "é", "²", "ﬁ", "🚀"]
)  # fmt: skip
_NO_SURROGATES = st.characters(exclude_categories=("Cs",))
ANY_TEXT = st.text(alphabet=_NO_SURROGATES, max_size=60)
FTS_ISH_TEXT = st.lists(st.one_of(_SYNTAX_ATOMS, st.text(alphabet=_NO_SURROGATES, max_size=4)), max_size=24).map(
    "".join
)
QUERIES = st.one_of(ANY_TEXT, FTS_ISH_TEXT)

_NASTY = [
    '"', '""', '"""', "AND", "NOT", "OR OR", "NEAR(a b)", "NEAR(a b, 2)", "a NEAR b", "-", "--x", "a:b",
    "tool_name:x", "^", "^a", "*", "a**", "*a", "(((", ")))", "a (b OR c)", '"a" OR', 'a"b"c"',
    "你", "你好", '"你好" NOT', "你好 OR 世界", "² ³", "ﬁ*", "\u200b", "a\u200b*", "'", "''", "a'b",
    "+a +b", "a AND NOT b", "x" * 500,
]  # fmt: skip


def _with_examples(fn):  # type: ignore[no-untyped-def]
    for nasty in _NASTY:
        fn = example(query=nasty)(fn)
    return fn


@_with_examples
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=QUERIES)
def test_sanitized_query_never_breaks_fts5(fuzz_db: FuzzDb, query: str) -> None:
    cleaned = sanitize_fts5_query(query)
    assert cleaned.count('"') % 2 == 0
    assert cleaned == cleaned.strip()
    if cleaned:
        _match_all(fuzz_db.conn, cleaned)  # raises sqlite3.OperationalError on a syntax error


@_with_examples
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=QUERIES)
def test_store_search_never_raises(fuzz_db: FuzzDb, query: str) -> None:
    results = fuzz_db.loop.run_until_complete(fuzz_db.store.search_messages(query))
    assert isinstance(results, list)
    sessions = fuzz_db.loop.run_until_complete(fuzz_db.store.search_sessions(query))
    assert isinstance(sessions, list)
