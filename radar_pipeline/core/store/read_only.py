"""A DuckDB connection that cannot write: what a dry run (`radar sources try`) reads.

An existing file is opened `read_only` (DuckDB then refuses every write, and never creates a
WAL or changes a byte of it). Without a file there is nothing to read: the connection is an
empty in-memory database with the current schema, so the same queries find nothing, and no
file is created.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import duckdb

from radar_pipeline.core.errors import StoreLocked
from radar_pipeline.core.store.connection import Connection, duckdb_error_of
from radar_pipeline.core.store.migrations import MIGRATIONS

# A writer holds the file only for one short transaction; a dry run waits this long for it.
READ_WAIT_S = 30.0

T = TypeVar("T")


def reading(path: Path, url: str, work: Callable[[Connection], T]) -> T:
    """`work` on the store at `path` (or `url`) opened for reading only, as `read_only`
    opens it; its answer. What a dry run outside core/store/ reads, it reads through this."""
    with read_only(path, url) as con:
        return work(con)


@contextmanager
def read_only(path: Path, url: str = "") -> Iterator[Connection]:
    """The store at `path` for reading only (an empty schema in memory when it is absent);
    with `url`, a READ ONLY transaction on the PostgreSQL store there."""
    if url:
        from radar_pipeline.core.store.postgres import has_schema, read_only_transaction

        if has_schema(url):
            with read_only_transaction(url) as pg:
                yield pg
            return
    # No PostgreSQL schema yet holds as little as an absent file: the empty schema in memory.
    con = _empty() if url else _open(path)
    try:
        con.execute("SET TimeZone = 'UTC'")
        yield con
    except duckdb.Error as exc:
        raise duckdb_error_of(exc, path, f"reading {path} failed") from exc
    finally:
        con.close()


def _empty() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    for migration in MIGRATIONS:
        con.execute(migration.sql("duckdb"))
    return con


def _open(path: Path) -> duckdb.DuckDBPyConnection:
    if not path.exists():
        return _empty()
    deadline = time.monotonic() + READ_WAIT_S
    while True:
        try:
            return duckdb.connect(str(path), read_only=True)
        except duckdb.IOException as exc:
            fault = duckdb_error_of(exc, path, f"cannot open {path} for reading")
            # A writer holds the lock: wait for its commit; any other fault is final.
            if not isinstance(fault, StoreLocked):
                raise fault from exc
            if time.monotonic() >= deadline:
                raise duckdb_error_of(exc, path, f"{path} stayed locked by a writer") from exc
            time.sleep(0.1)
        except duckdb.Error as exc:
            raise duckdb_error_of(exc, path, f"{path} is not a usable DuckDB file") from exc
