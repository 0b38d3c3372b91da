"""The provenance store: run history, fetch attempts, observations, Signal index, feed state.

Embedded profile (the default): the DuckDB file at RADAR_DB. Team profile: the same tables in
PostgreSQL at RADAR_STORE_URL (core/store/postgres.py). The store modules take a `Connection`,
which either backend gives, and write each statement once, in SQL both engines read as written
(core/store/dialect.py holds the few places where they part).

DuckDB allows one writing process per file. Every process that touches the file opens it for one
short transaction at a time and waits, with a bound, while another process holds it
(`StoreSettings.lock_timeout_s`); no record is ever dropped because of a lock. The schema is
versioned: `migrations.MIGRATIONS`, one list for both engines, is append-only and applied in
order at first connection.
"""

from __future__ import annotations

import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import duckdb

from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.errors import (
    DISK_FAULTS,
    StoreDiskFault,
    StoreError,
    StoreLocked,
    StoreUnreadable,
)
from radar_pipeline.core.store.dialect import engine
from radar_pipeline.core.store.migrations import MIGRATIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    from radar_pipeline.core.store.postgres import PostgresStoreBackend, SourceLocks

T = TypeVar("T")

# DuckDB's words, read here and nowhere else (core/errors.py: the translation boundary). Its
# errors carry no code: the message is all it gives. A lock held by another process:
_LOCK_MARKERS = ("Could not set lock", "Conflicting lock")
_LOCK_HOLDER = re.compile(r"held in (?P<exe>.+?) \(PID (?P<pid>\d+)\)")
# A file it cannot open or read: cut short, not a database, a newer storage format, a block
# whose checksum fails.
_UNREADABLE_MARKERS = (
    "Could not read enough bytes",
    "not a valid DuckDB database file",
    "Trying to read a database file with version number",
    "Corrupt database file",
    "database file is corrupt",
)
# The file its message names (`Could not write file "<f>": <strerror>`), else the store's.
_QUOTED_FILE = re.compile(r'file "([^"]+)"')
# A DuckDB file younger than this that does not open yet is taken to be in creation.
CREATION_GRACE_S = 10.0

log = logging.getLogger(__name__)


class Cursor(Protocol):
    """What a statement's result gives: DuckDB's connection, or a psycopg cursor."""

    @property
    def description(self) -> Any: ...
    def fetchone(self) -> tuple[Any, ...] | None: ...
    def fetchall(self) -> list[tuple[Any, ...]]: ...
    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]: ...


class Connection(Protocol):
    """A connection in one transaction, of either backend: `execute` with `$1` marks."""

    def execute(self, query: str, parameters: Any = None) -> Cursor: ...
    def executemany(self, query: str, parameters: Any = None) -> Any: ...


# One DuckDB thread a connection. Our transactions are small (a slice's rows, set queries over
# the index): on a store of 40,000 Signals the dedupe's lookups and the audits took as long on
# one thread as on two, while every extra thread keeps a malloc arena of its own (docs/
# performance.md: a cold collection of 2,000 Sources peaked 28 MB lower, run side by side).
# During a cold collection the parse workers have the other cores anyway.
CONNECTION_CONFIG: dict[str, str | bool | int | float | list[str]] = {"threads": 1}


@dataclass(frozen=True)
class StoreSettings:
    lock_timeout_s: float = 120.0  # how long a process waits for another's transaction


