"""What a search shows and weighs besides its hits: snippets, the filters, and bm25's corpus figures."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Any

from .._model import ChatOwner
from ._conn import PgConnection
from ._search_plan import TEXT_SQL, TRIGRAM_ROWS_SQL, WORDS, Term, escape_like, term_tsquery

SNIPPET_TOKENS = 40
#: below this many messages (the planner's estimate) bm25's figures are counted exactly; above,
#: from a fixed sample of about SAMPLE_ROWS rows (the ranking needs a mean, not a census)
EXACT_BELOW = 50_000
SAMPLE_ROWS = 20_000
#: how long a sampled estimate is reused by this process (a mean that moves slowly)
SAMPLE_TTL_S = 300.0
_sampled: dict[tuple[str, int, str, str], tuple[float, tuple[int, float]]] = {}
_WORD = re.compile(r"[^\W_]+")

#: An answer a /retry replaced is kept, but found no more (the model never sees it again).
SUPERSEDED_SQL = "NOT EXISTS (SELECT 1 FROM gateway_superseded x WHERE x.message_id = {id})"

# The /resume rule of storage/sqlite/_ownership.py, with this driver's parameters.
_OWNED_SQL = """
    SELECT s.id FROM gateway_session_bindings b JOIN sessions s ON s.id = b.session_id
    WHERE b.session_key = %s
    UNION
    SELECT s.id FROM gateway_session_bindings b JOIN sessions s ON s.id = b.session_id
    WHERE %s = 'cli' AND b.platform = 'cli' AND b.user_id = %s
    UNION
    SELECT id FROM sessions WHERE %s = 'cli' AND source = 'cli' AND user_id = %s
"""


def _in(values: Sequence[str]) -> str:
    return ", ".join(["%s"] * len(values))


def filters(
    source_filter: Sequence[str] | None,
    exclude_sources: Sequence[str] | None,
    role_filter: Sequence[str] | None,
    exclude_session_ids: Sequence[str] | None = None,
    owner: ChatOwner | None = None,
    *,
    superseded: bool = True,
) -> tuple[str, list[Any]]:
    """The WHERE clauses (each starting with AND) over ``messages m``; ``superseded=False`` leaves
    out ``SUPERSEDED_SQL`` for a caller that applies it itself."""
    sql = f" AND {SUPERSEDED_SQL.format(id='m.id')}" if superseded else ""
    params: list[Any] = []
    if owner is not None:
        sql += f" AND m.session_id IN ({_OWNED_SQL})"
        params += [owner.session_key, owner.platform, owner.user_id, owner.platform, owner.user_id]
    # The session's source through EXISTS: ranking joins no session row it does not need.
    for values, negate in ((source_filter, False), (exclude_sources, True)):
        if values:
            sql += (f" AND {'NOT ' if negate else ''}EXISTS (SELECT 1 FROM sessions s WHERE s.id = m.session_id"
                    f" AND s.source IN ({_in(values)}))")
            params.extend(values)
    for column, values, negate in (("m.role", role_filter, False), ("m.session_id", exclude_session_ids, True)):
        if values:
            sql += f" AND {column} {'NOT IN' if negate else 'IN'} ({_in(values)})"
            params.extend(values)
    return sql, params


# ------------------------------------------------------------------ bm25's figures


def corpus_figures(conn: PgConnection, kind: str) -> tuple[int, float]:
    """(rows in the index, their mean length in tokens): FTS5's nRow and avgdl."""
    length = "m.search_tokens" if kind == WORDS else (
        "coalesce(greatest(char_length(m.content) - 2, 0), 0) + coalesce(greatest(char_length(m.tool_name) - 2, 0), 0)"
        " + coalesce(greatest(char_length(m.tool_calls) - 2, 0), 0)")
    member = "true" if kind == WORDS else TRIGRAM_ROWS_SQL
    row = conn.execute("SELECT reltuples FROM pg_class WHERE oid = 'messages'::regclass").fetchone()
    estimate = float(row[0]) if row is not None and row[0] is not None else -1.0
    sample = ""
    key = (str(conn.info.host), int(conn.info.port), str(conn.info.dbname), kind)
    if estimate >= EXACT_BELOW:
        cached = _sampled.get(key)
        if cached is not None and time.monotonic() - cached[0] < SAMPLE_TTL_S:
            return cached[1]
        sample = f" TABLESAMPLE SYSTEM ({min(100.0, 100.0 * SAMPLE_ROWS / estimate)}) REPEATABLE (26)"
    counted = conn.execute(
        f"SELECT count(*), count(*) FILTER (WHERE {member}), coalesce(sum({length}) FILTER (WHERE {member}), 0) "
        f"FROM messages m{sample}"
    ).fetchone()
    assert counted is not None
    seen, members, tokens = int(counted[0]), int(counted[1]), float(counted[2])
    if not members:
        return 0, 1.0
    rows = members if not sample else round(estimate * members / max(1, seen))
    figures = (max(rows, 1), tokens / members)
    if sample:
        _sampled[key] = (time.monotonic(), figures)
    return figures


