"""Healing the DuckDB file: a store DuckDB cannot open or read to its end (cut short by a full
disk or a copy, overwritten with garbage, a header that fails its checksum, a newer storage
format) is moved aside, never deleted, and `radar index rebuild` derives a new one from the
vault. What the vault cannot give back is listed in `NOT_RESTORED` (and docs/operations.md).

A file another process holds is in use, not broken: it is never moved.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from radar_pipeline.core.errors import StoreLocked, explain
from radar_pipeline.core.store.connection import Store, duckdb_error_of, is_duckdb_file

# What a store built again from the vault lacks. The vault gives back the Signal index (and
# each Source's health keys stay in its own file); the rest lived only in the old store.
NOT_RESTORED = (
    "run history: collections, fetch attempts, item observations and their accounting",
    "feed state: each Source's validators and watermark (its next fetch is unconditional)",
    "dead letters, open and decided",
    "weekly close records, audit results, robots.txt and page caches (made again when needed)",
)


@dataclass(frozen=True)
class MovedAside:
    """An unreadable store file, renamed out of the way."""

    path: Path  # where the old file is now: `<name>.unusable-<UTC stamp>`
    reason: str  # what DuckDB said when opening or reading it


def unreadable_reason(path: Path) -> str | None:
    """Why DuckDB cannot open the file at `path` or read every table of it to the end; None
    when it can, when the file is absent, or when another process holds it.

    Every row of every table is read (a hash of each whole row), so a file cut short past its
    header is found here and not halfway through the next collection."""
    if not path.exists():
        return None
    if not is_duckdb_file(path):
        return "not a DuckDB file"
    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        if isinstance(duckdb_error_of(exc, path, "opening"), StoreLocked):
            return None
        return explain(exc).root_cause
    try:
        tables = con.execute("SELECT schema_name, table_name FROM duckdb_tables()").fetchall()
        for schema, table in tables:
            con.execute(f'SELECT count(*), sum(hash(r)) FROM "{schema}"."{table}" AS r').fetchall()
    except duckdb.Error as exc:
        return explain(exc).root_cause
    finally:
        con.close()
    return None


def move_aside_if_unreadable(path: Path, now: datetime) -> MovedAside | None:
    """Rename the file at `path` (and its WAL) to `<name>.unusable-<UTC stamp>` when DuckDB
    cannot open or read it (`unreadable_reason`); None when it is absent, readable or held."""
    reason = unreadable_reason(path)
    if reason is None:
        return None
    target = path.with_name(f"{path.name}.unusable-{now.strftime('%Y%m%dT%H%M%SZ')}")
    os.replace(path, target)
    wal = path.with_name(path.name + ".wal")
    if wal.exists():  # a WAL belongs to the old file; replayed onto a new one it would fail
        os.replace(wal, target.with_name(target.name + ".wal"))
    Store.forget_migrations()
    return MovedAside(target, reason)
