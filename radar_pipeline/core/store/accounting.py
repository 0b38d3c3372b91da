"""Per-check accounting rows, recorded duplicates and the items each Source's feed held.

`check_accounting` holds one row per Source check with every outcome count (invariant 14);
`duplicate_items` keeps the duplicate decisions so a rule change cannot undo them;
`source_items` holds each item identity once, with its observation date (a Source's rhythm).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from radar_pipeline.core.store.connection import Connection, Store, insert_rows

ACCOUNTING_COLUMN_TYPES = (
    "VARCHAR",  # collection_id
    "VARCHAR",  # source_id
    "TIMESTAMPTZ",  # as_of
    "VARCHAR",  # outcome
    *("INTEGER",) * 9,  # items_parsed, created .. outside_window, late
    "BOOLEAN",  # possible_gap
    "TIMESTAMPTZ",  # coverage_from
    "TIMESTAMPTZ",  # window_from
    "TIMESTAMPTZ",  # newest_observed_at
    "VARCHAR[]",  # item_ids
    "INTEGER",  # filtered (migration 12)
    "INTEGER",  # undated (migration 13)
)
DUPLICATE_COLUMN_TYPES = ("VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR", "TIMESTAMPTZ")
SOURCE_ITEM_COLUMN_TYPES = ("VARCHAR", "VARCHAR", "TIMESTAMPTZ", "TIMESTAMPTZ")


@dataclass(frozen=True)
class PreviousCheck:
    """The last check of a Source that parsed a feed: how many items and which (item ids)."""

    collection_id: str
    items_parsed: int
    item_ids: frozenset[str]


def previous_checks(
    con: Connection, source_ids: Sequence[str], collection_id: str
) -> dict[str, PreviousCheck]:
    """Each Source's latest recorded check that parsed items, before `collection_id` (one
    look-up of one row per Source: the item ids are stored with it)."""
    if not source_ids:
        return {}
    rows = con.execute(
        "SELECT DISTINCT ON (source_id) source_id, collection_id, items_parsed, item_ids "
        "FROM check_accounting WHERE items_parsed > 0 AND collection_id <> $1 "
        "AND source_id IN (SELECT unnest($2::VARCHAR[])) ORDER BY source_id, as_of DESC",
        [collection_id, list(source_ids)],
    ).fetchall()
    return {
        str(r[0]): PreviousCheck(str(r[1]), int(r[2]), frozenset(str(i) for i in r[3] or ()))
        for r in rows
    }


def undated_counts(con: Connection, collection_ids: Sequence[str]) -> dict[str, int]:
    """Source id -> the undated eligible items of its check in these collections."""
    rows = con.execute(
        "SELECT source_id, sum(undated) FROM check_accounting "
        "WHERE collection_id IN (SELECT unnest($1::VARCHAR[])) GROUP BY source_id",
        [list(collection_ids)],
    ).fetchall()
    return {str(r[0]): int(r[1] or 0) for r in rows}


def read_undated_counts(store: Store, collection_ids: Sequence[str]) -> dict[str, int]:
    """`undated_counts`, in a transaction of its own (the Dagster metadata of a run)."""
    with store.transaction() as con:
        return undated_counts(con, collection_ids)


def record_accounts(con: Connection, rows: Sequence[Sequence[Any]]) -> None:
    """One `check_accounting` row per Source check (columns as ACCOUNTING_COLUMN_TYPES)."""
    insert_rows(con, "check_accounting", ACCOUNTING_COLUMN_TYPES, rows)


def record_duplicates(con: Connection, rows: Sequence[Sequence[Any]]) -> None:
    """(identity, signal id, source id, canonical URL, recorded at): the first decision stays."""
    unique = list({str(r[0]): r for r in reversed(rows)}.values())
    insert_rows(
        con,
        "duplicate_items",
        DUPLICATE_COLUMN_TYPES,
        unique,
        where="WHERE n.c0 NOT IN (SELECT identity FROM duplicate_items)",
    )


def record_source_items(
    con: Connection, rows: Sequence[tuple[str, str, datetime | None, datetime]]
) -> None:
    """(identity, source id, observed at, first seen): each identity once, its first date."""
    unique = list({r[0]: r for r in reversed(rows)}.values())
    insert_rows(
        con,
        "source_items",
        SOURCE_ITEM_COLUMN_TYPES,
        unique,
        where="WHERE n.c0 NOT IN (SELECT identity FROM source_items)",
    )