_hits: dict[tuple[str, int, str, str, Term], tuple[float, int]] = {}


def hits_of(conn: PgConnection, kind: str, term: Term) -> int:
    """The rows of the index a term matches (bm25's n(q)); on a big database (where the corpus
    figures are sampled too) a count is reused for a while, as IDF moves slowly."""
    key = (str(conn.info.host), int(conn.info.port), str(conn.info.dbname), kind, term)
    big = (str(conn.info.host), int(conn.info.port), str(conn.info.dbname), kind) in _sampled
    cached = _hits.get(key) if big else None
    if cached is not None and time.monotonic() - cached[0] < SAMPLE_TTL_S:
        return cached[1]
    n = _count_hits(conn, kind, term)
    if big:
        if len(_hits) > 10_000:
            _hits.clear()
        _hits[key] = (time.monotonic(), n)
    return n


def _count_hits(conn: PgConnection, kind: str, term: Term) -> int:
    if kind == WORDS:
        sql, params = "m.search_words @@ to_tsquery('simple', %s)", [term_tsquery(term)]
    else:
        sql, params = f"{TRIGRAM_ROWS_SQL} AND {TEXT_SQL} ILIKE %s", [f"%{escape_like(term.text)}%"]
    row = conn.execute(f"SELECT count(*) FROM messages m WHERE {sql}", params).fetchone()
    return int(row[0]) if row is not None else 0


# ------------------------------------------------------------------ snippets


def _matches(word: str, terms: Sequence[Term]) -> bool:
    low = word.lower()
    for term in terms:
        for i, w in enumerate(term.words):
            if low == w or (term.prefix and i == len(term.words) - 1 and low.startswith(w)):
                return True
    return False


def word_snippet(columns: Sequence[str | None], terms: Sequence[Term]) -> str | None:
    """FTS5's ``snippet(…, '>>>', '<<<', '...', 40)`` in outline: the column and the 40 words
    holding the most distinct query words, each hit marked."""
    best: tuple[int, int, str, list[re.Match[str]], int] | None = None  # score, -column, text, tokens, start
    for col, text in enumerate(columns):
        if not text:
            continue
        tokens = list(_WORD.finditer(text))
        hits = [i for i, t in enumerate(tokens) if _matches(t.group(0), terms)]
        for h in hits:
            window = [i for i in hits if h <= i < h + SNIPPET_TOKENS]
            score = 1000 * len({tokens[i].group(0).lower() for i in window}) + len(window)
            start = max(0, min(h - (SNIPPET_TOKENS - (window[-1] - h)) // 2, len(tokens) - SNIPPET_TOKENS))
            if best is None or (score, -col) > best[:2]:
                best = (score, -col, text, tokens, start)
    if best is None:  # matched by the server's reading of a word only: the start of the text, as FTS5 shows
        text = next((t for t in columns if t), "")
        tokens = list(_WORD.finditer(text))
        if not tokens:
            return text[: SNIPPET_TOKENS * 2] or None
        best = (0, 0, text, tokens, 0)
    _, _, text, tokens, start = best
    end = min(len(tokens), start + SNIPPET_TOKENS)
    out: list[str] = ["..."] if start > 0 else [text[: tokens[0].start()]]
    for i in range(start, end):
        tok = tokens[i]
        out.append(f">>>{tok.group(0)}<<<" if _matches(tok.group(0), terms) else tok.group(0))
        if i + 1 < end:
            out.append(text[tok.end(): tokens[i + 1].start()])
    out.append(text[tokens[end - 1].end():] if end == len(tokens) else "...")
    return "".join(out)


def substring_snippet(columns: Sequence[str | None], terms: Sequence[Term], width: int = 20) -> str | None:
    """The first column holding a term, about 40 characters around its first occurrence, marked."""
    for text in columns:
        if not text:
            continue
        low = text.lower()
        found = [(low.find(t.text.lower()), t) for t in terms if low.find(t.text.lower()) >= 0]
        if not found:
            continue
        at, term = min(found, key=lambda f: f[0])
        size = len(term.text)
        start, end = max(0, at - width), min(len(text), at + size + width)
        return (("..." if start else "") + text[start:at] + ">>>" + text[at: at + size] + "<<<"
                + text[at + size: end] + ("..." if end < len(text) else ""))
    return None


def like_snippet(content: str, term: str, width: int = 40) -> str:
    """As state.db's scan shows a one- or two-character CJK hit."""
    at = content.find(term)
    if at < 0:
        return content[: width * 2]
    start, end = max(0, at - width), min(len(content), at + len(term) + width)
    return (
        ("..." if start else "")
        + content[start:at] + ">>>" + term + "<<<" + content[at + len(term) : end]
        + ("..." if end < len(content) else "")
    )
