"""The DuckDB provenance store: run history, fetch attempts, observations, Signal index, feed state.

DuckDB allows one writing process per file. Every process that touches the file opens it for one
short transaction at a time and waits, with a bound, while another process holds it
(`StoreSettings.lock_timeout_s`); no record is ever dropped because of a lock. The schema is
versioned: `MIGRATIONS` is append-only and applied in order at first connection.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import random
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import duckdb

from radar_pipeline.core.errors import StoreError

SCHEMA_VERSION = 6

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (
        1,
        """
        CREATE TABLE collections (
            collection_id VARCHAR PRIMARY KEY,
            dagster_run_id VARCHAR,
            trigger VARCHAR NOT NULL,
            as_of TIMESTAMPTZ NOT NULL,
            started_at TIMESTAMPTZ NOT NULL,
            finished_at TIMESTAMPTZ,
            downtime_from TIMESTAMPTZ,
            overdue INTEGER, due INTEGER, passed INTEGER, failed INTEGER, skipped INTEGER,
            created INTEGER, reused INTEGER, updated INTEGER, duplicates INTEGER, rejected INTEGER,
            report_json VARCHAR
        );
        CREATE TABLE fetch_attempts (
            attempt_id VARCHAR PRIMARY KEY,
            collection_id VARCHAR NOT NULL,
            source_id VARCHAR NOT NULL,
            fetched_at TIMESTAMPTZ NOT NULL,
            requested_url VARCHAR NOT NULL,
            final_url VARCHAR,
            outcome VARCHAR NOT NULL,
            http_status INTEGER,
            conditional BOOLEAN NOT NULL,
            etag VARCHAR,
            last_modified VARCHAR,
            validators_changed BOOLEAN,
            body_sha256 VARCHAR,
            bytes BIGINT NOT NULL,
            duration_ms DOUBLE NOT NULL,
            redirects INTEGER NOT NULL,
            error_class VARCHAR,
            error_message VARCHAR,
            retry_after_s DOUBLE
        );
        CREATE INDEX fetch_attempts_source ON fetch_attempts (source_id, fetched_at);
        CREATE TABLE item_observations (
            collection_id VARCHAR NOT NULL,
            source_id VARCHAR NOT NULL,
            observed_in_run_at TIMESTAMPTZ NOT NULL,
            identity VARCHAR,
            source_item_id VARCHAR,
            canonical_url VARCHAR,
            observed_at TIMESTAMPTZ,
            content_hash VARCHAR,
            outcome VARCHAR NOT NULL,
            signal_id VARCHAR,
            reason VARCHAR
        );
        CREATE INDEX item_observations_identity ON item_observations (identity);
        CREATE TABLE signals (
            signal_id VARCHAR PRIMARY KEY,
            identity VARCHAR NOT NULL UNIQUE,
            identity_version INTEGER NOT NULL,
            source_id VARCHAR NOT NULL,
            source_item_id VARCHAR NOT NULL,
            canonical_url VARCHAR NOT NULL,
            title_key VARCHAR NOT NULL,
            observed_day DATE,
            content_hash VARCHAR NOT NULL,
            simhash UBIGINT NOT NULL,
            first_seen_at TIMESTAMPTZ NOT NULL,
            duplicate_candidate_of VARCHAR,
            file_path VARCHAR NOT NULL,
            UNIQUE (source_id, canonical_url)
        );
        CREATE INDEX signals_content ON signals (source_id, content_hash);
        CREATE INDEX signals_title_day ON signals (title_key, observed_day);
        CREATE TABLE signal_revisions (
            signal_id VARCHAR NOT NULL,
            collection_id VARCHAR NOT NULL,
            recorded_at TIMESTAMPTZ NOT NULL,
            content_hash VARCHAR NOT NULL,
            title VARCHAR,
            observed_at TIMESTAMPTZ
        );
        CREATE TABLE feed_state (
            source_id VARCHAR PRIMARY KEY,
            etag VARCHAR,
            last_modified VARCHAR,
            last_body_sha256 VARCHAR,
            last_unconditional_at TIMESTAMPTZ,
            last_attempt_at TIMESTAMPTZ,
            last_success_at TIMESTAMPTZ,
            last_fetch_at TIMESTAMPTZ,
            last_status INTEGER,
            error_state VARCHAR,
            consecutive_failures INTEGER NOT NULL DEFAULT 0,
            backoff_until TIMESTAMPTZ
        );
        CREATE TABLE dead_letters (
            dead_letter_id VARCHAR PRIMARY KEY,
            collection_id VARCHAR,
            source_id VARCHAR NOT NULL,
            stage VARCHAR NOT NULL,
            error_class VARCHAR NOT NULL,
            message VARCHAR NOT NULL,
            attempt INTEGER NOT NULL,
            status VARCHAR NOT NULL,
            created_at TIMESTAMPTZ NOT NULL,
            decided_at TIMESTAMPTZ,
            decision VARCHAR
        );
        CREATE TABLE cleanup_runs (
            cleanup_id VARCHAR PRIMARY KEY,
            closed_at TIMESTAMPTZ NOT NULL,
            week VARCHAR,
            deleted INTEGER NOT NULL,
            bytes BIGINT NOT NULL,
            retained INTEGER NOT NULL
        );
        """,
    ),
    (
        2,
        # Per-attempt metrics known only after the commit (items, backoff state), and the
        # collection a dead letter's replay ran in.
        """
        ALTER TABLE fetch_attempts ADD COLUMN check_outcome VARCHAR;
        ALTER TABLE fetch_attempts ADD COLUMN items_parsed INTEGER;
        ALTER TABLE fetch_attempts ADD COLUMN items_new INTEGER;
        ALTER TABLE fetch_attempts ADD COLUMN items_duplicate INTEGER;
        ALTER TABLE fetch_attempts ADD COLUMN items_rejected INTEGER;
        ALTER TABLE fetch_attempts ADD COLUMN consecutive_failures INTEGER;
        ALTER TABLE fetch_attempts ADD COLUMN backoff_until TIMESTAMPTZ;
        ALTER TABLE dead_letters ADD COLUMN replay_collection_id VARCHAR;
        """,
    ),
    (
        3,
        # Identity aliases (re-key after an identity rule change) and single-column lookup
        # keys: DuckDB answers an equality on one ART-indexed column with an index scan, but
        # scans the whole table for a composite index or a conjunction, so every dedupe
        # lookup is one equality on one of these. Simhash bands: four 16-bit slices of the
        # simhash; two simhashes within 3 bits share at least one slice (pigeonhole).
        """
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
        INSERT INTO simhash_bands
            SELECT b * 65536 + ((simhash >> (16 * b)) & 65535)::INTEGER, signal_id, simhash,
                first_seen_at
            FROM signals, range(4) AS t(b);
        CREATE INDEX simhash_bands_key ON simhash_bands (band_key);
        CREATE INDEX simhash_bands_signal ON simhash_bands (signal_id);
        """,
    ),
    (
        4,
        # What the evidence audits learned from each Signal file, keyed by its name and stat
        # (core/audit.py): the checks after a collection parse only new or changed files. A
        # cache: losing it (a rebuilt database) only means every file is read once more.
        """
        CREATE TABLE audit_signal_files (
            name VARCHAR PRIMARY KEY,
            ino UBIGINT NOT NULL,
            size UBIGINT NOT NULL,
            mtime_ns BIGINT NOT NULL,
            declared_id VARCHAR,
            error VARCHAR,
            provenance VARCHAR,
            body_length BIGINT NOT NULL
        );
        """,
    ),
    (
        5,
        # The facts' key gains the inode's change time: a file rewritten at the same size with
        # its mtime put back (`touch -r`, `cp -p`, a sync tool) still changes ctime. The table
        # is a cache, so it starts empty: the next checks read every file once.
        """
        DROP TABLE audit_signal_files;
        CREATE TABLE audit_signal_files (
            name VARCHAR PRIMARY KEY,
            ino UBIGINT NOT NULL,
            size UBIGINT NOT NULL,
            mtime_ns BIGINT NOT NULL,
            ctime_ns BIGINT NOT NULL,
            declared_id VARCHAR,
            error VARCHAR,
            provenance VARCHAR,
            body_length BIGINT NOT NULL
        );
        """,
    ),
    (
        6,
        # The audits become set queries over these facts (core/audit.py), so each file's
        # identity (SignalFile.identity) is stored with them. A declared id is a well-formed
        # Signal id, whose identity is what follows its last hyphen; the few rows without one
        # are dropped and read again at the next check, where Python decides what their names
        # claim. Files that could not be read are now kept too (with their error), and read
        # again at each check.
        """
        ALTER TABLE audit_signal_files ADD COLUMN identity VARCHAR;
        UPDATE audit_signal_files SET identity = regexp_extract(declared_id, '-([^-]*)$', 1)
            WHERE declared_id IS NOT NULL;
        DELETE FROM audit_signal_files WHERE declared_id IS NULL;
        """,
    ),
)

_LOCK_MARKERS = ("Could not set lock", "Conflicting lock")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LockWaitStats:
    """This process's time spent waiting for DuckDB's single-writer lock (all Stores)."""

    connects: int  # successful opens of a store file
    waited: int  # opens that found the file held by another process at least once
    wait_s: float  # total time spent waiting in those opens
    max_wait_s: float  # the longest single wait


_wait_lock = threading.Lock()
_wait_totals: dict[str, float] = {"connects": 0, "waited": 0, "wait_s": 0.0, "max_wait_s": 0.0}


def lock_wait_stats() -> LockWaitStats:
    """Counters of the writer-lock waits in this process, for benchmarks and logs."""
    with _wait_lock:
        t = dict(_wait_totals)
    return LockWaitStats(int(t["connects"]), int(t["waited"]), t["wait_s"], t["max_wait_s"])


def _count_connect(wait_s: float | None) -> None:
    with _wait_lock:
        _wait_totals["connects"] += 1
        if wait_s is not None:
            _wait_totals["waited"] += 1
            _wait_totals["wait_s"] += wait_s
            _wait_totals["max_wait_s"] = max(_wait_totals["max_wait_s"], wait_s)


@dataclass(frozen=True)
class StoreSettings:
    lock_timeout_s: float = 120.0  # how long a process waits for another's transaction


class Store:
    """The DuckDB file at `path`. Each `transaction()` opens, commits and closes the file."""

    _migrated: ClassVar[set[Path]] = set()
    _migrate_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: Path, settings: StoreSettings | None = None) -> None:
        self.path = Path(path)
        self.settings = settings or StoreSettings()
        # Threads of one process share the file; DuckDB allows that, but serialise our
        # transactions so one process never conflicts with itself.
        self._local_lock = threading.RLock()

    def _connect(self) -> duckdb.DuckDBPyConnection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        deadline = started + self.settings.lock_timeout_s
        delay = 0.01
        waited = False
        while True:
            try:
                con = duckdb.connect(str(self.path))
                con.execute("SET TimeZone = 'UTC'")
                wait_s = time.monotonic() - started if waited else None
                _count_connect(wait_s)
                if wait_s is not None:
                    log.info("waited %.3f s for the DuckDB writer lock on %s", wait_s, self.path)
                return con
            except duckdb.IOException as exc:
                if not is_duckdb_file(self.path):
                    raise StoreError(
                        f"{self.path} is not a DuckDB file; `radar index rebuild` moves it "
                        "aside and rebuilds the Signal index from the vault"
                    ) from exc
                if not any(marker in str(exc) for marker in _LOCK_MARKERS):
                    raise StoreError(f"cannot open {self.path}: {exc}") from exc
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"{self.path} stayed locked by another process for "
                        f"{self.settings.lock_timeout_s:.0f} s; retry when it has finished"
                    ) from exc
                waited = True
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.5)
            except duckdb.Error as exc:
                raise StoreError(
                    f"{self.path} is not a usable DuckDB file ({exc}); move it aside and run "
                    "`radar index rebuild`"
                ) from exc

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """One short read-write transaction; committed on success, rolled back on error."""
        with self._local_lock:
            con = self._connect()
            try:
                self._ensure_schema(con)
                con.execute("BEGIN TRANSACTION")
                try:
                    yield con
                except BaseException:
                    con.execute("ROLLBACK")
                    raise
                con.execute("COMMIT")
            except duckdb.Error as exc:
                raise StoreError(f"transaction on {self.path} failed: {exc}") from exc
            finally:
                con.close()

    def _ensure_schema(self, con: duckdb.DuckDBPyConnection) -> None:
        key = self.path.resolve()
        if key in Store._migrated:
            return
        with Store._migrate_lock:
            con.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            row = con.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {current}, newer than this code "
                    f"({SCHEMA_VERSION}); upgrade radar-pipeline"
                )
            for version, sql in MIGRATIONS:
                if version <= current:
                    continue
                con.execute("BEGIN TRANSACTION")
                con.execute(sql)
                con.execute("INSERT INTO schema_migrations (version) VALUES (?)", [version])
                con.execute("COMMIT")
            Store._migrated.add(key)

    @classmethod
    def forget_migrations(cls) -> None:
        """For tests that delete or replace the file within one process."""
        cls._migrated.clear()

    # ---- reads -----------------------------------------------------------------------------

    def schema_version(self) -> int:
        with self.transaction() as con:
            row = con.execute("SELECT max(version) FROM schema_migrations").fetchone()
            return int(row[0]) if row and row[0] is not None else 0


@contextmanager
def gc_paused() -> Iterator[None]:
    """Suspend the cyclic garbage collector while a block builds large acyclic results.

    Loading 100,000 index rows or audit facts allocates hundreds of thousands of tuples and
    objects; each allocation burst triggers collections, and every full one walks all live
    objects (Dagster's included): ~0.15 s each, 1.4 s per collection at 100,000 Signals.
    Nothing in such a block makes reference cycles, so reference counting frees it all; any
    cyclic garbage is collected as usual once the block ends. Nested uses are fine.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def insert_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    column_types: Sequence[str],
    rows: Sequence[Sequence[Any]],
    where: str = "",
    columns: Sequence[str] | None = None,
) -> None:
    """Insert many rows with ONE statement: each column is bound as one typed list and unnested.

    DuckDB runs `executemany` as one statement per row (about 1-3 ms each here), so 4,000
    observations cost seconds that way and a few milliseconds this way. `where` filters the
    unnested rows (aliased `n`, columns `c0`, `c1`, ...), e.g. an anti-join on existing keys.
    `columns`: the table's columns the rows fill, in order (default: all of them).
    """
    if not rows:
        return
    select, params = unnested(column_types, rows)
    target = f"{table} ({', '.join(columns)})" if columns is not None else table
    con.execute(f"INSERT INTO {target} SELECT * FROM ({select}) AS n {where}", params)


