"""The DuckDB Signal index as a derived copy of the vault (the vault is the truth for Signals)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from radar_pipeline.core.errors import VaultError
from radar_pipeline.core.identity import normalize_title
from radar_pipeline.core.schedule import parse_utc
from radar_pipeline.core.signals import (
    SIGNALS_DIR,
    identity_of,
    list_signal_ids,
    read_signal_frontmatter,
)
from radar_pipeline.core.store import Store, insert_rows

log = logging.getLogger(__name__)

INSERT_SIGNAL_SQL = (
    "INSERT INTO signals (signal_id, identity, identity_version, source_id, source_item_id, "
    "canonical_url, title_key, observed_day, content_hash, simhash, first_seen_at, "
    "duplicate_candidate_of, file_path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING"
)


# The signals table's columns in order, with their types (store.py, migration 1).
SIGNAL_COLUMN_TYPES = (
    "VARCHAR",  # signal_id
    "VARCHAR",  # identity
    "INTEGER",  # identity_version
    "VARCHAR",  # source_id
    "VARCHAR",  # source_item_id
    "VARCHAR",  # canonical_url
    "VARCHAR",  # title_key
    "DATE",  # observed_day
    "VARCHAR",  # content_hash
    "UBIGINT",  # simhash
    "TIMESTAMPTZ",  # first_seen_at
    "VARCHAR",  # duplicate_candidate_of
    "VARCHAR",  # file_path
)
# Skip rows whose unique keys are already indexed: ON CONFLICT DO NOTHING, without its cost.
_NOT_INDEXED = (
    "WHERE NOT EXISTS (SELECT 1 FROM signals s WHERE s.signal_id = n.c0) "
    "AND NOT EXISTS (SELECT 1 FROM signals s WHERE s.identity = n.c1) "
    "AND NOT EXISTS (SELECT 1 FROM signals s WHERE s.source_id = n.c3 AND s.canonical_url = n.c5)"
)


def insert_signal_rows(con: duckdb.DuckDBPyConnection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert index rows as INSERT_SIGNAL_SQL would (ON CONFLICT DO NOTHING), in one statement.

    A row is skipped when its signal id, identity or (Source, canonical URL) is already indexed
    or taken by an earlier row of `rows`. Why not ON CONFLICT: in DuckDB 2.0 it costs ~20 ms a
    row, growing with the table (400 rows: 1.2-2 s against 100,000 Signals); this: ~0.2 s.
    """
    seen: set[tuple[str, ...]] = set()
    unique = []
    for row in rows:
        keys = {("id", row[0]), ("identity", row[1]), ("url", row[3], row[5])}
        if keys & seen:
            continue
        seen |= keys
        unique.append(row)
    insert_rows(con, "signals", SIGNAL_COLUMN_TYPES, unique, _NOT_INDEXED)


@dataclass(frozen=True)
class IndexRepair:
    indexed: int  # files that had no index row and got one
    unreadable: tuple[str, ...]  # Signal files that could not be parsed (left untouched)


def index_row_from_frontmatter(signal_id: str, fm: dict[str, Any]) -> tuple[Any, ...]:
    """The index row for one Signal file, derived only from what the file says."""
    if fm.get("id") != signal_id:
        raise VaultError(f"Signal {signal_id}.md declares id {fm.get('id')!r}; they must match")
    observed = fm.get("observedAt")
    observed_day = parse_utc(str(observed)).date() if observed else None
    return (
        signal_id,
        identity_of(signal_id),
        int(fm.get("identityVersion") or 1),
        str(fm["sourceId"]),
        str(fm["sourceItemId"]),
        str(fm["canonicalUrl"]),
        normalize_title(str(fm.get("title") or "")),
        observed_day,
        str(fm["contentHash"]),
        int(str(fm.get("simhash") or "0"), 16),
        parse_utc(str(fm["fetchedAt"])),
        fm.get("duplicateCandidateOf") or None,
        (SIGNALS_DIR / f"{signal_id}.md").as_posix(),
    )


def reconcile(con: duckdb.DuckDBPyConnection, vault: Path) -> IndexRepair:
    """Index every Signal file that has no row (a crash between file and record leaves one)."""
    on_disk = list_signal_ids(vault)
    if not on_disk:
        return IndexRepair(0, ())
    indexed = {str(r[0]) for r in con.execute("SELECT signal_id FROM signals").fetchall()}
    missing = sorted(on_disk - indexed)
    rows, unreadable = [], []
    for signal_id in missing:
        try:
            fm = read_signal_frontmatter(vault / SIGNALS_DIR / f"{signal_id}.md")
            rows.append(index_row_from_frontmatter(signal_id, fm))
        except (VaultError, KeyError, ValueError) as exc:
            log.warning("index: skipping unreadable Signal %s: %s", signal_id, exc)
            unreadable.append(signal_id)
    insert_signal_rows(con, rows)
    return IndexRepair(len(rows), tuple(unreadable))


def rebuild(store: Store, vault: Path) -> IndexRepair:
    """Drop the Signal index and derive it again from the vault files."""
    with store.transaction() as con:
        con.execute("DELETE FROM signals")
        return reconcile(con, vault)