class Store:
    """The DuckDB file at `path`, or the PostgreSQL schema at `url` when one is given. Each
    `transaction()` opens, commits and closes its connection."""

    _migrated: ClassVar[set[Path]] = set()
    _migrate_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: Path, settings: StoreSettings | None = None, url: str = "") -> None:
        self.path = Path(path)
        self.settings = settings or StoreSettings()
        self.url = url
        # Threads of one process share the file; DuckDB allows that, but serialise our
        # transactions so one process never conflicts with itself.
        self._local_lock = threading.RLock()
        self._postgres: PostgresStoreBackend | None = None
        if url:
            from radar_pipeline.core.store.postgres import PostgresStoreBackend

            self._postgres = PostgresStoreBackend(url)

    @classmethod
    def of(cls, paths: RadarPaths) -> Store:
        """The store the settings name: PostgreSQL at RADAR_STORE_URL, else the DuckDB file."""
        return cls(paths.db, url=paths.store_url)

    def source_locks(self) -> SourceLocks | None:
        """Per-Source locks that hold across hosts (the PostgreSQL store's advisory locks);
        None for the DuckDB file, whose one host the file locks already cover."""
        if self._postgres is None:
            return None
        from radar_pipeline.core.store.postgres import SourceLocks

        return SourceLocks(self.url)

    @property
    def excludes_other_writers(self) -> bool:
        """Whether no other process can commit while one of our transactions is open: true of
        the DuckDB file (one process holds it at a time), not of PostgreSQL. What a transaction
        read then stays true until it ends, whatever another process wants to write."""
        return self._postgres is None

    @property
    def where(self) -> str:
        """The store's place, for messages (a URL without its password)."""
        if self._postgres is None:
            return str(self.path)
        from radar_pipeline.core.store.postgres import redacted

        return redacted(self.url)

    def _connect(self) -> duckdb.DuckDBPyConnection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        deadline = started + self.settings.lock_timeout_s
        delay = 0.01
        waited = False
        while True:
            try:
                con = duckdb.connect(str(self.path), config=CONNECTION_CONFIG)
                con.execute("SET TimeZone = 'UTC'")
                if waited:
                    # Structured: `radar_lock_wait_s` is what a reader of the log sums up.
                    wait_s = time.monotonic() - started
                    log.info(
                        "waited %.3f s for the DuckDB writer lock on %s",
                        wait_s,
                        self.path,
                        extra={"radar_lock_wait_s": wait_s},
                    )
                return con
            except duckdb.IOException as exc:
                if not is_duckdb_file(self.path):
                    raise StoreUnreadable(
                        f"{self.path} is not a DuckDB file; `radar index rebuild` moves it "
                        "aside and rebuilds the Signal index from the vault",
                        path=self.path,
                    ) from exc
                fault = duckdb_error_of(exc, self.path, f"cannot open {self.path}")
                locked = isinstance(fault, StoreLocked)
                # Another process may be creating the file this instant: its header is there,
                # the rest not yet. That is a wait like a lock, not a broken file.
                if not locked and not _being_created(self.path):
                    raise fault from exc
                if time.monotonic() >= deadline:
                    if not locked:
                        raise fault from exc
                    raise duckdb_error_of(
                        exc,
                        self.path,
                        f"{self.path} stayed locked for {self.settings.lock_timeout_s:.0f} s",
                    ) from exc
                waited = True
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.5)
            except duckdb.Error as exc:
                raise duckdb_error_of(
                    exc,
                    self.path,
                    f"{self.path} is not a usable DuckDB file; `radar index rebuild` moves it "
                    "aside and rebuilds the Signal index from the vault",
                ) from exc

    def atomically(self, work: Callable[[Connection], T]) -> T:
        """`work` in one transaction of this store: committed when it returns, rolled back
        when it raises; its answer. For the steps outside core/store/ that must see and
        change the store in one piece together with what they check on disk (the dedupe,
        the commit, the audits): they hand the store their work and never hold a
        connection of their own. Steps that are store reads and writes only are store
        functions that take the Store (e.g. `fetch_attempts.record_fetches`)."""
        with self.transaction() as con:
            return work(con)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """One short read-write transaction; committed on success, rolled back on error.
        Opened only inside core/store/ (radar_pipeline_tests/test_layout.py holds it)."""
        if self._postgres is not None:
            with self._postgres.transaction() as pg:
                yield pg
            return
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
                raise duckdb_error_of(exc, self.path, f"transaction on {self.path} failed") from exc
            finally:
                _close(con, self.path)

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
            for migration in MIGRATIONS:
                if migration.version <= current:
                    continue
                con.execute("BEGIN TRANSACTION")
                con.execute(migration.sql("duckdb"))
                con.execute(
                    "INSERT INTO schema_migrations (version) VALUES ($1)", [migration.version]
                )
                con.execute("COMMIT")
            Store._migrated.add(key)

    @classmethod
    def forget_migrations(cls) -> None:
        """For tests that delete or replace the file (or schema) within one process."""
        cls._migrated.clear()
        import sys

        postgres = sys.modules.get("radar_pipeline.core.store.postgres")
        if postgres is not None:  # loaded only once a PostgreSQL store was opened
            postgres.PostgresStoreBackend.forget_migrations()

    # ---- reads -----------------------------------------------------------------------------

    def schema_version(self) -> int:
        with self.transaction() as con:
            row = con.execute("SELECT max(version) FROM schema_migrations").fetchone()
            return int(row[0]) if row and row[0] is not None else 0


