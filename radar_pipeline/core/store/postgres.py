"""The team profile's store backend: the same tables in a PostgreSQL schema (`RADAR_STORE_URL`).

Every dialect difference between DuckDB and PostgreSQL that is not a whole statement lives
here, each one commented: the parameter marks, type names, the UBIGINT columns, the functions
DuckDB has built in, and the migration runner's lock. The store modules keep one SQL text per
statement and branch on `is_postgres(con)` only where the dialects truly part (each such
statement says why). psycopg is imported only when a PostgreSQL store is opened, so the
embedded default never loads it.

Driver: psycopg 3. Its `Connection.execute()` returns a cursor with `fetchone`/`fetchall`/
`description`, the shape DuckDB's connection has, so the store modules run unchanged on either;
it adapts Python lists to PostgreSQL arrays (the store binds whole columns as one array) and
binds parameters server-side. psycopg2 (which Dagster's own PostgreSQL storage uses) has
neither the cursor-returning `execute` nor server-side binding.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, ClassVar

from radar_pipeline.core.errors import StoreError

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

# DuckDB type names that PostgreSQL spells differently. UBIGINT (simhash, inode, size) has no
# PostgreSQL type: NUMERIC(20) holds every unsigned 64-bit value and reads back as int (below).
_TYPE_NAMES = (
    (re.compile(r"\bUBIGINT\b"), "NUMERIC(20)"),
    (re.compile(r"\bDOUBLE\b(?! PRECISION)"), "DOUBLE PRECISION"),
)

# Functions DuckDB has built in and PostgreSQL lacks, created in the schema (CREATE OR REPLACE,
# once per process under the migration lock) so the statements that use them read the same on
# both (json_extract_string: DuckDB's `$.a.b` paths of plain keys). arg_max/arg_min keep
# DuckDB's rule: rows whose value or key is NULL are ignored; the state holds the key and value
# as text, read back into their own types at the end.
_COMPAT_FUNCTIONS = f"""
CREATE OR REPLACE FUNCTION {SCHEMA}.epoch(ts TIMESTAMPTZ) RETURNS DOUBLE PRECISION
    LANGUAGE SQL IMMUTABLE AS $$ SELECT extract(epoch FROM ts)::DOUBLE PRECISION $$;
CREATE OR REPLACE FUNCTION {SCHEMA}.regexp_full_match(s TEXT, pattern TEXT) RETURNS BOOLEAN
    LANGUAGE SQL IMMUTABLE AS $$ SELECT s ~ ('^(?:' || pattern || ')$') $$;
CREATE OR REPLACE FUNCTION {SCHEMA}.regexp_matches(s TEXT, pattern TEXT) RETURNS BOOLEAN
    LANGUAGE SQL IMMUTABLE AS $$ SELECT s ~ pattern $$;
CREATE OR REPLACE FUNCTION {SCHEMA}.regexp_extract(s TEXT, pattern TEXT, grp INTEGER)
    RETURNS TEXT LANGUAGE SQL IMMUTABLE AS $$ SELECT (regexp_match(s, pattern))[grp] $$;
CREATE OR REPLACE FUNCTION {SCHEMA}.json_extract_string(doc TEXT, path TEXT) RETURNS TEXT
    LANGUAGE SQL IMMUTABLE AS $$
    SELECT doc::JSONB #>> string_to_array(substr(path, 3), '.') $$;
CREATE OR REPLACE FUNCTION {SCHEMA}.arg_max_step(state TEXT[], v ANYELEMENT, k ANYCOMPATIBLE)
    RETURNS TEXT[] LANGUAGE plpgsql IMMUTABLE AS $$
    DECLARE best k%TYPE;
    BEGIN
        IF v IS NULL OR k IS NULL THEN RETURN state; END IF;
        IF state IS NULL THEN RETURN ARRAY[k::TEXT, v::TEXT]; END IF;
        best := state[1];
        IF k > best THEN RETURN ARRAY[k::TEXT, v::TEXT]; END IF;
        RETURN state;
    END $$;
