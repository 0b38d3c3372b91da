"""Page state per Signal and robots.txt per origin, as kept in DuckDB (migration 10).

A page is `pending` from its Signal's commit until a check of its Source settles it: `fetched`
(its text is in Temporary Content), `disallowed` (robots.txt), `failed` (with the reason),
`expired` (its Signal left the recovery cap unfetched) or `stopped` (its answer was a 403, a
429 or a challenge: taken again, like a pending page, once the Source's backoff has passed).
No page text is ever stored here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from radar_pipeline.core.store.connection import Connection, Store, insert_rows, rows_as_dicts

# The states a later check takes again (oldest first, within the budget).
OPEN_STATES = ("pending", "stopped")


@dataclass(frozen=True)
class PageRow:
    """One Signal's page as the page pass needs it."""

    signal_id: str
    source_id: str
    page_url: str
    title: str
    signal_created_at: datetime
    observed_at: datetime | None = None  # the feed's own date: orders one check's Signals
    attempts: int = 0


@dataclass(frozen=True)
class PageResult:
    """What one page pass decided for one page (`attempted`: a request was made)."""

    signal_id: str
    status: str  # pending | fetched | disallowed | stopped | failed | expired
    reason: str | None = None
    attempted: bool = False
    final_url: str | None = None
    http_status: int | None = None
    bytes: int | None = None
    text_bytes: int | None = None
    extractor: str | None = None


@dataclass(frozen=True)
class RobotsEntry:
    """A cached robots.txt answer for one origin (`verdict`: `rules` or `allow-all`)."""

    origin: str
    fetched_at: datetime
    expires_at: datetime
    http_status: int | None
    verdict: str
    body: str


def enqueue_pages(con: Connection, rows: Sequence[PageRow]) -> None:
    """New Signals' pages, pending; a Signal already queued keeps its row."""
    insert_rows(
        con,
        "page_state",
        [*("VARCHAR",) * 4, "TIMESTAMPTZ", "TIMESTAMPTZ", "VARCHAR", "INTEGER"],
        [
            (
                r.signal_id,
                r.source_id,
                r.page_url,
                r.title,
                r.signal_created_at,
                r.observed_at,
                "pending",
                0,
            )
            for r in rows
        ],
        where="WHERE c0 NOT IN (SELECT signal_id FROM page_state)",
        columns=(
            "signal_id",
            "source_id",
            "page_url",
            "title",
            "signal_created_at",
            "observed_at",
            "status",
            "attempts",
        ),
    )


def expire_pages(con: Connection, source_id: str, floor: datetime, collection_id: str) -> int:
    """Open pages of Signals first seen before `floor` (the recovery cap) are never fetched."""
    row = con.execute(
        "UPDATE page_state SET status = 'expired', collection_id = $1, "
        "reason = 'its Signal left the recovery cap before the page was fetched' "
        "WHERE source_id = $2 AND status IN ('pending', 'stopped') AND signal_created_at < $3 "
        "RETURNING signal_id",
        [collection_id, source_id, floor],
    ).fetchall()
    return len(row)


def open_pages(con: Connection, source_id: str) -> list[PageRow]:
    """The Source's open pages, oldest Signal first (the order a check takes them in); the
    Signals of one check by the feed's own date, oldest first."""
    rows = rows_as_dicts(
        con,
        "SELECT signal_id, source_id, page_url, title, signal_created_at, observed_at, "
        "attempts FROM page_state WHERE source_id = $1 AND status IN ('pending', 'stopped') "
        "ORDER BY signal_created_at, observed_at NULLS LAST, signal_id",
        [source_id],
    )
    return [PageRow(**r) for r in rows]


def record_page_results(
    con: Connection,
    results: Sequence[PageResult],
    now: datetime,
    collection_id: str,
) -> None:
    """Each page's new state; a request made counts as an attempt."""
    for r in results:
        con.execute(
            "UPDATE page_state SET status = $1, reason = $2, collection_id = $3, "
            "attempts = attempts + $4, last_attempt_at = CASE WHEN $5 THEN $6 ELSE last_attempt_at "
            "END, final_url = coalesce($7, final_url), http_status = coalesce($8, http_status), "
            "bytes = coalesce($9, bytes), text_bytes = coalesce($10, text_bytes), "
            "extractor = coalesce($11, extractor) WHERE signal_id = $12",
            [
                r.status,
                r.reason,
                collection_id,
                1 if r.attempted else 0,
                r.attempted,
                now,
                r.final_url,
                r.http_status,
                r.bytes,
                r.text_bytes,
                r.extractor,
                r.signal_id,
            ],
        )


def count_open(con: Connection, source_id: str) -> int:
    row = con.execute(
        "SELECT count(*) FROM page_state WHERE source_id = $1 AND status IN ('pending', 'stopped')",
        [source_id],
    ).fetchone()
    return int(row[0]) if row else 0


def load_robots(con: Connection, origin: str, now: datetime) -> RobotsEntry | None:
    """The cached robots.txt of `origin`, unless it has expired."""
    rows = rows_as_dicts(
        con,
        "SELECT origin, fetched_at, expires_at, http_status, verdict, body FROM robots_cache "
        "WHERE origin = $1 AND expires_at > $2",
        [origin, now],
    )
    return RobotsEntry(**rows[0]) if rows else None


def save_robots(con: Connection, entry: RobotsEntry) -> None:
    con.execute("DELETE FROM robots_cache WHERE origin = $1", [entry.origin])
    con.execute(
        "INSERT INTO robots_cache VALUES ($1, $2, $3, $4, $5, $6)",
        [
            entry.origin,
            entry.fetched_at,
            entry.expires_at,
            entry.http_status,
            entry.verdict,
            entry.body,
        ],
    )


def open_queues(
    store: Store, source_ids: Sequence[str], floor: datetime, collection_id: str
) -> tuple[dict[str, int], dict[str, list[PageRow]]]:
    """For each Source, in one transaction: how many of its open pages `expire_pages` closed,
    and the pages left open (`open_pages`)."""
    with store.transaction() as con:
        expired = {sid: expire_pages(con, sid, floor, collection_id) for sid in source_ids}
        return expired, {sid: open_pages(con, sid) for sid in source_ids}


def read_robots(store: Store, origin: str, now: datetime) -> RobotsEntry | None:
    """`load_robots`, in a transaction of its own."""
    with store.transaction() as con:
        return load_robots(con, origin, now)


def save_robots_entries(store: Store, entries: Sequence[RobotsEntry]) -> None:
    """`save_robots` for each entry, in one transaction."""
    with store.transaction() as con:
        for entry in entries:
            save_robots(con, entry)
