"""The team profile's store backend: the same tables in a PostgreSQL schema (`RADAR_STORE_URL`).

The store modules' SQL is sent as written: it is written in the words both engines read
(`$1` marks, `array_agg`, `DISTINCT ON`, ...; core/store/dialect.py holds the few places where
they part), and the schema is the one list of migrations DuckDB gets (core/store/migrations.py).
This module holds what only a server has: the connection, the migration runner's lock, the
turn every transaction takes, and the per-Source advisory locks. psycopg is imported only
when a PostgreSQL store is opened, so the embedded default never loads it.

Driver: psycopg 3, with its `RawCursor`: parameters bound server-side with PostgreSQL's own
`$1` marks (DuckDB reads them too), and `execute()` returning a cursor with `fetchone`/
`fetchall`/`description`, the shape DuckDB's connection has, so the store modules run unchanged
on either; it adapts Python lists to PostgreSQL arrays (the store binds whole columns as one
array). psycopg2 (which Dagster's own PostgreSQL storage uses) has neither.
"""

from __future__ import annotations

import errno
import hashlib
import json
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

from radar_pipeline.core.errors import StoreDiskFault, StoreError, StoreLocked
from radar_pipeline.core.store.migrations import MIGRATIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    import psycopg

SCHEMA = "radar"  # the schema every provenance table lives in, beside Dagster's own tables
# The key of the session-level advisory lock the migration runner holds (any fixed int8 that
# no other lock of ours uses; per-Source locks hash their id into the other key space).
MIGRATION_LOCK_KEY = 0x52414441_52000001
# Every store transaction first takes this transaction-level advisory lock: the writers take
# turns, as they do on the DuckDB file. The store's read-modify-write steps (the Signal
# index's anti-joins, the facts' delete-then-insert, the folder state) were written for one
# writer at a time; under READ COMMITTED two of them would race into duplicate keys.
# Transactions are short (a collection needs a handful), so the turn-taking costs little.
STORE_TURN_KEY = 0x52414441_52000002
SOURCE_LOCK_CLASS = 0x52414452  # first int4 key of the two-key form: the Source locks' space


class PostgresConnection:
    """One psycopg connection, with DuckDB's `execute(sql, params) -> cursor` shape."""

    engine = "postgresql"

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, query: str, parameters: Any = None) -> psycopg.Cursor[Any]:
        # Without parameters psycopg sends the text in the simple protocol, which also runs
        # several statements (a migration); with them, one statement, bound by the server.
        return self.raw.execute(query, parameters or None)

    def executemany(self, query: str, parameters: Any = None) -> None:
        # psycopg sends the rows in one pipeline: one round trip per batch, not per row.
        with self.raw.cursor() as cur:
            cur.executemany(query, parameters or [])

    def close(self) -> None:
        self.raw.close()


def unnested_with_lists(
    column_types: Sequence[str], rows: Sequence[Sequence[Any]]
) -> tuple[str, list[list[Any]]]:
    """`connection.unnested` for rows with a list-valued column (`VARCHAR[]`). PostgreSQL has
    no array of arrays (a `VARCHAR[][]` is one rectangular array, unnested to its elements),
    so such a column is bound as one JSON text per row and made an array again, in order.
    Marks $1 to $N, as there."""
    inner, outer = [], []
    for i, kind in enumerate(column_types):
        if kind.endswith("[]"):
            inner.append(f"unnest(${i + 1}::JSONB[]) AS j{i}")
            outer.append(
                f"CASE WHEN j{i} IS NULL THEN NULL ELSE ARRAY(SELECT e FROM "
                f"jsonb_array_elements_text(j{i}) WITH ORDINALITY AS t(e, o) ORDER BY o)"
                f"::{kind} END AS c{i}"
            )
        else:
            inner.append(f"unnest(${i + 1}::{kind}[]) AS c{i}")
            outer.append(f"c{i}")
    params: list[list[Any]] = []
    for kind, column in zip(column_types, zip(*rows, strict=True), strict=True):
        if kind.endswith("[]"):
            params.append([None if v is None else json.dumps(list(v)) for v in column])
        else:
            params.append(list(column))
    select = f"SELECT {', '.join(outer)} FROM (SELECT {', '.join(inner)}) AS u"
    return select, params


# PostgreSQL's SQLSTATE codes (structured, never its message): the translation boundary of
# psycopg's errors into the project's (core/errors.py).
_DISK_FULL = "53100"
_LOCK_NOT_AVAILABLE = "55P03"


def psycopg_error_of(exc: psycopg.Error, url: str, doing: str) -> StoreError:
    """psycopg's error `exc` on the store at `url` as the project's class, its message `doing`
    and what the server said; the caller raises it `from exc`."""
    where = redacted(url)
    message = f"{doing}: {exc}"
    if exc.sqlstate == _DISK_FULL:
        return StoreDiskFault(errno.ENOSPC, message, where=where)
    if exc.sqlstate == _LOCK_NOT_AVAILABLE:
        return StoreLocked(message, where=where)
    return StoreError(message, where=where)


