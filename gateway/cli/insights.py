"""``hermes-gateway insights``: tokens, calls and cost per day, source and model.

Read from the token columns of the reference's ``sessions`` table on a
read-only connection, so it works beside a running daemon. A session counts
on the day it started. Cost appears only where ``pricing.<model>`` is set in
config.yaml; a broken config.yaml is a warning (no prices), not a refusal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from gateway.cli.common import quiet_logs
from gateway.cli.sessions import _errors, _read
from gateway.config import ModelPrice, default_home, load_config
from gateway.errors import ConfigError
from storage import usage

UsageRow = usage.UsageRow


def _positive_days(value: int) -> int:
    if value < 1:
        raise typer.BadParameter(f"must be at least 1, not {value}")
    return value


@dataclass
class _Totals:
    sessions: int = 0
    calls: int = 0
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cost: float = 0.0
    priced: bool = False  # some of it has a price
    unpriced: bool = False  # some of it has none

    def add(self, row: UsageRow, cost: float | None) -> None:
        self.sessions += row.sessions
        self.calls += row.api_calls
        self.input += row.input_tokens
        self.output += row.output_tokens
        self.cache_read += row.cache_read_tokens
        self.cache_write += row.cache_write_tokens
        if cost is None:
            self.unpriced = self.unpriced or row.api_calls > 0
        else:
            self.cost += cost
            self.priced = True

    def cost_text(self) -> str:
        if not self.priced:
            return "—"
        return f"${self.cost:,.4f}" + ("+" if self.unpriced else "")


def row_cost(row: UsageRow, price: ModelPrice | None) -> float | None:
    """US dollars for a row at ``price`` (per million tokens); None without a price."""
    if price is None:
        return None
    cache_read = price.input if price.cache_read is None else price.cache_read
    cache_write = price.input if price.cache_write is None else price.cache_write
    fresh = max(row.input_tokens - row.cache_read_tokens, 0)
    return (fresh * price.input + row.cache_read_tokens * cache_read + row.cache_write_tokens * cache_write
            + row.output_tokens * price.output) / 1_000_000


def _prices(home: Path) -> dict[str, ModelPrice]:
    try:
        return dict(load_config(home).settings.pricing)
    except ConfigError as exc:
        typer.echo(f"hermes-gateway insights: warning: configuration error (showing no cost): "
                   f"{' '.join(str(exc).split())}", err=True)
        return {}


def _group(rows: Iterable[UsageRow], key: Callable[[UsageRow], str],
           prices: dict[str, ModelPrice]) -> dict[str, _Totals]:
    groups: dict[str, _Totals] = {}
    for row in rows:
        groups.setdefault(key(row), _Totals()).add(row, row_cost(row, prices.get(row.model or "")))
    return groups


def _table(title: str, groups: dict[str, _Totals], with_cost: bool) -> list[str]:
    name_width = max(len(title), *(len(k) for k in groups))
    head = f"{title:<{name_width}}  {'Sessions':>8}  {'Calls':>7}  {'Input':>12}  {'Output':>12}  {'Cache read':>12}"
    head += f"  {'Cost':>12}" if with_cost else ""
    lines = [head, "─" * len(head)]
    for name, t in groups.items():
        line = (f"{name:<{name_width}}  {t.sessions:>8,}  {t.calls:>7,}  {t.input:>12,}  {t.output:>12,}  "
                f"{t.cache_read:>12,}")
        lines.append(line + (f"  {t.cost_text():>12}" if with_cost else ""))
    return lines


def render(rows: list[UsageRow], prices: dict[str, ModelPrice], *, days: int, source: str | None) -> list[str]:
    """The report, as lines of text."""
    scope = f"the last {days} day{'s' if days != 1 else ''}" + (f", {source} only" if source else "")
    if not rows:
        return [f"No sessions in {scope}."]
    total = _group(rows, lambda r: "total", prices)["total"]
    with_cost = total.priced
    lines = [f"Usage in {scope}: {total.sessions:,} sessions, {total.calls:,} model calls, "
             f"{total.input:,} input and {total.output:,} output tokens "
             f"({total.cache_read:,} read from cache, {total.cache_write:,} written to it)."]
    if with_cost:
        lines.append(f"Estimated cost: {total.cost_text()}" + (
            " (+: some models have no price in config.yaml)" if total.unpriced else ""))
    else:
        lines.append("No cost: set pricing.<model> in config.yaml (input/output, US$ per million tokens).")
    for title, key in (("Day", lambda r: r.day), ("Source", lambda r: r.source),
                       ("Model", lambda r: r.model or "(unknown)")):
        lines += ["", *_table(title, _group(rows, key, prices), with_cost)]
    missing = sorted({r.model or "(unknown)" for r in rows if r.api_calls and (r.model or "") not in prices})
    if with_cost and missing:
        lines += ["", "No price for: " + ", ".join(missing)]
    return lines


def insights(
    days: Annotated[int, typer.Option("--days", metavar="N", callback=_positive_days,
                                      help="Sessions started in the last N days (at least 1)")] = 30,
    source: Annotated[str | None, typer.Option(
        "--source", metavar="PLATFORM", help="Only sessions from this platform (telegram, cli, ...)")] = None,
    home: Annotated[Path | None, typer.Option(
        "--home", metavar="DIR", help="HERMES_HOME (default: $HERMES_HOME or ~/.hermes)")] = None,
) -> None:
    """Token usage, model calls and (where prices are set) cost per day, source and model."""
    with _errors():
        quiet_logs()
        root = (home or default_home()).expanduser()
        prices = _prices(root)
        midnight = datetime.fromtimestamp(time.time()).replace(hour=0, minute=0, second=0, microsecond=0)
        # "the last N days" is today and the N-1 days before it, whole days
        since = midnight.timestamp() - (days - 1) * 86400
        rows = _read(root, lambda conn: usage.usage_by_day(conn, since=since, source=source)) or []
    for line in render(rows, prices, days=days, source=source):
        typer.echo(line)
