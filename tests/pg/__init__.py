"""A real PostgreSQL server for the tests and the benchmarks (never a mock)."""
