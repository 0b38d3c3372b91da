"""The few places where DuckDB and PostgreSQL part, each behind one function.

The store's SQL is written once, in the words both engines read as written (`$1` parameter
marks, `array_agg`, `percentile_cont`, `DISTINCT ON`, window functions, `::JSON ->>`). What
one engine has and the other lacks is spelt here for each engine in its own native SQL, never
re-created in the other (no user-defined functions, no rewriting of statement text):

- `arg_max` / `arg_min`: DuckDB's aggregates. PostgreSQL has none; its ordered `array_agg`
  gives the same answer, but costs DuckDB 3-4 times its own aggregate on 100,000 groups, so
  each engine gets its own.
- the unsigned 64-bit column type (core/store/migrations.py, `UBIGINT`).
- a list-valued column bound as one array per column (core/store/postgres.py,
  `unnested_with_lists`: PostgreSQL has no array of arrays).
"""

from __future__ import annotations

from radar_pipeline.core.store.migrations import Engine


def engine(con: object) -> Engine:
    """Which engine a store connection talks to. A PostgreSQL connection says so
    (`PostgresConnection.engine`); DuckDB's has no such attribute, and the embedded profile
    never loads the PostgreSQL module."""
    return "postgresql" if getattr(con, "engine", None) == "postgresql" else "duckdb"


def arg_max(con: object, value: str, key: str) -> str:
    """An aggregate: `value` at the row of the greatest `key` in the group, rows where either
    is NULL left out (DuckDB's rule). `value` must not be a list on PostgreSQL."""
    return _arg(con, "max", value, key)


def arg_min(con: object, value: str, key: str) -> str:
    """An aggregate: `value` at the row of the least `key` in the group (as `arg_max`)."""
    return _arg(con, "min", value, key)


def _arg(con: object, which: str, value: str, key: str) -> str:
    if engine(con) == "duckdb":
        return f"arg_{which}({value}, {key})"
    order = "DESC" if which == "max" else "ASC"
    return (
        f"(array_agg({value} ORDER BY {key} {order}) "
        f"FILTER (WHERE {value} IS NOT NULL AND {key} IS NOT NULL))[1]"
    )
