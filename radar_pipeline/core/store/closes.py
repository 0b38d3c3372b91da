"""The record of every weekly close in DuckDB `cleanup_runs`: the evidence that it happened."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.models import CleanupResult
from radar_pipeline.core.store.connection import Store


@dataclass(frozen=True)
class CloseRecord:
    """One weekly close: when (the run's clock), which week, what it deleted, what was left."""

    cleanup_id: str
    closed_at: datetime
    week: str | None
    deleted: int
    bytes: int
    retained: int

    def to_json(self) -> dict[str, object]:
        return {
            "cleanupId": self.cleanup_id,
            "closedAt": format_utc(self.closed_at),
            "week": self.week,
            "deleted": self.deleted,
            "bytes": self.bytes,
            "retained": self.retained,
        }


def record_close(
    store: Store, result: CleanupResult, closed_at: datetime, week: str | None
) -> CloseRecord:
    """Insert one `cleanup_runs` row for a finished close and return it."""
    record = CloseRecord(
        uuid.uuid4().hex, closed_at, week, result.deleted, result.bytes, result.retained
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
    return CloseRecord(str(row[0]), row[1], row[2], int(row[3]), int(row[4]), int(row[5]))
