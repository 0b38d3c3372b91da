"""The `fetch_attempts` table: one row per HTTP exchange, written when the fetch stage ends.

A fetch whose collection never committed (its process was killed, or its run failed before
the commit) is still a request the publisher saw: `with_uncommitted_fetches` makes it count for
`minIntervalSeconds` and a publisher's Retry-After, never for validators or the watermark.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from radar_pipeline.core.errors import PUBLISHER_WAITS
from radar_pipeline.core.models import FetchResult
from radar_pipeline.core.store.collections import last_as_of
from radar_pipeline.core.store.connection import Connection, Store, insert_rows
from radar_pipeline.core.store.dialect import arg_max
from radar_pipeline.core.store.feed_state import FeedState, load_states

ATTEMPT_COLUMNS = (
    "attempt_id",
    "collection_id",
    "source_id",
    "fetched_at",
    "requested_url",
    "final_url",
    "outcome",
    "http_status",
    "conditional",
    "etag",
    "last_modified",
    "validators_changed",
    "body_sha256",
    "bytes",
    "duration_ms",
    "redirects",
    "error_class",
    "error_message",
    "retry_after_s",
)
ATTEMPT_COLUMN_TYPES = (
    *("VARCHAR",) * 3,  # attempt_id, collection_id, source_id
    "TIMESTAMPTZ",  # fetched_at
    *("VARCHAR",) * 3,  # requested_url, final_url, outcome
    "INTEGER",  # http_status
    "BOOLEAN",  # conditional
    *("VARCHAR",) * 2,  # etag, last_modified
    "BOOLEAN",  # validators_changed
    "VARCHAR",  # body_sha256
    "BIGINT",  # bytes
    "DOUBLE PRECISION",  # duration_ms
    "INTEGER",  # redirects
    *("VARCHAR",) * 2,  # error_class, error_message
    "DOUBLE PRECISION",  # retry_after_s
)


def validators_changed(
    r: FetchResult, previous_etag: str | None, previous_last_modified: str | None
) -> bool | None:
    """Whether the publisher's validators differ from the stored ones (None: no answer)."""
    if r.outcome not in ("ok", "not-modified"):
        return None
    return (r.etag, r.last_modified) != (previous_etag, previous_last_modified)


def with_uncommitted_fetches(
    con: Connection, states: Mapping[str, FeedState], source_ids: Collection[str] | None = None
) -> dict[str, FeedState]:
    """Feed state as the publishers saw it. A fetch whose collection never committed (the
    command was killed, or its Dagster run failed before the commit) still happened:
    it counts for `minIntervalSeconds` and a publisher's Retry-After (rate-limited, challenge),
    never for validators or the watermark. Such attempts are the ones the commit never
    completed (`check_outcome` is NULL)."""
    # The latest error class and the latest Retry-After among them (each the latest that
    # is not NULL).
    error_class = arg_max(con, "error_class", "fetched_at")
    retry_after = arg_max(con, "retry_after_s", "fetched_at")
    sql = (
        f"SELECT source_id, max(fetched_at), {error_class}, {retry_after} FROM fetch_attempts "
        "WHERE check_outcome IS NULL"
    )
    if source_ids is None:
        rows = con.execute(sql + " GROUP BY source_id").fetchall()
    else:
        where = " AND source_id IN (SELECT unnest($1::VARCHAR[])) GROUP BY source_id"
        rows = con.execute(sql + where, [list(source_ids)]).fetchall()
    out = dict(states)
    for source_id, fetched_at, error_class, retry_after_s in rows:
        state = out.get(source_id) or FeedState(source_id)
        updated = state
        if state.last_fetch_at is None or fetched_at > state.last_fetch_at:
            updated = replace(updated, last_fetch_at=fetched_at)
        if error_class in PUBLISHER_WAITS and retry_after_s:
            until = fetched_at + timedelta(seconds=retry_after_s)
            if state.backoff_until is None or until > state.backoff_until:
                updated = replace(updated, backoff_until=until, error_state=error_class)
        if updated is not state:
            out[source_id] = updated
    return out


def record_attempts(
    con: Connection,
    collection_id: str,
    results: Sequence[FetchResult],
    states: Mapping[str, FeedState],
) -> None:
    """One `fetch_attempts` row per fetch, in one statement."""
    rows = []
    for r in results:
        state = states.get(r.source_id)
        previous = (state.etag, state.last_modified) if state is not None else (None, None)
        rows.append(
            (
                uuid.uuid4().hex,
                collection_id,
                r.source_id,
                r.fetched_at,
                r.requested_url,
                r.final_url,
                r.outcome,
                r.status,
                r.conditional,
                r.etag,
                r.last_modified,
                validators_changed(r, *previous),
                r.body_sha256,
                r.bytes_received,
                r.duration_s * 1000,
                r.redirects,
                r.error_class,
                r.error_message,
                r.retry_after_s,
            )
        )
    insert_rows(con, "fetch_attempts", ATTEMPT_COLUMN_TYPES, rows, columns=ATTEMPT_COLUMNS)


# What a collection is planned on: the Sources' feed states, and the last collection's clock.
PlanningState = tuple[dict[str, FeedState], datetime | None]


def planning_state(store: Store, source_ids: Collection[str] | None = None) -> PlanningState:
    """What a collection is planned on, read in one transaction: every Source's feed state
    (or those of `source_ids`) as the publishers saw it (`with_uncommitted_fetches`), and the
    clock of the latest recorded collection."""
    with store.transaction() as con:
        return planning_state_in(con, source_ids)


def planning_state_in(con: Connection, source_ids: Collection[str] | None = None) -> PlanningState:
    """`planning_state` inside a transaction the caller holds (with a check of its own)."""
    states = with_uncommitted_fetches(con, load_states(con, source_ids), source_ids)
    return states, last_as_of(con)


def record_fetches(store: Store, collection_id: str, results: Sequence[FetchResult]) -> None:
    """`record_attempts` against the feed states stored now, in a transaction of its own."""
    with store.transaction() as con:
        states = load_states(con, {r.source_id for r in results})
        record_attempts(con, collection_id, results, states)
