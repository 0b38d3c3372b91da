"""Dead letters written outside a collection: a Dagster run that died before recording one.

A collection records its own failures (stage fetch, parse, plan) as it commits. A run that fails
as a whole (a crash, a killed process, an op error) records nothing; the run-failure sensor
calls `record_run_failure` so each of its Sources still gets an open dead letter.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime

from radar_pipeline.core.store import Store

RUN_FAILURE_STAGE = "dagster-run"
RUN_FAILURE_CLASS = "run-failure"


def dead_letter_id(run_id: str, source_id: str) -> str:
    """Deterministic, so a sensor tick evaluated twice for the same run adds nothing."""
    return hashlib.sha256(f"{run_id}:{source_id}".encode()).hexdigest()[:12]


def record_run_failure(
    store: Store, run_id: str, source_ids: Sequence[str], message: str, now: datetime
) -> int:
    """One open dead letter per Source of the failed run; returns how many were new."""
    added = 0
    with store.transaction() as con:
        for source_id in source_ids:
            row = con.execute(
                "SELECT count(*) FROM dead_letters WHERE source_id = ? AND stage = ?",
                [source_id, RUN_FAILURE_STAGE],
            ).fetchone()
            attempt = (int(row[0]) if row else 0) + 1
            cur = con.execute(
                "INSERT INTO dead_letters VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?, NULL, NULL) "
                "ON CONFLICT (dead_letter_id) DO NOTHING RETURNING dead_letter_id",
                [
                    dead_letter_id(run_id, source_id),
                    run_id,
                    source_id,
                    RUN_FAILURE_STAGE,
                    RUN_FAILURE_CLASS,
                    (message or "the Dagster run failed")[:1000],
                    attempt,
                    now,
                ],
            )
            added += len(cur.fetchall())
    return added