def connect(url: str) -> PostgresConnection:
    """A connection to `url` with the schema on its search path, UTC, NUMERIC read as int."""
    import psycopg
    from psycopg.types.numeric import NumericLoader

    class _WholeNumeric(NumericLoader):
        # NUMERIC columns hold UBIGINT values and sum() of integers: whole numbers, which
        # DuckDB returns as int; a fraction (none of our statements makes one) stays Decimal.
        def load(self, data: Any) -> Any:
            value = super().load(data)
            return int(value) if value == value.to_integral_value() else value

    try:
        # RawCursor: the `$1` marks are PostgreSQL's own, sent as written.
        raw = psycopg.connect(
            _driver_url(url), autocommit=True, connect_timeout=30, cursor_factory=psycopg.RawCursor
        )
    except psycopg.Error as exc:
        raise psycopg_error_of(exc, url, "cannot connect to the PostgreSQL store") from exc
    raw.adapters.register_loader("numeric", _WholeNumeric)
    raw.execute(f"SET search_path TO {SCHEMA}; SET TimeZone TO 'UTC'")
    return PostgresConnection(raw)


def _driver_url(url: str) -> str:
    # SQLAlchemy-style schemes (`postgresql+psycopg2://`) name a driver; libpq wants the plain one.
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql://", url)


def redacted(url: str) -> str:
    """`url` without its password, for messages."""
    return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)


def has_schema(url: str) -> bool:
    """Whether the store at `url` has its schema: a first migration committed there (the
    migrations table alone is made before it, and is left by a worker killed in it)."""
    con = connect(url)
    try:
        row = con.raw.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 "
            "AND table_name = 'schema_migrations'",
            [SCHEMA],
        ).fetchone()
        if not (row and row[0]):
            return False
        row = con.raw.execute(
            f"SELECT coalesce(max(version), 0) FROM {SCHEMA}.schema_migrations"
        ).fetchone()
        return bool(row and row[0])
    finally:
        con.close()


@contextmanager
def read_only_transaction(url: str) -> Iterator[PostgresConnection]:
    """A READ ONLY transaction on the store at `url` (a dry run): the server refuses every
    write in it, and no migration runs."""
    import psycopg

    con = connect(url)
    try:
        with con.raw.transaction():
            con.raw.execute("SET TRANSACTION READ ONLY")
            yield con
    except psycopg.Error as exc:
        raise psycopg_error_of(exc, url, f"reading {redacted(url)} failed") from exc
    finally:
        con.close()


class PostgresStoreBackend:
    """Transactions on the schema at `url`; the migrations run once per process and URL."""

    _migrated: ClassVar[set[str]] = set()
    migrate_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, url: str) -> None:
        self.url = url

    @contextmanager
    def transaction(self) -> Iterator[PostgresConnection]:
        import psycopg

        con = connect(self.url)
        try:
            self._ensure_schema(con)
            with con.raw.transaction():
                con.execute("SELECT pg_advisory_xact_lock($1)", [STORE_TURN_KEY])
                yield con
        except psycopg.Error as exc:
            raise psycopg_error_of(
                exc, self.url, f"transaction on {redacted(self.url)} failed"
            ) from exc
        finally:
            con.close()

    def _ensure_schema(self, con: PostgresConnection) -> None:
        if self.url in PostgresStoreBackend._migrated:
            return
        with PostgresStoreBackend.migrate_lock:
            # A session-level advisory lock: workers on other hosts starting at the same time
            # wait here, and a worker killed mid-migration releases it with its session (its
            # migration's transaction rolls back).
            con.execute("SELECT pg_advisory_lock($1)", [MIGRATION_LOCK_KEY])
            try:
                apply_migrations(con, redacted(self.url))
            finally:
                con.execute("SELECT pg_advisory_unlock($1)", [MIGRATION_LOCK_KEY])
            PostgresStoreBackend._migrated.add(self.url)

    @classmethod
    def forget_migrations(cls) -> None:
        cls._migrated.clear()


def apply_migrations(con: PostgresConnection, where: str) -> None:
    """The list DuckDB gets (`migrations.MIGRATIONS`), each in its own transaction."""
    con.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    con.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    )
    row = con.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    current = int(row[0]) if row else 0
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"{where} has schema version {current}, newer than this code ({SCHEMA_VERSION}); "
            "upgrade radar-pipeline"
        )
    for migration in MIGRATIONS:
        if migration.version <= current:
            continue
        with con.raw.transaction():
            con.execute(migration.sql("postgresql"))
            con.execute("INSERT INTO schema_migrations (version) VALUES ($1)", [migration.version])


def source_lock_key(source_id: str) -> int:
    """The second int4 key of a Source's advisory lock: a stable hash of its id (the same on
    every host and Python). Two ids sharing a key only make one wait for the other."""
    digest = hashlib.blake2b(source_id.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


class SourceLocks:
    """Per-Source locks that hold across hosts: PostgreSQL session-level advisory locks on one
    connection of their own. The server releases them when the session ends, however the
    holder dies (killed, host lost: once TCP keepalive gives the session up)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._con: PostgresConnection | None = None
        self._lock = threading.Lock()  # one connection, used by one thread at a time

    def try_lock(self, source_id: str) -> bool:
        with self._lock:
            if self._con is None:
                self._con = connect(self.url)
            row = self._con.raw.execute(
                "SELECT pg_try_advisory_lock($1, $2)",
                [SOURCE_LOCK_CLASS, source_lock_key(source_id)],
            ).fetchone()
            return bool(row and row[0])

    def unlock(self, source_id: str) -> None:
        with self._lock:
            if self._con is not None:
                self._con.raw.execute(
                    "SELECT pg_advisory_unlock($1, $2)",
                    [SOURCE_LOCK_CLASS, source_lock_key(source_id)],
                )

    def close(self) -> None:
        """End the session: every lock it still holds is released with it."""
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None
