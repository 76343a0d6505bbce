"""How a search runs on PostgreSQL: the query a person typed, as state.db's search reads it.

The text goes through the same sanitizer as state.db's (``sanitize_fts5_query``: whatever was
typed becomes words, "phrases", ``prefix*`` and AND/OR/NOT, never a syntax error), and is then
parsed with FTS5's precedence (adjacent terms, then NOT, AND, OR) into a small tree. From the
tree come, never by pasting user text into SQL (every term is a bound parameter):

- for the word index (``search_words``, a tsvector): a tsquery of lexemes that are runs of
  letters and digits only, so the tsquery syntax cannot break;
- for the substring index (pg_trgm on ``hermes_search_text``): ILIKE patterns, escaped;
- the ranking: bm25 with FTS5's constants and formula (``rank_sql``), so both backends put the
  same hits first (README, "Search on PostgreSQL").

The three ways to match are those of ``storage/sqlite/_search_plan.py``: whole words and
``prefix*``; a substring of three characters or more (CJK, and a part of a word such as
``netw``); and a scan for the one- and two-character CJK terms no index serves.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..sqlite import sanitize_fts5_query

WORDS, TRIGRAM, SCAN = "words", "trigram", "scan"
#: the substring index's expression and row filter, exactly as migration 0003 declares them
TEXT_SQL = "hermes_search_text(m.content, m.tool_name, m.tool_calls)"
TRIGRAM_ROWS_SQL = "m.role <> 'tool'"
#: FTS5's bm25 constants (fts5_aux.c)
K1, B = 1.2, 0.75

_PLAN_TOKEN = re.compile(r'"(?P<term>[^"]*)"(?P<prefix>\*?)|(?P<op>AND|OR|NOT)')
# unicode61's tokens: runs of letters and digits (the word index is built the same way)
_WORD = re.compile(r"[^\W_]+")
_PRECEDENCE = {"OR": 1, "AND": 2, "NOT": 3}
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
#: ts_rank of one lexeme occurring 1, 2, … 256 times (a tsvector keeps at most 256 positions), as
#: the server computes it: asked once per process (the same for every database of a build)
COUNT_RANKS_SQL = ("SELECT (array_agg(ts_rank(to_tsvector('simple', repeat('x ', n)), to_tsquery('simple', 'x'))"
                   " ORDER BY n))::text FROM generate_series(1, 256) n")


@dataclass(frozen=True)
class Term:
    text: str
    prefix: bool = False

    @property
    def words(self) -> list[str]:
        return [w.lower() for w in _WORD.findall(self.text)]


@dataclass(frozen=True)
class Op:
    op: str  # AND, OR, NOT (FTS5's binary NOT: left AND NOT right)
    left: Node
    right: Node


Node = Term | Op


@dataclass(frozen=True)
class Plan:
    """One search: which index, the query tree, its terms in order (bm25's phrases)."""

    kind: str
    tree: Node
    terms: tuple[Term, ...]

    @property
    def first_term(self) -> str:
        return self.terms[0].text


def has_cjk(text: str) -> bool:
    """The same ranges as state.db's search uses to pick its trigram index."""
    for ch in text:
        code = ord(ch)
        if (
            0x3040 <= code <= 0x30FF  # kana
            or 0x3400 <= code <= 0x4DBF
            or 0x4E00 <= code <= 0x9FFF
            or 0xAC00 <= code <= 0xD7AF  # hangul
            or 0xF900 <= code <= 0xFAFF
            or 0x20000 <= code <= 0x2FA1F
        ):
            return True
    return False


def _parse(cleaned: str) -> tuple[Node, tuple[Term, ...]] | None:
    """FTS5's grammar over the sanitizer's output: adjacent terms bind tightest, then NOT, AND, OR."""
    seq: list[Node | str] = []
    terms: list[Term] = []
    for m in _PLAN_TOKEN.finditer(cleaned):
        op = m.group("op")
        if op is not None:
            seq.append(op)
            continue
        term = Term(m.group("term"), bool(m.group("prefix")))
        if not term.words:
            return None
        terms.append(term)
        if seq and not isinstance(seq[-1], str):
            seq[-1] = Op("AND", seq[-1], term)
        else:
            seq.append(term)
    out: list[Node] = []
    ops: list[str] = []

    def reduce() -> None:
        right, left = out.pop(), out.pop()
        out.append(Op(ops.pop(), left, right))

    for item in seq:
        if isinstance(item, str):
            while ops and _PRECEDENCE[ops[-1]] >= _PRECEDENCE[item]:
                reduce()
            ops.append(item)
        else:
            out.append(item)
    while ops:
        reduce()
    return (out[0], tuple(terms)) if len(out) == 1 else None


def plan(query: str, has_word_hits: Callable[[Term], bool]) -> Plan | None:
    """None when nothing searchable is left. ``has_word_hits`` probes the word index for a term."""
    cleaned = sanitize_fts5_query(query)
    parsed = _parse(cleaned) if cleaned else None
    if parsed is None:
        return None
    tree, terms = parsed
    if has_cjk(query):
        # unicode61 cannot cut CJK text into words: substrings of three characters or more come
        # from the trigram index, shorter ones from a scan (no index holds them).
        return Plan(SCAN if any(len(t.text) < 3 for t in terms) else TRIGRAM, tree, terms)
    return Plan(_substring_or_words(tree, terms, has_word_hits), tree, terms)


def _substring_or_words(tree: Node, terms: tuple[Term, ...], has_word_hits: Callable[[Term], bool]) -> str:
    """The trigram index when a term that must match is no whole word anywhere (``netw``).

    As state.db decides: only when every term has three characters or more (a trigram cannot
    match fewer), and a term after NOT does not count (a missing word excludes nothing)."""
    if any(len(t.text) < 3 for t in terms):
        return WORDS
    must = _positive(tree)
    if not must or all(has_word_hits(t) for t in must):
        return WORDS
    return TRIGRAM


def _positive(node: Node) -> list[Term]:
    if isinstance(node, Term):
        return [node]
    if node.op == "NOT":
        return _positive(node.left)
    return _positive(node.left) + _positive(node.right)


# ------------------------------------------------------------------ SQL


def term_tsquery(term: Term) -> str:
    """A tsquery of one term: its words in a row (``<->``), the last one a prefix for ``word*``.
    The words are letters and digits only, so this text is always valid tsquery syntax."""
    words = [f"'{w}'" for w in term.words]
    if term.prefix:
        words[-1] += ":*"
    return " <-> ".join(words)


def tsquery(node: Node) -> str:
    if isinstance(node, Term):
        return f"({term_tsquery(node)})"
    left, right = tsquery(node.left), tsquery(node.right)
    return {"AND": f"({left} & {right})", "OR": f"({left} | {right})", "NOT": f"({left} & !{right})"}[node.op]


def escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def like_sql(node: Node) -> tuple[str, list[Any]]:
    """A boolean expression over ``m`` matching each term as a substring, case-insensitively."""
    if isinstance(node, Term):
        # ILIKE lower-cases the whole text of each row first; a term with no case (CJK, digits)
        # matches the same with LIKE, at a fraction of the cost
        op = "ILIKE" if node.text.lower() != node.text.upper() else "LIKE"
        return f"({TEXT_SQL} {op} %s)", [f"%{escape_like(node.text)}%"]
    left, lp = like_sql(node.left)
    right, rp = like_sql(node.right)
    joiner = {"AND": "AND", "OR": "OR", "NOT": "AND NOT"}[node.op]
    return f"({left} {joiner} {right})", lp + rp


def word_tf_pattern(term: Term) -> str:
    """A regular expression counting a term's occurrences as unicode61 tokens (bm25's f(q, D))."""
    body = "[^[:alnum:]]+".join(term.words)
    return f"(?<![[:alnum:]]){body}" + ("" if term.prefix else "(?![[:alnum:]])")


@dataclass(frozen=True)
class Rank:
    """bm25 as SQL: ``lateral`` (joined after ``messages m``) computes each row's term counts
    and length once, ``expr`` the score from them (negated: lower ranks first)."""

    lateral: str
    lateral_params: list[Any]
    expr: str
    expr_params: list[Any]


def rank_sql(kind: str, terms: tuple[Term, ...], idf: list[float], avgdl: float, count_ranks: str) -> Rank:
    """FTS5's bm25 over the word index or the trigram index.

    Words: f(q, D) counts the term's tokens in the row's three columns, |D| is the row's token
    count (``search_tokens``). Trigrams: every three characters are a token, so f(q, D) counts
    the term's occurrences and |D| is the row's characters less two per column. The LATERAL
    subqueries end in OFFSET 0 so the planner keeps them whole: each count is computed once."""
    cols: list[str] = []
    lateral_params: list[Any] = []
    source = ""
    if kind == WORDS:
        cols.append("m.search_tokens AS len")
    else:
        # Counted column by column (no match spans two: terms hold no control character, the
        # substring index's separator). Each column is read once per row (``|| ''``: a text moved
        # out of the row, as a long message is, would be fetched again by every function given it),
        # and a term with case is counted in lower-cased copies made once. All in the one LATERAL
        # over m's columns: a LATERAL over another's results looks to the planner like a few
        # values repeated, which it caches per value (Memoize: every text copied, every lookup a miss).
        source = " FROM (SELECT m.content || '' AS r0, m.tool_name || '' AS r1, m.tool_calls || '' AS r2 OFFSET 0) r"
        docs = ["r.r0", "r.r1", "r.r2"]
        cols.append(" + ".join(f"coalesce(greatest(char_length({c}) - 2, 0), 0)" for c in docs) + " AS len")
        if any(t.text.lower() != t.text.upper() for t in terms):
            source = f" FROM (SELECT r.*, {', '.join(f'lower({c}) AS c{k}' for k, c in enumerate(docs))}{source} OFFSET 0) r"
            docs = ["r.c0", "r.c1", "r.c2"]
    for i, term in enumerate(terms):
        if kind == WORDS and _ASCII_WORD.fullmatch(term.text) and not term.prefix:
            # One plain word: its count is in the row's tsvector, read back through ts_rank, whose
            # value for one lexeme depends only on how often it occurs (a table of 1..256; 0 when the
            # row lacks it: the other side of an OR, a NOT).
            tf = "coalesce(array_position(%s::real[], ts_rank(m.search_words, to_tsquery('simple', %s))), 0)"
            lateral_params += [count_ranks, term_tsquery(term)]
        elif kind == WORDS:
            tf = "regexp_count(concat_ws(' ', m.content, m.tool_name, m.tool_calls), %s, 1, 'i')"
            lateral_params.append(word_tf_pattern(term))
        else:
            # the occurrences (none overlapping) from the bytes replace() takes out
            tf = "(" + " + ".join(f"coalesce(octet_length({c}) - octet_length(replace({c}, %s, '')), 0)" for c in docs)
            tf += ") / octet_length(%s)"
            lateral_params += [term.text.lower()] * 4
        cols.append(f"({tf})::float8 AS tf{i}")
    lateral = f" CROSS JOIN LATERAL (SELECT {', '.join(cols)}{source} OFFSET 0) t"
    parts: list[str] = []
    params: list[Any] = []
    for i, weight in enumerate(idf):
        # the order of FTS5's arithmetic, so equal inputs give bit-equal scores
        parts.append(f"%s * ((t.tf{i} * %s) / (t.tf{i} + %s * (1 - %s + %s * t.len / %s)))")
        params += [weight, K1 + 1.0, K1, B, B, avgdl]
    return Rank(lateral, lateral_params, "(-1.0 * (" + " + ".join(parts) + "))", params)


def idf(n_rows: int, n_hit: int) -> float:
    """FTS5's IDF of a phrase found in ``n_hit`` of ``n_rows`` rows (never below 1e-6)."""
    value = math.log((n_rows - n_hit + 0.5) / (n_hit + 0.5))
    return value if value > 0.0 else 1e-6