def duckdb_error_of(exc: duckdb.Error, path: Path, doing: str) -> StoreError:
    """DuckDB's error `exc` on the store at `path` as the project's class, its message
    `doing` and what DuckDB said: StoreLocked naming the holder's PID and process where DuckDB
    names them, StoreUnreadable, StoreDiskFault with the errno and the file; else StoreError.
    The caller raises it `from exc`. The one place DuckDB's message text is read."""
    text = str(exc)
    quoted = _QUOTED_FILE.search(text)
    file = Path(quoted.group(1)) if quoted else path
    message = f"{doing}: {' '.join(text.split())}"
    for code in sorted(DISK_FAULTS):
        # DuckDB words an OS error of its own writes as `Could not write file "<f>": <strerror>`.
        if os.strerror(code) in text:
            return StoreDiskFault(code, message, path=file)
    if any(m in text for m in _LOCK_MARKERS):
        holder = _LOCK_HOLDER.search(text)
        if holder is None:
            return StoreLocked(f"{doing}: held by another process", path=file)
        return StoreLocked(
            f"{doing}: held by PID {holder['pid']} ({holder['exe']})",
            path=file,
            holder_pid=int(holder["pid"]),
            holder_process=holder["exe"],
        )
    if any(m in text for m in _UNREADABLE_MARKERS):
        return StoreUnreadable(message, path=file)
    return StoreError(message, path=path)


def _close(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Close `con`; its last checkpoint may write, and fail like any write of the store."""
    try:
        con.close()
    except duckdb.Error as exc:
        raise duckdb_error_of(exc, path, f"closing {path} failed") from exc


def _being_created(path: Path) -> bool:
    try:
        return time.time() - path.stat().st_mtime < CREATION_GRACE_S
    except OSError:
        return False


def insert_rows(
    con: Connection,
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
    select, params = unnested(column_types, rows, con)
    target = f"{table} ({', '.join(columns)})" if columns is not None else table
    con.execute(f"INSERT INTO {target} SELECT * FROM ({select}) AS n {where}", params)


def unnested(
    column_types: Sequence[str], rows: Sequence[Sequence[Any]], con: Connection | None = None
) -> tuple[str, list[list[Any]]]:
    """`SELECT unnest($1::T[]) AS c0, ...` and its parameters: `rows` as one relation, each
    column bound as one typed list (for `insert_rows`, or an UPDATE ... FROM it). Its marks
    are $1 to $N (N columns): a statement around it numbers its own marks from N + 1."""
    if engine(con) == "postgresql" and any(k.endswith("[]") for k in column_types):
        from radar_pipeline.core.store.postgres import unnested_with_lists

        return unnested_with_lists(column_types, rows)
    columns = ", ".join(
        f"unnest(${i + 1}::{kind}[]) AS c{i}" for i, kind in enumerate(column_types)
    )
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


def rows_as_dicts(con: Connection, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    cur = con.execute(sql, list(params))
    names = [d[0] for d in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
