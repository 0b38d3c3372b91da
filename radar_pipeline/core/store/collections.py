"""The `collections` table: one row per collection with its report, and the attempt figures
only the commit knows."""

from __future__ import annotations

import json
from datetime import datetime

from radar_pipeline.core.contract.collection import CollectionReport, SourceReport
from radar_pipeline.core.contract.outcomes import ItemOutcome
from radar_pipeline.core.store.connection import Connection, Store, unnested


def record_metrics(con: Connection, collection_id: str, sources: tuple[SourceReport, ...]) -> None:
    """Complete this collection's attempt rows with what only the commit knows (one statement)."""
    rows = [
        (
            src.id,
            src.outcome,
            src.items_parsed,
            src.items_new,
            src.duplicates,
            src.rejected,
            src.consecutive_failures,
            src.backoff_until,
        )
        for src in sources
        if src.outcome != "skipped"
    ]
    if not rows:
        return
    select, params = unnested(("VARCHAR", "VARCHAR", *("INTEGER",) * 5, "TIMESTAMPTZ"), rows)
    con.execute(
        "UPDATE fetch_attempts SET check_outcome = n.c1, items_parsed = n.c2, items_new = n.c3, "
        "items_duplicate = n.c4, items_rejected = n.c5, consecutive_failures = n.c6, "
        f"backoff_until = n.c7 FROM ({select}) AS n "
        f"WHERE fetch_attempts.collection_id = ${len(params) + 1} "
        "AND fetch_attempts.source_id = n.c0",
        [*params, collection_id],
    )


def record_collection(
    con: Connection,
    dagster_run_id: str | None,
    trigger: str,
    as_of: datetime,
    report: CollectionReport,
) -> None:
    """The collection's row; `report_json` holds the `radar collect --json` object (with its
    id), as `report_text` writes it."""
    con.execute(
        "INSERT INTO collections VALUES ($1, $2, $3, $4, $5, now(), $6, $7, $8, $9, $10, $11, "
        "$12, $13, $14, $15, $16, $17)",
        [
            report.collection_id,
            dagster_run_id,
            trigger,
            as_of,
            as_of,
            report.downtime_from,
            report.overdue,
            report.due,
            *_totals(report),
            report_text(report),
        ],
    )


def merge_collection(
    con: Connection,
    dagster_run_id: str | None,
    trigger: str,
    as_of: datetime,
    report: CollectionReport,
) -> None:
    """Record one slice of a collection (core/collect/slices.py): the collection's row is
    created by its first slice's commit; each later slice adds its counts to that row and its
    report as a row of `collection_slices`, so the store always holds what is committed, and a
    slice's commit costs the same however many slices came before it (reading and writing the
    whole report again at each slice grew with the square of the slices). `report_for` reads
    the parts as one report; `replace_report` writes it whole again."""
    collection_id = report.collection_id
    row = con.execute(
        "SELECT (SELECT count(*) FROM collections WHERE collection_id = $1), "
        "(SELECT count(*) FROM collection_slices WHERE collection_id = $1)",
        [collection_id],
    ).fetchone()
    recorded, parts = row if row else (0, 0)
    if not recorded:
        record_collection(con, dagster_run_id, trigger, as_of, report)
        return
    con.execute(
        "INSERT INTO collection_slices VALUES ($1, $2, $3)",
        [collection_id, parts + 1, report_text(report)],
    )
    added = ", ".join(f"{name} = {name} + ${i}" for i, name in enumerate(_TOTALS, start=3))
    con.execute(
        f"UPDATE collections SET finished_at = now(), due = due + $2, {added} "
        "WHERE collection_id = $1",
        [collection_id, report.due, *_totals(report)],
    )


# The eight totals a collection's row carries as columns, in the table's order: the Sources by
# outcome and the items the columns count (the same names as the report's `totals`).
_COUNTED_ITEMS = (
    ItemOutcome.CREATED,
    ItemOutcome.REUSED,
    ItemOutcome.UPDATED,
    ItemOutcome.DUPLICATES,
    ItemOutcome.REJECTED,
)
_TOTALS = ("passed", "failed", "skipped", *(outcome.field for outcome in _COUNTED_ITEMS))


def _totals(report: CollectionReport) -> list[int]:
    return [getattr(report.totals, name) for name in _TOTALS]


# The trigger of a run that only re-states failed Sources on their partitions (it checks
# nothing; defs/collection/restate.py): its row is part of no command's report.
RESTATE_TRIGGER = "restate"


def last_launch_reports(store: Store) -> list[CollectionReport]:
    """The reports of the command that collected last: the runs sharing the `launchId` of the
    collection that finished last (one, unless its launcher split it), in the order they ran;
    a run that only re-stated failures is none of them."""
    last = _stored_report(
        store, "WHERE trigger <> $1 ORDER BY finished_at DESC LIMIT 1", [RESTATE_TRIGGER]
    )
    if last is None or last.launch_id is None:
        return [last] if last is not None else []
    with store.transaction() as con:
        rows = con.execute(
            "SELECT collection_id, report_json FROM collections "
            "WHERE report_json::JSON ->> 'launchId' = $1 AND trigger <> $2 ORDER BY finished_at",
            [last.launch_id, RESTATE_TRIGGER],
        ).fetchall()
        return [_assembled(con, row[0], row[1]) for row in rows]


def report_for(store: Store, collection_id: str) -> CollectionReport | None:
    """The report recorded for one collection (its id is the Dagster run id)."""
    return _stored_report(store, "WHERE collection_id = $1", [collection_id])


def _stored_report(store: Store, clause: str, params: list[object]) -> CollectionReport | None:
    with store.transaction() as con:
        row = con.execute(
            f"SELECT collection_id, report_json FROM collections {clause}", params
        ).fetchone()
        return _assembled(con, row[0], row[1]) if row and row[1] else None


def _assembled(con: Connection, collection_id: str, first: str) -> CollectionReport:
    """A collection's report: its row's (its first slice's), merged with those its later
    slices added, in the order they committed (merge_collection)."""
    parts = con.execute(
        "SELECT report_json FROM collection_slices WHERE collection_id = $1 ORDER BY part",
        [collection_id],
    ).fetchall()
    report = CollectionReport.model_validate_json(first)
    if not parts:
        return report
    reports = [report, *(CollectionReport.model_validate_json(part[0]) for part in parts)]
    # One collection, not a launch of several: the merge's list of collections stays absent.
    return CollectionReport.merge(reports).model_copy(update={"collection_ids": None})


def last_as_of(con: Connection) -> datetime | None:
    """The clock of the latest recorded collection, if any."""
    row = con.execute("SELECT max(as_of) FROM collections").fetchone()
    return row[0] if row else None


def replace_report(con: Connection, collection_id: str, report: CollectionReport) -> None:
    """Store the collection's whole report again, in its row (the page stage adds its figures
    after the commit; the last step writes the slices' parts as one): the parts go."""
    con.execute(
        "UPDATE collections SET report_json = $1 WHERE collection_id = $2",
        [report_text(report), collection_id],
    )
    con.execute("DELETE FROM collection_slices WHERE collection_id = $1", [collection_id])


def report_text(report: CollectionReport) -> str:
    """The stored form of a report: its JSON object with sorted keys, the order every recorded
    report is printed in (core/contract/collection.py)."""
    return json.dumps(report.json_object(), sort_keys=True)
