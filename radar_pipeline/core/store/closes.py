"""The record of every weekly close in DuckDB `cleanup_runs`: the evidence that it happened."""

from __future__ import annotations

import uuid
from datetime import datetime

from radar_pipeline.core.contract.operations import CloseRecord
from radar_pipeline.core.models import CleanupResult
from radar_pipeline.core.store.connection import Store


def record_close(
    store: Store, result: CleanupResult, closed_at: datetime, week: str | None
) -> CloseRecord:
    """Insert one `cleanup_runs` row for a finished close and return it."""
    record = CloseRecord(
        cleanup_id=uuid.uuid4().hex,
        closed_at=closed_at,
        week=week,
        deleted=result.deleted,
        bytes=result.bytes,
        retained=result.retained,
    )
    with store.transaction() as con:
        con.execute(
            "INSERT INTO cleanup_runs (cleanup_id, closed_at, week, deleted, bytes, retained) "
            "VALUES ($1, $2, $3, $4, $5, $6)",
            [record.cleanup_id, closed_at, week, record.deleted, record.bytes, record.retained],
        )
    return record


def last_close(store: Store) -> CloseRecord | None:
    """The most recent weekly close (by its clock), if any was recorded."""
    with store.transaction() as con:
        row = con.execute(
            "SELECT cleanup_id, closed_at, week, deleted, bytes, retained FROM cleanup_runs "
            "ORDER BY closed_at DESC LIMIT 1"
        ).fetchone()
    if row is None:
        return None
    cleanup_id, closed_at, week, deleted, freed, retained = row
    return CloseRecord(
        cleanup_id=str(cleanup_id),
        closed_at=closed_at,
        week=week,
        deleted=int(deleted),
        bytes=int(freed),
        retained=int(retained),
    )
