"""How a search runs: an FTS5 table and its query, or a LIKE scan, plus the filters.

Three ways to match, from the cheapest: the word index (``messages_fts``,
whole words and ``prefix*``), the trigram index (``messages_fts_trigram``,
any substring of three or more characters: CJK text, which has no spaces
between words, and a word's middle or start the way a person types it,
``netw`` for "networking"), and a LIKE scan for the one- and two-character
CJK terms no index serves.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._model import ChatOwner
from ._fts import has_cjk, sanitize_fts5_query
from ._ownership import owned_ids_sql
from ._rows import escape_like as _escape_like


@dataclass(frozen=True)
class Plan:
    """How to run one search: an FTS table and its query, or (for one- and
    two-character CJK terms, which no index serves) a boolean LIKE expression."""

    table: str | None
    fts_query: str
    like_sql: str = ""
    like_params: tuple[str, ...] = ()
    first_term: str = ""


WORD_TABLE, TRIGRAM_TABLE = "messages_fts", "messages_fts_trigram"

_PLAN_TOKEN = re.compile(r'"(?P<term>[^"]*)"(?P<prefix>\*?)|(?P<op>AND|OR|NOT)')


def like_plan(cleaned: str) -> Plan:
    parts: list[str] = []
    params: list[str] = []
    first = ""
    for m in _PLAN_TOKEN.finditer(cleaned):
        op = m.group("op")
        if op is not None:
            parts.append({"AND": "AND", "OR": "OR", "NOT": "AND NOT"}[op])
            continue
        term = m.group("term")
        first = first or term
        if parts and parts[-1] not in ("AND", "OR", "AND NOT"):
            parts.append("AND")  # implicit AND between adjacent terms
        pattern = f"%{_escape_like(term)}%"
        parts.append(
            # COALESCE: a NULL column must read as "no match", or NOT would drop the row.
            "(COALESCE(m.content, '') LIKE ? ESCAPE '\\' OR COALESCE(m.tool_name, '') LIKE ? ESCAPE '\\'"
            " OR COALESCE(m.tool_calls, '') LIKE ? ESCAPE '\\')"
        )
        params += [pattern, pattern, pattern]
    return Plan(None, cleaned, " ".join(parts), tuple(params), first)


def fts_plan(query: str) -> Plan | None:
    """None when nothing searchable is left after sanitizing."""
    cleaned = sanitize_fts5_query(query)
    if not cleaned:
        return None
    if not has_cjk(query):
        return Plan(WORD_TABLE, cleaned)
    # The default tokenizer cannot split CJK text into words; the trigram
    # index finds any substring of three or more characters. Shorter CJK
    # terms match nothing there, so such queries scan with LIKE instead.
    terms = [m.group("term") for m in _PLAN_TOKEN.finditer(cleaned) if m.group("term") is not None]
    if any(len(t) < 3 for t in terms):
        return like_plan(cleaned)
    return Plan(TRIGRAM_TABLE, cleaned)


def substring_plan(plan: Plan, has_word_hits: Callable[[str], bool]) -> Plan:
    """The trigram plan for a word-index query that has a term the word index does not know.

    ``netw`` is no word of "networking", so the word index finds nothing for it,
    but the trigram index finds every text containing it. Each term that must
    match (not one after NOT: a missing word excluded nothing) is probed in the
    word index; if one has no hit there, the whole query runs on the trigram
    index. Only when every term has three characters or more: a trigram cannot
    match fewer, so a shorter term would match nothing at all.
    """
    if plan.table != WORD_TABLE:
        return plan
    must: list[str] = []  # the FTS5 tokens of the terms that must match
    negated = False
    for m in _PLAN_TOKEN.finditer(plan.fts_query):
        op = m.group("op")
        if op is not None:
            negated = op == "NOT"
            continue
        if len(m.group("term")) < 3:
            return plan
        if not negated:
            must.append(m.group(0))
        negated = False
    if not must or all(has_word_hits(token) for token in must):
        return plan
    return Plan(TRIGRAM_TABLE, plan.fts_query)


def filters(
    source_filter: Sequence[str] | None,
    exclude_sources: Sequence[str] | None,
    role_filter: Sequence[str] | None,
    exclude_session_ids: Sequence[str] | None = None,
    owner: ChatOwner | None = None,
) -> tuple[str, list[Any]]:
    """The WHERE clauses (each starting with AND) of a search over ``messages m JOIN sessions s``;
    ``owner`` keeps only the sessions that chat may resume."""
    # An answer a /retry replaced is kept, but found no more (the model never sees it again).
    sql = " AND NOT EXISTS (SELECT 1 FROM gateway_superseded x WHERE x.message_id = m.id)"
    params: list[Any] = []
    if owner is not None:
        owned, owned_params = owned_ids_sql(owner)
        sql += f" AND m.session_id IN ({owned})"
        params.extend(owned_params)
    if source_filter:
        sql += f" AND s.source IN ({','.join('?' * len(source_filter))})"
        params.extend(source_filter)
    if exclude_sources:
        sql += f" AND s.source NOT IN ({','.join('?' * len(exclude_sources))})"
        params.extend(exclude_sources)
    if role_filter:
        sql += f" AND m.role IN ({','.join('?' * len(role_filter))})"
        params.extend(role_filter)
    if exclude_session_ids:
        sql += f" AND m.session_id NOT IN ({','.join('?' * len(exclude_session_ids))})"
        params.extend(exclude_session_ids)
    return sql, params


def like_snippet(content: str, term: str, width: int = 40) -> str:
    at = content.find(term)
    if at < 0:
        return content[: width * 2]
    start, end = max(0, at - width), min(len(content), at + len(term) + width)
    return (
        ("..." if start else "")
        + content[start:at] + ">>>" + term + "<<<" + content[at + len(term) : end]
        + ("..." if end < len(content) else "")
    )
