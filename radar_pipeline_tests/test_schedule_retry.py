"""A failure costs its backoff, not a cadence, under the real daemon (`dagster dev`): a Source
with a six-hour cadence fails at its first scheduled check; the failure's line names its next
attempt (the backoff's end); the schedule retries it at that time, inside the same slot, in one
run; once it passed, its slot is done (no run per tick after either)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline_tests.daemonkit import DagsterDev, read_db, wait_for
from radar_pipeline_tests.faults.farm import RadarHome, record_figures
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, write_source

SOURCE = "t-retry"
FEED = rss([{"title": "one", "guid": "one", "link": "https://e.x/one"}])


def schedule_runs(dev: DagsterDev) -> list[Any]:
    """The schedule's collection runs, oldest first."""
    import dagster as dg

    with dev.instance() as instance:
        runs = instance.get_runs(dg.RunsFilter(tags={"radar/trigger": "schedule"}))
    return sorted(runs, key=lambda r: r.tags["radar/tick"])


def ended(dev: DagsterDev, count: int) -> list[Any] | None:
    """The schedule's first `count` runs, once each of them ended."""
    runs = schedule_runs(dev)
    if len(runs) < count or not all(r.is_finished for r in runs[:count]):
        return None
    return runs[:count]


def failure_line(dev: DagsterDev, run_id: str) -> str:
    """The Source's line in the failed run's step failure (what the run page shows)."""
    import dagster as dg

    with dev.instance() as instance:
        entries = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    for entry in entries:
        event = entry.dagster_event
        if event is not None and event.step_failure_data.error is not None:
            message = str(event.step_failure_data.error.message)
            for line in message.splitlines():
                if line.startswith(f"{SOURCE}: "):
                    return line
    raise AssertionError(f"no line for {SOURCE} in the failures of run {run_id}")


def backoff_until(home: RadarHome) -> datetime:
    [(until,)] = read_db(
        home.db, f"SELECT backoff_until FROM feed_state WHERE source_id = '{SOURCE}'"
    )
    assert isinstance(until, datetime), until
    return until.astimezone(UTC)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_failed_source_is_retried_when_its_backoff_ends(
    tmp_path: Path, feed_server: FeedServer
) -> None:
    home = RadarHome(tmp_path / "h")
    path = f"/{SOURCE}.xml"
    feed_server.add(path, b"down for maintenance", status=503, headers={})
    source_note = write_source(home.vault, SOURCE, feed_server.url(path), cadence="PT6H")
    figures: dict[str, Any] = {}
    with DagsterDev(home.home, home.environ(), tmp_path / "dagster-dev.log") as dev:
        [first] = wait_for("the first scheduled check", lambda: ended(dev, 1), 300)
        assert first.status.value == "FAILURE"
        until = backoff_until(home)
        # The line names the backoff's end as the next attempt, to the second.
        line = failure_line(dev, first.run_id)
        assert line.endswith(f"next attempt {format_utc(until)}"), (line, until)
        # The Source note names the same time (its `nextAttemptAt` health key).
        note, _ = split_frontmatter(source_note.read_text(encoding="utf-8"))
        assert str(note.get("nextAttemptAt")) == format_utc(until), note
        tick = parse_utc(first.tags["radar/tick"])
        figures["backoff_s"] = round((until - tick).total_seconds())
        # The publisher is back; the retry is due at the backoff's end, inside the slot.
        feed_server.add(path, FEED)
        [_, retry] = wait_for(
            "the retry", lambda: ended(dev, 2), (until - tick).total_seconds() + 300, 2
        )
        retried_at = parse_utc(retry.tags["radar/tick"])
        figures["retry_late_s"] = round((retried_at - until).total_seconds())
        assert retry.status.value == "SUCCESS", retry.status
        # Decided at the first tick at or after the backoff's end (a minute's tick, and the
        # daemon may lag a tick on a busy machine): not before it, not a cadence later.
        assert until <= retried_at, (until, retried_at)
        assert (retried_at - until).total_seconds() <= 150, (until, retried_at)
        # Passed: its slot is done. Two more ticks request nothing for it.
        time.sleep(130)
        runs = schedule_runs(dev)
        assert [r.run_id for r in runs] == [first.run_id, retry.run_id], [
            (r.tags["radar/tick"], r.status.value) for r in runs
        ]
        skips = [
            t["skipReason"]
            for t in dev.schedule("due_sources_schedule")["scheduleState"]["ticks"]
            if t["skipReason"]
        ]
        assert any(re.search("no Source due at", s) for s in skips), skips
    record_figures("schedule-retry", figures)
