"""The DuckDB Signal index as a derived copy of the vault (the vault is the truth for Signals)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from radar_pipeline.core.errors import StoreError, VaultError
from radar_pipeline.core.identity import normalize_title
from radar_pipeline.core.schedule import parse_utc
from radar_pipeline.core.signals import (
    SIGNALS_DIR,
    identity_of,
    list_signal_ids,
    read_signal_frontmatter,
)
from radar_pipeline.core.store import Store

log = logging.getLogger(__name__)

INSERT_SIGNAL_SQL = (
    "INSERT INTO signals (signal_id, identity, identity_version, source_id, source_item_id, "
    "canonical_url, title_key, observed_day, content_hash, simhash, first_seen_at, "
    "duplicate_candidate_of, file_path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT DO NOTHING"
)


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
    if rows:
        con.executemany(INSERT_SIGNAL_SQL, rows)
    return IndexRepair(len(rows), tuple(unreadable))


def rebuild(store: Store, vault: Path) -> IndexRepair:
    """Drop the Signal index and derive it again from the vault files."""
    with store.transaction() as con:
        con.execute("DELETE FROM signals")
        return reconcile(con, vault)


def set_aside_if_unusable(store: Store, stamp: str) -> Path | None:
    """Move a DuckDB file that cannot be opened as a database to `<name>.unusable-<stamp>`
    (kept, never deleted) so a rebuild can start a fresh one; returns where it went.

    A file that is merely locked by another process is not touched: that StoreError is raised.
    """
    if not store.path.exists():
        return None
    try:
        with store.transaction() as con:
            con.execute("SELECT count(*) FROM signals").fetchone()
        return None
    except StoreError as exc:
        cause = exc.__cause__
        if cause is None or any(
            m in str(cause) for m in ("Could not set lock", "Conflicting lock")
        ):
            raise
        target = store.path.with_name(f"{store.path.name}.unusable-{stamp}")
        store.path.rename(target)
        wal = store.path.with_name(store.path.name + ".wal")
        if wal.exists():
            wal.rename(target.with_name(target.name + ".wal"))
        Store.forget_migrations()
        log.warning("index: %s is not a usable DuckDB file; moved to %s", store.path, target)
        return target