CREATE OR REPLACE FUNCTION {SCHEMA}.arg_min_step(state TEXT[], v ANYELEMENT, k ANYCOMPATIBLE)
    RETURNS TEXT[] LANGUAGE plpgsql IMMUTABLE AS $$
    DECLARE best k%TYPE;
    BEGIN
        IF v IS NULL OR k IS NULL THEN RETURN state; END IF;
        IF state IS NULL THEN RETURN ARRAY[k::TEXT, v::TEXT]; END IF;
        best := state[1];
        IF k < best THEN RETURN ARRAY[k::TEXT, v::TEXT]; END IF;
        RETURN state;
    END $$;
CREATE OR REPLACE FUNCTION {SCHEMA}.arg_final(state TEXT[], v ANYELEMENT, k ANYCOMPATIBLE)
    RETURNS ANYELEMENT LANGUAGE plpgsql IMMUTABLE AS $$
    DECLARE result v%TYPE;
    BEGIN
        IF state IS NULL THEN RETURN NULL; END IF;
        result := state[2];
        RETURN result;
    END $$;
CREATE OR REPLACE AGGREGATE {SCHEMA}.arg_max(ANYELEMENT, ANYCOMPATIBLE) (
    SFUNC = {SCHEMA}.arg_max_step, STYPE = TEXT[], FINALFUNC = {SCHEMA}.arg_final,
    FINALFUNC_EXTRA);
CREATE OR REPLACE AGGREGATE {SCHEMA}.arg_min(ANYELEMENT, ANYCOMPATIBLE) (
    SFUNC = {SCHEMA}.arg_min_step, STYPE = TEXT[], FINALFUNC = {SCHEMA}.arg_final,
    FINALFUNC_EXTRA);
CREATE OR REPLACE AGGREGATE {SCHEMA}.list(ANYCOMPATIBLE) (
    SFUNC = array_append, STYPE = ANYCOMPATIBLEARRAY);
CREATE OR REPLACE FUNCTION {SCHEMA}.median_final(xs DOUBLE PRECISION[])
    RETURNS DOUBLE PRECISION LANGUAGE SQL IMMUTABLE AS $$
    SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM unnest(xs) AS x $$;
CREATE OR REPLACE AGGREGATE {SCHEMA}.median(DOUBLE PRECISION) (
    SFUNC = array_append, STYPE = DOUBLE PRECISION[], FINALFUNC = {SCHEMA}.median_final);
"""


def postgres_text(sql: str) -> str:
    """DuckDB-flavoured SQL as PostgreSQL reads it: `?` marks become psycopg's `%s` (a literal
    `%` doubled), type names translated. Quoted literals are left as they are."""
    parts = sql.split("'")
    for i in range(0, len(parts), 2):  # even parts are outside quotes
        text = parts[i].replace("%", "%%").replace("?", "%s")
        for pattern, name in _TYPE_NAMES:
            text = pattern.sub(name, text)
        parts[i] = text
    for i in range(1, len(parts), 2):  # a literal `%` inside quotes is doubled too
        parts[i] = parts[i].replace("%", "%%")
    return "'".join(parts)


class PostgresConnection:
    """One psycopg connection, with DuckDB's `execute(sql, params) -> cursor` shape."""

    dialect = "postgresql"

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, query: str, parameters: Any = None) -> psycopg.Cursor[Any]:
        if parameters is None or len(parameters) == 0:
            # Without parameters psycopg sends the text as it is: only types are translated.
            return self.raw.execute(_types_only(query))
        return self.raw.execute(postgres_text(query), parameters)

    def executemany(self, query: str, parameters: Any = None) -> None:
        # psycopg sends the rows in one pipeline: one round trip per batch, not per row.
        with self.raw.cursor() as cur:
            cur.executemany(postgres_text(query), parameters or [])

    def close(self) -> None:
        self.raw.close()


