"""``hermes-gateway usage``: model calls, tokens and cost per person, from state.db.

The figures are the sums of the reference's token columns of ``sessions``, which every model
call adds its ``usage`` to (and, when its model has prices in ``models.allowed``, its cost). A
session counts for the user of its chat: the person who started it, or the user its chat's key
was bound for. ``--since`` keeps the sessions started at or after a moment: a duration back from
now (``7d``, ``12h``, ``30m``, ``2w``) or a date (``2026-11-01``, local midnight) or ISO time.
Read on a read-only connection, beside a running daemon.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from gateway.cli.common import quiet_logs
from gateway.cli.sessions import _errors, _read
from gateway.config import default_home
from storage import usage

__all__ = ["parse_since", "usage_command"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_since(value: str, *, now: float | None = None) -> float:
    """A ``--since`` value as a Unix time; ``typer.BadParameter`` with an example when it is neither
    a duration nor a date."""
    text = value.strip().lower()
    match = _DURATION.fullmatch(text)
    if match is not None:
        return (time.time() if now is None else now) - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        return datetime.fromisoformat(value.strip()).timestamp()
    except ValueError:
        raise typer.BadParameter(
            f"{value!r} is neither a duration (7d, 12h, 30m, 2w) nor a date (2026-11-01, 2026-11-01T08:00)"
        ) from None


def _as_json(rows: list[usage.UserUsage]) -> list[dict[str, Any]]:
    return [{"platform": r.platform, "user_id": r.user_id, "sessions": r.totals.sessions,
             "model_calls": r.totals.api_calls, "prompt_tokens": r.totals.input_tokens,
             "cached_tokens": r.totals.cache_read_tokens, "completion_tokens": r.totals.output_tokens,
             "cost_usd": r.totals.cost_usd} for r in rows]


def render(rows: list[usage.UserUsage], scope: str) -> list[str]:
    if not rows:
        return [f"No sessions {scope}."]
    priced = any(r.totals.cost_usd is not None for r in rows)
    names = [f"{r.platform}:{r.user_id or '(no user)'}" for r in rows]
    width = max(len("User"), *(len(n) for n in names))
    head = (f"{'User':<{width}}  {'Sessions':>8}  {'Calls':>7}  {'Prompt':>12}  {'Cached':>12}  {'Completion':>12}"
            + (f"  {'Cost':>12}" if priced else ""))
    lines = [f"Usage per user, sessions {scope}:", head, "─" * len(head)]
    for name, r in zip(names, rows, strict=True):
        t = r.totals
        cost = "—" if t.cost_usd is None else f"${t.cost_usd:,.4f}"
        lines.append(f"{name:<{width}}  {t.sessions:>8,}  {t.api_calls:>7,}  {t.input_tokens:>12,}  "
                     f"{t.cache_read_tokens:>12,}  {t.output_tokens:>12,}" + (f"  {cost:>12}" if priced else ""))
    if not priced:
        lines.append("No cost: give the models of models.allowed prices in config.yaml (US$ per million tokens).")
    return lines


def usage_command(
    since: Annotated[str | None, typer.Option(
        "--since", metavar="DURATION|DATE", help="Sessions started since: 7d, 12h, 2w, or a date (2026-11-01)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON array, a row per user")] = False,
    home: Annotated[Path | None, typer.Option(
        "--home", metavar="DIR", help="HERMES_HOME (default: $HERMES_HOME or ~/.hermes)")] = None,
) -> None:
    """Model calls, prompt/completion/cached tokens and cost per user."""
    start = parse_since(since) if since is not None else None
    with _errors():
        quiet_logs()
        root = (home or default_home()).expanduser()
        rows = _read(root, lambda conn: usage.usage_by_user(conn, since=start)) or []
    if as_json:
        typer.echo(json.dumps(_as_json(rows), indent=2))
        return
    scope = "of all time" if start is None else f"started since {datetime.fromtimestamp(start):%Y-%m-%d %H:%M}"
    for line in render(rows, scope):
        typer.echo(line)
