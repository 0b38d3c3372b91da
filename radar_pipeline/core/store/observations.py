"""What each check saw, item by item (`item_observations`), and where each extracted field
came from (`field_evidence`): written by the commit, read by the accounting audit."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from radar_pipeline.core.contract.outcomes import ItemOutcome
from radar_pipeline.core.store.connection import Connection, insert_rows

# item_observations columns in order (migration 1).
OBSERVATION_COLUMN_TYPES = (
    "VARCHAR",  # collection_id
    "VARCHAR",  # source_id
    "TIMESTAMPTZ",  # observed_in_run_at
    "VARCHAR",  # identity
    "VARCHAR",  # source_item_id
    "VARCHAR",  # canonical_url
    "TIMESTAMPTZ",  # observed_at
    "VARCHAR",  # content_hash
    "VARCHAR",  # outcome
    "VARCHAR",  # signal_id
    "VARCHAR",  # reason
)
# field_evidence columns in order (migrations 9 and 12).
EVIDENCE_COLUMN_TYPES = (
    "VARCHAR",  # collection_id
    "VARCHAR",  # source_id
    "VARCHAR",  # identity
    "VARCHAR",  # field
    "VARCHAR",  # method
    "VARCHAR",  # expression
    "VARCHAR",  # origin
    "TIMESTAMPTZ",  # recorded_at
    "VARCHAR",  # raw_text: the text behind a value (a feed date not read as it stands)
)


def record_observations(con: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert observation rows (OBSERVATION_COLUMN_TYPES order) in one statement."""
    insert_rows(con, "item_observations", OBSERVATION_COLUMN_TYPES, rows)


def record_evidence(con: Connection, rows: Sequence[tuple[Any, ...]]) -> None:
    """Insert field-evidence rows (EVIDENCE_COLUMN_TYPES order) in one statement."""
    insert_rows(con, "field_evidence", EVIDENCE_COLUMN_TYPES, rows)


def rejection_row(
    collection_id: str, source_id: str, as_of: datetime, source_item_id: str | None, reason: str
) -> tuple[Any, ...]:
    """The observation row (OBSERVATION_COLUMN_TYPES order) that `record_rejection` inserts,
    for `record_observations` to insert with the others."""
    # A rejected item has no identity, canonical URL, date, content hash or Signal.
    return (
        collection_id,
        source_id,
        as_of,
        None,
        source_item_id,
        None,
        None,
        None,
        ItemOutcome.REJECTED.observation,
        None,
        reason,
    )


def record_rejection(
    con: Connection,
    collection_id: str,
    source_id: str,
    as_of: datetime,
    source_item_id: str | None,
    reason: str,
) -> None:
    """The observation of an item the parser rejected (no identity, no Signal)."""
    con.execute(
        "INSERT INTO item_observations "
        "VALUES ($1, $2, $3, NULL, $4, NULL, NULL, NULL, $5, NULL, $6)",
        [collection_id, source_id, as_of, source_item_id, ItemOutcome.REJECTED.observation, reason],
    )