def unnested_with_lists(
    column_types: Sequence[str], rows: Sequence[Sequence[Any]]
) -> tuple[str, list[list[Any]]]:
    """`connection.unnested` for rows with a list-valued column (`VARCHAR[]`). PostgreSQL has
    no array of arrays (a `VARCHAR[][]` is one rectangular array, unnested to its elements),
    so such a column is bound as one JSON text per row and made an array again, in order."""
    inner, outer = [], []
    for i, kind in enumerate(column_types):
        if kind.endswith("[]"):
            inner.append(f"unnest(?::JSONB[]) AS j{i}")
            outer.append(
                f"CASE WHEN j{i} IS NULL THEN NULL ELSE ARRAY(SELECT e FROM "
                f"jsonb_array_elements_text(j{i}) WITH ORDINALITY AS t(e, o) ORDER BY o)"
                f"::{kind} END AS c{i}"
            )
        else:
            inner.append(f"unnest(?::{kind}[]) AS c{i}")
            outer.append(f"c{i}")
    params: list[list[Any]] = []
    for kind, column in zip(column_types, zip(*rows, strict=True), strict=True):
        if kind.endswith("[]"):
            params.append([None if v is None else json.dumps(list(v)) for v in column])
        else:
            params.append(list(column))
    select = f"SELECT {', '.join(outer)} FROM (SELECT {', '.join(inner)}) AS u"
    return select, params


def _types_only(sql: str) -> str:
    parts = sql.split("'")
    for i in range(0, len(parts), 2):
        for pattern, name in _TYPE_NAMES:
            parts[i] = pattern.sub(name, parts[i])
    return "'".join(parts)


def is_postgres(con: object) -> bool:
    """Whether `con` is a PostgreSQL connection (else DuckDB)."""
    return isinstance(con, PostgresConnection)


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
        raw = psycopg.connect(_driver_url(url), autocommit=True, connect_timeout=30)
    except psycopg.Error as exc:
        raise StoreError(f"cannot connect to the PostgreSQL store: {exc}") from exc
    raw.adapters.register_loader("numeric", _WholeNumeric)
    # The schema before pg_catalog: DuckDB's boolean regexp_matches(s, pattern) (below) then
    # wins over PostgreSQL's set-returning one of the same name.
    raw.execute(f"SET search_path TO {SCHEMA}, pg_catalog; SET TimeZone TO 'UTC'")
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
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s "
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
        raise StoreError(f"reading {redacted(url)} failed: {exc}") from exc
    finally:
        con.close()


class PostgresStoreBackend:
    """Transactions on the schema at `url`; the migrations run once per process and URL."""

    _migrated: ClassVar[set[str]] = set()
    migrate_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, url: str) -> None:
        self.url = url

    @contextmanager
    def transaction(
        self, migrations: tuple[tuple[int, str], ...], version: int
    ) -> Iterator[PostgresConnection]:
        import psycopg

        con = connect(self.url)
        try:
            self._ensure_schema(con, migrations, version)
            with con.raw.transaction():
                con.raw.execute("SELECT pg_advisory_xact_lock(%s)", [STORE_TURN_KEY])
                yield con
        except psycopg.Error as exc:
            raise StoreError(f"transaction on {redacted(self.url)} failed: {exc}") from exc
        finally:
            con.close()

    def _ensure_schema(
        self, con: PostgresConnection, migrations: tuple[tuple[int, str], ...], version: int
    ) -> None:
        if self.url in PostgresStoreBackend._migrated:
            return
        with PostgresStoreBackend.migrate_lock:
            # A session-level advisory lock: workers on other hosts starting at the same time
            # wait here, and a worker killed mid-migration releases it with its session (its
            # migration's transaction rolls back).
            con.raw.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK_KEY])
            try:
                apply_migrations(con, migrations, version, redacted(self.url))
            finally:
                con.raw.execute("SELECT pg_advisory_unlock(%s)", [MIGRATION_LOCK_KEY])
            PostgresStoreBackend._migrated.add(self.url)

    @classmethod
    def forget_migrations(cls) -> None:
        cls._migrated.clear()


