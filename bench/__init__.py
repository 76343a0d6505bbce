"""Benchmarks, run by ``make bench`` (``python -m bench``).

Each benchmark is a module of this package listed in ``bench.__main__.MODULES``
(``storage``, ``gateway``); a module that does not exist yet is skipped. A
benchmark module exposes ``main() -> int | None`` that prints its figures and
returns 0/None when it ran to the end (a missed target is reported, not an
error). ``BENCH_SCALE`` (default 1) shrinks or grows the work of every module.
See ``bench/README.md`` for the method.
"""