def unnested(
    column_types: Sequence[str], rows: Sequence[Sequence[Any]]
) -> tuple[str, list[list[Any]]]:
    """`SELECT unnest(?::T[]) AS c0, ...` and its parameters: `rows` as one relation, each
    column bound as one typed list (for `insert_rows`, or an UPDATE ... FROM it)."""
    columns = ", ".join(f"unnest(?::{kind}[]) AS c{i}" for i, kind in enumerate(column_types))
    return f"SELECT {columns}", [list(column) for column in zip(*rows, strict=True)]


_DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


def is_duckdb_file(path: Path) -> bool:
    """False only for an existing file that is surely not a DuckDB database (wrong magic)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(12)
    except FileNotFoundError:
        return True  # absent: DuckDB creates it
    except OSError:
        return True  # unreadable for another reason: let DuckDB report it
    return head[8:12] == _DUCKDB_MAGIC


def move_aside_if_not_duckdb(path: Path, now: datetime) -> Path | None:
    """Rename a file at `path` that is not a DuckDB database (and its WAL) out of the way.

    Nothing is deleted: the file becomes `<name>.unusable-<UTC stamp>` next to it, and the
    new path is returned (None when the file is absent or a real DuckDB file, even a locked
    one). Used by `radar index rebuild`, which then derives the index again from the vault.
    """
    if not path.exists() or is_duckdb_file(path):
        return None
    target = path.with_name(f"{path.name}.unusable-{now.strftime('%Y%m%dT%H%M%SZ')}")
    os.replace(path, target)
    wal = path.with_name(path.name + ".wal")
    if wal.exists():  # a WAL belongs to the old file; replayed onto a new one it would fail
        os.replace(wal, target.with_name(target.name + ".wal"))
    Store.forget_migrations()
    return target


def rows_as_dicts(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()
) -> list[dict[str, Any]]:
    cur = con.execute(sql, list(params))
    names = [d[0] for d in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def to_json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
