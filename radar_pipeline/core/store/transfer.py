"""`radar store migrate --to postgresql://...`: the embedded store's rows moved into the team
profile's PostgreSQL store, table by table, once.

Both stores are first brought to this code's schema version (the same migrations), so their
tables and columns are the same. The target must be empty: a store is never merged into
another (one store per deployment, no second copy kept in step). The DuckDB file is only read;
it stays as it was, so the move can be checked and repeated into a fresh schema.
"""

from __future__ import annotations

from radar_pipeline.core.contract.operations import Transfer
from radar_pipeline.core.errors import StoreError
from radar_pipeline.core.store.connection import Store

_CHUNK = 5_000  # rows per batch: bounded memory for large stores
_VERSION_TABLE = "schema_migrations"  # each store keeps its own (both at the same version)


def _tables(source: Store) -> list[str]:
    with source.transaction() as con:
        rows = con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'main' AND table_type = 'BASE TABLE' ORDER BY table_name"
        ).fetchall()
    return [str(r[0]) for r in rows if r[0] != _VERSION_TABLE]


def move(source: Store, target: Store) -> Transfer:
    """Copy every provenance table of the DuckDB store `source` into the empty PostgreSQL
    store `target`, in one transaction there (all or nothing)."""
    if not target.url:
        raise StoreError("store migrate: --to must name a postgresql:// store")
    if source.url:
        raise StoreError(
            "store migrate: the source must be the DuckDB file (RADAR_STORE_URL unset)"
        )
    if source.schema_version() != target.schema_version():
        raise StoreError("store migrate: the two stores are at different schema versions")
    tables = _tables(source)
    moved: list[tuple[str, int]] = []
    with target.transaction() as dst:
        for table in tables:
            row = dst.execute(f"SELECT count(*) FROM {table}").fetchone()
            if row and row[0]:
                raise StoreError(
                    f"store migrate: {target.where} already holds rows in {table}; "
                    "migrate into an empty store"
                )
        with source.transaction() as src:
            for table in tables:
                cur = src.execute(f"SELECT * FROM {table}")
                names = [d[0] for d in cur.description]
                marks = ", ".join(f"${i}" for i in range(1, len(names) + 1))
                insert = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({marks})"
                count = 0
                while batch := cur.fetchmany(_CHUNK):
                    dst.executemany(insert, batch)
                    count += len(batch)
                moved.append((table, count))
    return Transfer(to=target.where, tables=dict(moved), rows=sum(n for _, n in moved))
