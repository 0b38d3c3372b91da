"""Bounded recovery after downtime, and backfill isolation: real `radar` processes, a loopback
feed server, a real DuckDB file and a real (temp) Dagster instance."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import dagster as dg
import filelock
import pytest

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.plan.schedule import next_check_at
from radar_pipeline.core.plan.waves import place
from radar_pipeline.defs.collection.config import COLLECT_JOB_NAME
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME
from radar_pipeline_tests.conftest import store_rows
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, signal_files, write_source

RADAR = str(Path(sys.executable).parent / "radar")
T = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)  # the end of the downtime
DOWNTIME = timedelta(days=3)
SOURCES = ("src-a", "src-b", "src-c", "src-d", "src-e")


def item_at(j: int) -> datetime:
    """One item a day, half an hour before each day mark: item 3 sits inside the 1 h overlap."""
    return T - timedelta(days=j, minutes=30)


def feed_as_of(source_id: str, now: datetime) -> bytes:
    """What the publisher serves at `now`: its 30 latest items (one a day), newest first."""
    published = [j for j in range(0, 40) if item_at(j) <= now][:30]
    return rss(
        [
            {
                "title": f"{source_id} day {j}",
                "guid": f"{source_id}-{j}",
                "link": f"https://example.com/{source_id}/{j}",
                "pubDate": format_datetime(item_at(j), usegmt=True),
            }
            for j in published
        ]
    )


def serve(server: FeedServer, now: datetime) -> None:
    for sid in SOURCES:
        server.add(f"/{sid}.xml", feed_as_of(sid, now))


def radar_collect(as_of: datetime) -> dict[str, Any]:
    proc = subprocess.run(
        [RADAR, "collect", "--as-of", format_utc(as_of), "--json"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def fetches(server: FeedServer) -> dict[str, int]:
    return {sid: len(server.requests_for(f"/{sid}.xml")) for sid in SOURCES}


@pytest.mark.slow  # three `radar` processes, ~10 s each on a busy 2-core machine
def test_three_days_down_one_check_per_source_then_overdue_zero(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    vault, home = radar_env["vault"], radar_env["home"]
    for sid in SOURCES:
        write_source(vault, sid, feed_server.url(f"/{sid}.xml"), cadence="PT6H")
    assert not any(home.iterdir())  # an empty DAGSTER_HOME: the CLI sets it up

    # Before the downtime: the first check covers 7 days + 1 h (items 3..10 of the 30 served).
    before = T - DOWNTIME
    serve(feed_server, before)
    first = radar_collect(before)
    assert (first["overdue"], first["passed"], first["failed"], first["created"]) == (5, 5, 0, 40)
    assert first["downtimeFrom"] is None  # never succeeded before: work, not downtime

    # Three days later: one current check per Source, never one per missed 6 h slot.
    serve(feed_server, T)
    seen = fetches(feed_server)
    report = radar_collect(T)
    assert {k: v - seen[k] for k, v in fetches(feed_server).items()} == dict.fromkeys(SOURCES, 1)
    assert (report["overdue"], report["due"], report["passed"], report["failed"]) == (5, 5, 5, 0)
    assert report["downtimeFrom"] == format_utc(before)
    # Covered: max(lastSuccessAt, T - 7 d) - 1 h = T - 3 d - 1 h: items 0..2 are new. Every
    # item inside the 7-day cap is looked at (invariant 8): items 3..7 are reused, 8..29 outside.
    assert (report["created"], report["reused"]) == (15, 25)
    assert (report["outsideWindow"], report["deferred"]) == (110, 0)
    assert {s["coverageFrom"] for s in report["sources"]} == {
        format_utc(before - timedelta(hours=1))
    }
    assert len(signal_files(vault)) == 55

    # The recovery report is in the store and in the Dagster run (Markdown, no partition).
    [row] = store_rows(
        "SELECT downtime_from, overdue, passed, failed, created, dagster_run_id "
        "FROM collections WHERE as_of = $1",
        [T],
    )
    assert row[0] == before and row[1:5] == (5, 5, 0, 15)
    with dg.DagsterInstance.get() as instance:  # DAGSTER_HOME is the temp home
        observations = [
            e.asset_observation
            for e in instance.all_logs(row[5], of_type=dg.DagsterEventType.ASSET_OBSERVATION)
            if e.asset_observation is not None and e.asset_observation.partition is None
        ]
        [observation] = observations
        table = str(observation.metadata["collection_report"].value)
        assert "overdue 5 · due 5 · passed 5 · failed 0" in table
        assert f"downtime from {format_utc(before)}" in table
        assert all(f"| {sid} | passed |" in table for sid in SOURCES)
    # Storage lives in DAGSTER_HOME, set up from the repository's dagster.yaml.
    assert (home / "dagster.yaml").read_text() == (Path.cwd() / "dagster.yaml").read_text()
    assert (home / "history" / "runs.db").exists()

    # A minute later nothing is due and nothing is fetched.
    seen = fetches(feed_server)
    after = radar_collect(T + timedelta(minutes=1))
    assert (after["overdue"], after["due"], after["passed"], after["created"]) == (0, 0, 0, 0)
    assert after["downtimeFrom"] is None
    assert fetches(feed_server) == seen

    # Recovered together, the Sources stay together: the five six-hour Sources are one wave
    # (core/plan/waves, placed by their partitions), next due at the wave's time, within
    # their cadence, as one check of all five (the CLI above found none due a minute after T).
    with dg.DagsterInstance.get() as instance:
        partitions = instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME)
    placement = place(partitions, dict.fromkeys(SOURCES, timedelta(hours=6)))
    next_checks = {
        sid: next_check_at(sid, timedelta(hours=6), T, placement.offset(sid, timedelta(hours=6)))
        for sid in SOURCES
    }
    [instant] = set(next_checks.values())
    assert instant is not None and T + timedelta(hours=3) <= instant <= T + timedelta(hours=6)
    seen = fetches(feed_server)
    step = radar_collect(instant)
    assert (step["overdue"], step["due"], step["passed"]) == (0, 5, 5), step
    assert {k: v - seen[k] for k, v in fetches(feed_server).items()} == dict.fromkeys(SOURCES, 1)


@pytest.mark.slow  # one in-process run over four partitions, ~10 s on a busy machine
def test_single_run_backfill_keeps_sources_isolated_and_locked(
    radar_env: dict[str, Path], feed_server: FeedServer
) -> None:
    """What a UI backfill of four partitions launches under the single-run policy: ONE run
    over the range with the default config. A failing Source and a locked Source do not hide
    the others: each passing Source gets its own materialization; the failing one fails the
    run, named in its failure."""
    from radar_pipeline.definitions import defs

    vault = radar_env["vault"]
    ids = ("bf-a", "bf-b", "bf-c", "bf-d")
    for sid in ids:
        feed_server.add(
            f"/{sid}.xml", rss([{"title": sid, "guid": sid, "link": f"https://example.com/{sid}"}])
        )
        write_source(vault, sid, feed_server.url(f"/{sid}.xml"))
    feed_server.add("/bf-c.xml", b"boom", status=500, headers={"Content-Type": "text/plain"})
    locks = RadarPaths.from_env().locks_dir
    locks.mkdir(parents=True, exist_ok=True)
    held = filelock.FileLock(locks / "bf-b.lock", timeout=0, thread_local=False)
    held.acquire()  # another process is collecting bf-b right now
    try:
        with dg.instance_for_test(temp_dir=str(radar_env["home"])) as instance:
            instance.add_dynamic_partitions(SOURCES_PARTITIONS_NAME, list(ids))
            result = defs.resolve_job_def(COLLECT_JOB_NAME).execute_in_process(
                instance=instance,
                tags={
                    "dagster/asset_partition_range_start": "bf-a",
                    "dagster/asset_partition_range_end": "bf-d",
                    "dagster/backfill": "simulated",
                },
                raise_on_error=False,
            )
            assert not result.success
            [failure] = [e for e in result.all_events if e.is_step_failure]
            error = failure.step_failure_data.error
            assert error is not None and "1 Source failed\nbf-c: fetch: http-5xx" in error.message
            assert len(instance.get_runs()) == 1
            materialized = instance.get_materialized_partitions(dg.AssetKey("signals"))
            assert materialized == {"bf-a", "bf-d"}
            outcomes = {
                e.asset_observation.partition: e.asset_observation.metadata["outcome"].value
                for e in instance.all_logs(
                    result.run_id, of_type=dg.DagsterEventType.ASSET_OBSERVATION
                )
                if e.asset_observation is not None and e.asset_observation.partition
            }
            assert outcomes == {"bf-c": "failed"}
    finally:
        held.release()
    [(report_json,)] = store_rows("SELECT report_json FROM collections")
    report = json.loads(str(report_json))
    by_id = {s["id"]: s for s in report["sources"]}
    assert by_id["bf-b"]["outcome"] == "skipped" and by_id["bf-b"]["error"] == "locked"
    assert by_id["bf-c"]["outcome"] == "failed"
    assert len(feed_server.requests_for("/bf-b.xml")) == 0


@pytest.mark.parametrize(
    ("successes", "last_collection", "expected"),
    [
        ({}, None, None),  # never ran
        ({}, T - DOWNTIME, T - DOWNTIME),  # ran, never succeeded (offline since install)
        ({"dt-a": T - timedelta(hours=7)}, None, None),  # one check a bit late: not downtime
        ({"dt-a": T - timedelta(hours=12)}, None, T - timedelta(hours=12)),  # a whole slot missed
        # Offline for three days while collections kept failing: downtime from the last success.
        ({"dt-a": T - DOWNTIME, "dt-b": T - DOWNTIME}, T - timedelta(minutes=5), T - DOWNTIME),
        # One Source failing alone for days while the other succeeds: no downtime.
        ({"dt-a": T - DOWNTIME, "dt-b": T - timedelta(hours=1)}, None, None),
    ],
)
def test_downtime_from_is_the_last_success_after_a_missed_check(
    tmp_path: Path,
    successes: dict[str, datetime],
    last_collection: datetime | None,
    expected: datetime | None,
) -> None:
    from radar_pipeline.core.plan.collection import CollectionSpec, plan_collection
    from radar_pipeline.core.plan.locks import LockBook
    from radar_pipeline.core.registry.sources import load_registry
    from radar_pipeline.core.store.feed_state import FeedState

    for sid in ("dt-a", "dt-b"):
        write_source(tmp_path, sid, f"https://example.com/{sid}.xml", cadence="PT6H")
    states = {sid: FeedState(sid, last_success_at=at) for sid, at in successes.items()}
    plan = plan_collection(
        CollectionSpec("c1", "explicit", T),
        load_registry(tmp_path),
        states,
        last_collection,
        LockBook(tmp_path / "locks"),
    )
    assert plan.downtime_from == expected