# Migrations whose DuckDB text PostgreSQL cannot run. A PostgreSQL schema starts empty (this
# backend appeared at version 11), so the old migrations' backfills have nothing to read; what
# they create is the same. New migrations need no entry while they stick to SQL both dialects
# read (type names are translated by `postgres_text`).
POSTGRES_MIGRATIONS: dict[int, str] = {
    3: """
        CREATE TABLE identity_aliases (
            identity VARCHAR PRIMARY KEY,
            signal_id VARCHAR NOT NULL,
            identity_version INTEGER NOT NULL,
            source_id VARCHAR NOT NULL,
            canonical_url VARCHAR NOT NULL,
            recorded_at TIMESTAMPTZ NOT NULL
        );
        CREATE INDEX identity_aliases_signal ON identity_aliases (signal_id);
        CREATE INDEX identity_aliases_url ON identity_aliases (canonical_url);
        CREATE INDEX signals_canonical_url ON signals (canonical_url);
        CREATE INDEX signals_content_hash ON signals (content_hash);
        CREATE INDEX signals_title_key ON signals (title_key);
        CREATE TABLE simhash_bands (
            band_key INTEGER NOT NULL,
            signal_id VARCHAR NOT NULL,
            simhash UBIGINT NOT NULL,
            first_seen_at TIMESTAMPTZ NOT NULL
        );
        CREATE INDEX simhash_bands_key ON simhash_bands (band_key);
        CREATE INDEX simhash_bands_signal ON simhash_bands (signal_id);
    """,
    7: """
        CREATE TABLE check_accounting (
            collection_id VARCHAR NOT NULL,
            source_id VARCHAR NOT NULL,
            as_of TIMESTAMPTZ NOT NULL,
            outcome VARCHAR NOT NULL,
            items_parsed INTEGER NOT NULL,
            created INTEGER NOT NULL,
            reused INTEGER NOT NULL,
            updated INTEGER NOT NULL,
            duplicates INTEGER NOT NULL,
            rejected INTEGER NOT NULL,
            deferred INTEGER NOT NULL,
            outside_window INTEGER NOT NULL,
            late INTEGER NOT NULL,
            possible_gap BOOLEAN NOT NULL,
            coverage_from TIMESTAMPTZ,
            window_from TIMESTAMPTZ,
            newest_observed_at TIMESTAMPTZ,
            item_ids VARCHAR[],
            PRIMARY KEY (collection_id, source_id)
        );
        CREATE INDEX check_accounting_source ON check_accounting (source_id);
        CREATE TABLE duplicate_items (
            identity VARCHAR PRIMARY KEY,
            signal_id VARCHAR NOT NULL,
            source_id VARCHAR NOT NULL,
            canonical_url VARCHAR,
            recorded_at TIMESTAMPTZ NOT NULL
        );
        CREATE TABLE source_items (
            identity VARCHAR PRIMARY KEY,
            source_id VARCHAR NOT NULL,
            observed_at TIMESTAMPTZ,
            first_seen_at TIMESTAMPTZ NOT NULL
        );
        CREATE INDEX source_items_source ON source_items (source_id);
    """,
}


def apply_migrations(
    con: PostgresConnection, migrations: tuple[tuple[int, str], ...], version: int, where: str
) -> None:
    """The same append-only list DuckDB gets, each migration in its own transaction."""
    con.raw.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
    con.raw.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
    )
    row = con.raw.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    current = int(row[0]) if row else 0
    if current > version:
        raise StoreError(
            f"{where} has schema version {current}, newer than this code ({version}); "
            "upgrade radar-pipeline"
        )
    with con.raw.transaction():
        con.raw.execute(_COMPAT_FUNCTIONS)
    for number, sql in migrations:
        if number <= current:
            continue
        with con.raw.transaction():
            con.raw.execute(_types_only(POSTGRES_MIGRATIONS.get(number, sql)))
            con.raw.execute("INSERT INTO schema_migrations (version) VALUES (%s)", [number])


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
                "SELECT pg_try_advisory_lock(%s, %s)",
                [SOURCE_LOCK_CLASS, source_lock_key(source_id)],
            ).fetchone()
            return bool(row and row[0])

    def unlock(self, source_id: str) -> None:
        with self._lock:
            if self._con is not None:
                self._con.raw.execute(
                    "SELECT pg_advisory_unlock(%s, %s)",
                    [SOURCE_LOCK_CLASS, source_lock_key(source_id)],
                )

    def close(self) -> None:
        """End the session: every lock it still holds is released with it."""
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


def held_source_locks(url: str) -> list[int]:
    """The Source lock keys any session holds now (for tests and operators)."""
    con = connect(url)
    try:
        rows = con.raw.execute(
            "SELECT objid::INTEGER FROM pg_locks WHERE locktype = 'advisory' AND classid = %s "
            "AND granted",
            [SOURCE_LOCK_CLASS],
        ).fetchall()
        return [int(r[0]) for r in rows]
    finally:
        con.close()
