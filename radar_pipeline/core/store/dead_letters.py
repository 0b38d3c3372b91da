"""Dead letters: failed checks kept until a person replays or dismisses them.

The collect stage opens one per failed check (stage, class, redacted message, attempt). A
decision never deletes it: `replay` runs a check of that Source now and records `replayed`
with the collection it ran in; `dismiss` records `dismissed`; both keep the time. Only an
`open` dead letter can be decided, and a replay whose check did not run (the Source was
locked, or a publisher's wait applies) leaves it open.

A run that fails as a whole (a crash, a killed process, an op error) records nothing itself;
the run-failure sensor calls `record_run_failure` so each of its Sources still gets one.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.contract.collection import CollectionReport, SourceReport
from radar_pipeline.core.contract.operations import DeadLetter, ReplayOutput
from radar_pipeline.core.errors import RadarError
from radar_pipeline.core.store.connection import Connection, Store, rows_as_dicts

STATUSES = ("open", "replayed", "dismissed")
RUN_FAILURE_STAGE = "dagster-run"
RUN_FAILURE_CLASS = "run-failure"

_SELECT = (
    "SELECT dead_letter_id, collection_id, source_id, stage, error_class, message, attempt, "
    "status, created_at, decided_at, decision, replay_collection_id FROM dead_letters"
)


class DeadLetterError(RadarError):
    """A dead letter that does not exist, is already decided, or could not be replayed."""

    stage = "dlq"


@dataclass(frozen=True)
class Replay:
    """A replayed dead letter, the Source's entry in the replay's collection report, and the
    dead letter the replay itself opened if its check failed again."""

    dead_letter: DeadLetter
    source: SourceReport
    new_dead_letter: DeadLetter | None

    def output(self) -> ReplayOutput:
        """What `radar dlq replay --json` prints of it."""
        return ReplayOutput(
            dead_letter=self.dead_letter, source=self.source, new_dead_letter=self.new_dead_letter
        )


def _from_row(row: Mapping[str, Any]) -> DeadLetter:
    return DeadLetter(
        id=row["dead_letter_id"],
        collection_id=row["collection_id"],
        source_id=row["source_id"],
        stage=row["stage"],
        error_class=row["error_class"],
        message=row["message"],
        attempt=int(row["attempt"]),
        status=row["status"],
        created_at=row["created_at"],
        decided_at=row["decided_at"],
        decision=row["decision"],
        replay_collection_id=row["replay_collection_id"],
    )


def list_dead_letters(store: Store, status: str | None = None) -> list[DeadLetter]:
    """Every dead letter (or those with `status`), oldest first."""
    if status is not None and status not in STATUSES:
        raise DeadLetterError(f"unknown status {status!r}: use one of {', '.join(STATUSES)}")
    where, params = (" WHERE status = $1", [status]) if status else ("", [])
    with store.transaction() as con:
        rows = rows_as_dicts(con, f"{_SELECT}{where} ORDER BY created_at, dead_letter_id", params)
    return [_from_row(r) for r in rows]


def get_dead_letter(store: Store, dead_letter_id: str) -> DeadLetter:
    """The dead letter with this id; DeadLetterError if there is none."""
    with store.transaction() as con:
        rows = rows_as_dicts(con, f"{_SELECT} WHERE dead_letter_id = $1", [dead_letter_id])
    if not rows:
        raise DeadLetterError(f"no dead letter with id {dead_letter_id!r}; see `radar dlq list`")
    return _from_row(rows[0])


def _require_open(letter: DeadLetter) -> None:
    if letter.status != "open":
        when = format_utc(letter.decided_at) if letter.decided_at else "earlier"
        raise DeadLetterError(
            f"dead letter {letter.id} is already {letter.status} ({when}); decisions are kept"
        )


def _decide(
    store: Store,
    letter: DeadLetter,
    status: str,
    decision: str,
    now: datetime,
    replay_collection_id: str | None = None,
) -> DeadLetter:
    with store.transaction() as con:
        # Conditional on `open`: another process may have decided it meanwhile. RETURNING
        # (not DuckDB's count row, which PostgreSQL does not give): a row only if it changed.
        row = con.execute(
            "UPDATE dead_letters SET status = $1, decided_at = $2, decision = $3, "
            "replay_collection_id = $4 WHERE dead_letter_id = $5 AND status = 'open' "
            "RETURNING dead_letter_id",
            [status, now, decision, replay_collection_id, letter.id],
        ).fetchone()
    if not row or not row[0]:
        _require_open(get_dead_letter(store, letter.id))
    return get_dead_letter(store, letter.id)


def dismiss(store: Store, dead_letter_id: str, now: datetime) -> DeadLetter:
    """Record that a person dismissed this dead letter (it stays, with the time)."""
    letter = get_dead_letter(store, dead_letter_id)
    _require_open(letter)
    return _decide(store, letter, "dismissed", "dismissed", now)


def replay(
    store: Store,
    dead_letter_id: str,
    now: datetime,
    run_check: Callable[[str], CollectionReport],
) -> Replay:
    """Run a check of the dead letter's Source now and record the decision.

    `run_check(source_id)` runs one explicit collection of that Source and returns its
    collection report (the CLI passes the Dagster launch). If the Source was not checked
    (skipped: locked, a publisher's wait, minIntervalSeconds) the dead letter stays open and
    DeadLetterError says why; otherwise it becomes `replayed` with the replay's collection id,
    whether the new check passed or failed (a failure opens its own dead letter).
    """
    letter = get_dead_letter(store, dead_letter_id)
    _require_open(letter)
    report = run_check(letter.source_id)
    entry = report.source(letter.source_id)
    if entry is None or entry.outcome == "skipped":
        reason = (entry.error if entry else None) or "the Source was not part of the collection"
        raise DeadLetterError(
            f"dead letter {letter.id} not replayed: {letter.source_id} was not checked "
            f"({reason}); it stays open"
        )
    collection_id = report.collection_id or ""
    outcome = entry.outcome
    decision = f"replayed: {outcome}"
    if entry.error_class:
        decision += f" ({entry.error_class})"
    decided = _decide(store, letter, "replayed", decision, now, collection_id or None)
    new_letter = None
    if outcome == "failed" and collection_id:
        with store.transaction() as con:
            rows = rows_as_dicts(
                con,
                f"{_SELECT} WHERE collection_id = $1 AND source_id = $2",
                [collection_id, letter.source_id],
            )
        new_letter = _from_row(rows[0]) if rows else None
    return Replay(decided, entry, new_letter)


def run_failure_dead_letter_id(run_id: str, source_id: str) -> str:
    """Deterministic, so a sensor tick evaluated twice for the same run adds nothing."""
    return hashlib.sha256(f"{run_id}:{source_id}".encode()).hexdigest()[:12]


def record_run_failure(
    store: Store, run_id: str, source_ids: Sequence[str], message: str, now: datetime
) -> int:
    """One open dead letter per Source of the failed run; returns how many were new."""
    with store.transaction() as con:
        return insert_run_failures(con, run_id, source_ids, message, now)


def insert_run_failures(
    con: Connection,
    run_id: str,
    source_ids: Sequence[str],
    message: str,
    now: datetime,
    error_class: str = RUN_FAILURE_CLASS,
) -> int:
    """`record_run_failure` in the caller's transaction, with the failure's own class (the
    collection records its run-level failure itself; the sensor's later insert of the same
    run and Source is then a no-op: the id is theirs)."""
    added = 0
    for source_id in source_ids:
        row = con.execute(
            "SELECT count(*) FROM dead_letters WHERE source_id = $1 AND stage = $2",
            [source_id, RUN_FAILURE_STAGE],
        ).fetchone()
        attempt = (int(row[0]) if row else 0) + 1
        cur = con.execute(
            "INSERT INTO dead_letters (dead_letter_id, collection_id, source_id, stage, "
            "error_class, message, attempt, status, created_at) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, 'open', $8) "
            "ON CONFLICT (dead_letter_id) DO NOTHING RETURNING dead_letter_id",
            [
                run_failure_dead_letter_id(run_id, source_id),
                run_id,
                source_id,
                RUN_FAILURE_STAGE,
                error_class,
                (message or "the Dagster run failed")[:1000],
                attempt,
                now,
            ],
        )
        added += len(cur.fetchall())
    return added


def record_failure(
    con: Connection,
    collection_id: str,
    source_id: str,
    stage: str,
    error_class: str | None,
    message: str,
    attempt: int,
    created_at: datetime,
) -> None:
    """Open a dead letter for a failed check, in the commit's transaction."""
    con.execute(
        "INSERT INTO dead_letters (dead_letter_id, collection_id, source_id, stage, error_class, "
        "message, attempt, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'open', $8)",
        [
            uuid.uuid4().hex[:12],
            collection_id,
            source_id,
            stage,
            error_class,
            message[:1000],
            attempt,
            created_at,
        ],
    )


def count_open(con: Connection) -> int:
    """How many dead letters wait for a decision."""
    row = con.execute("SELECT count(*) FROM dead_letters WHERE status = 'open'").fetchone()
    return int(row[0]) if row else 0


def open_dead_letter_runs(store: Store) -> set[str]:
    """The collections (Dagster run ids) that open dead letters name: a prune of the run
    history keeps those runs until a person has decided on the failure."""
    with store.transaction() as con:
        rows = con.execute(
            "SELECT DISTINCT collection_id FROM dead_letters "
            "WHERE status = 'open' AND collection_id IS NOT NULL"
        ).fetchall()
    return {str(row[0]) for row in rows}
