"""What a person sees in the Dagster UI, asked the way the UI asks (GraphQL of a real `dagster
dev` in a temp home, its daemon ticking): the collection schedule listed under Automation,
ticking, requesting exactly the due Sources once per slot; a failing Source as a *failed*
partition of `signals` beside a passing one *materialized*; the failing Source cleared by its
next success; and after a simulated downtime one current check per overdue Source (a run per
contiguous block of them), not one per missed slot. The clock of the schedule and its runs is
`RADAR_AS_OF` (no waiting for six hours)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.clock import format_utc
from radar_pipeline.defs.collection.config import config_of
from radar_pipeline_tests.daemonkit import DagsterDev, read_db, wait_for
from radar_pipeline_tests.faults.farm import RadarHome, record_figures
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, write_source

SCHEDULE = "due_sources_schedule"
PASSING = "ui-pass"  # critical: requested first
FAILING = "ui-fail"  # its feed answers 500 until the downtime is over
# Disabled, of the same cadence: never requested by the schedule, and between the two in
# partition order (by cadence, then id), so it splits their block.
OFF = "ui-off"
T0 = datetime(2026, 11, 2, 9, 17, tzinfo=UTC)
SIX_HOURS = timedelta(hours=6)


def feed(source_id: str) -> bytes:
    return rss(
        [
            {"title": f"{source_id} {i}", "guid": f"{source_id}-{i}", "link": f"https://e.x/{i}"}
            for i in range(2)
        ]
    )


def keys_at(now: datetime, ids: list[str]) -> set[str]:
    """The run keys of a tick at `now` in which each of `ids` is a block of its own (here the
    disabled Source lies between the two in partition order)."""
    return {f"due:{format_utc(now)}:{sid}..{sid}" for sid in ids}


def schedule_runs(dev: DagsterDev) -> list[Any]:
    """Every run the schedule launched, oldest first."""
    import dagster as dg

    with dev.instance() as instance:
        runs = instance.get_runs(dg.RunsFilter(tags={"dagster/schedule_name": SCHEDULE}))
    return sorted(runs, key=lambda r: r.tags["dagster/run_key"])


def finished_runs(dev: DagsterDev, count: int) -> list[Any] | None:
    """The schedule's runs once there are `count` and all finished."""
    runs = schedule_runs(dev)
    if len(runs) < count or any(not r.is_finished for r in runs):
        return None
    return runs


def sources_of(run: Any) -> list[str]:
    """The Sources a scheduled run checks: its config's selection."""
    config = config_of(run.run_config)
    assert config is not None, run.run_config
    return list(config.sources)


def launch_run_ids(dev: DagsterDev, launch: str) -> list[str]:
    """The runs of one launch: a tick's runs and the follow-ups that re-state their failed
    Sources (the checks follow the last of them)."""
    import dagster as dg

    with dev.instance() as instance:
        return [r.run_id for r in instance.get_runs(dg.RunsFilter(tags={"radar/launch": launch}))]


def ticks_after(dev: DagsterDev, after: float) -> list[dict[str, Any]]:
    ticks = dev.schedule(SCHEDULE)["scheduleState"]["ticks"]
    return [t for t in ticks if t["timestamp"] > after]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_schedule_and_failed_partitions_in_the_ui(tmp_path: Path, feed_server: FeedServer) -> None:
    home = RadarHome(tmp_path / "h")
    write_source(
        home.vault,
        PASSING,
        feed_server.add(f"/{PASSING}.xml", feed(PASSING)),
        priority="critical",
    )
    write_source(home.vault, FAILING, feed_server.add(f"/{FAILING}.xml", b"down", status=500))
    write_source(home.vault, OFF, feed_server.add(f"/{OFF}.xml", feed(OFF)), enabled="false")
    figures: dict[str, Any] = {}
    env = {**home.environ(), "RADAR_AS_OF": format_utc(T0)}
    dev = DagsterDev(home.home, env, tmp_path / "dagster-dev.log")
    try:
        dev.start()
        started = time.time()
        dev.wait_partitions([FAILING, OFF, PASSING])

        # Automation lists the schedule, running by default, every minute.
        schedule = dev.schedule(SCHEDULE)
        assert (schedule["cronSchedule"], schedule["scheduleState"]["status"]) == (
            "* * * * *",
            "RUNNING",
        )

        # A tick requests the two due Sources (not the disabled one): one run per contiguous
        # block, and the disabled Source between them in partition order splits them in two.
        runs = wait_for("the scheduled runs", lambda: finished_runs(dev, 2), 240)
        figures["first_runs_s"] = round(time.time() - started, 1)
        assert {r.tags["dagster/run_key"] for r in runs} == keys_at(T0, [PASSING, FAILING])
        # Each names its block in its config and plans no partition (partition_events.py).
        status = {tuple(sources_of(r)): r.status.value for r in runs}
        assert status == {(PASSING,): "SUCCESS", (FAILING,): "FAILURE"}
        assert not any("dagster/asset_partition_range_start" in r.tags for r in runs)
        [failed_run] = [r for r in runs if sources_of(r) == [FAILING]]
        [requesting] = [t for t in ticks_after(dev, 0) if t["runIds"]]
        assert requesting["status"] == "SUCCESS"
        assert sorted(requesting["runIds"]) == sorted(r.run_id for r in runs)

        # The Partitions tab: the failing Source failed (once the follow-up run the failed-
        # partitions sensor requests planned and failed it: restate.py), the passing one
        # materialized.
        statuses = wait_for(
            "the failed partition",
            lambda: ((s := dev.partition_statuses())["failed"] == [FAILING] and s) or None,
            150,
        )
        assert PASSING in statuses["materialized"]
        figures["after_first_tick"] = statuses

        # The run failure names the Source; its dead letter is the commit's alone; the
        # evidence checks still follow the tick's runs, once, after the last of them.
        with dev.instance() as instance:
            import dagster as dg

            [failure] = instance.all_logs(
                failed_run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE
            )
            error = failure.dagster_event.step_failure_data.error  # type: ignore[union-attr]
            assert f"1 Source failed\n{FAILING}: fetch: http-5xx" in error.message
        wait_for(
            "the evidence checks after the tick's runs",
            lambda: _checks_after(dev, launch_run_ids(dev, runs[0].tags["radar/launch"])),
            150,
        )

        # Later ticks (the clock stands still) ask for nothing: once per slot.
        quiet_since = time.time()
        wait_for("a later tick", lambda: ticks_after(dev, quiet_since), 150)
        assert len(schedule_runs(dev)) == 2
        letters = read_db(home.db, "SELECT source_id, stage FROM dead_letters ORDER BY 1")
        assert [s for s, _ in letters] == [FAILING]
        assert all(stage != "dagster-run" for _, stage in letters)
    finally:
        dev.stop()

    # Three days down (twelve slots of each Source went by); the failing feed recovered.
    feed_server.add(f"/{FAILING}.xml", feed(FAILING))
    later = T0 + timedelta(days=3)
    dev.env["RADAR_AS_OF"] = format_utc(later)
    try:
        dev.start()
        restarted = time.time()
        runs = wait_for("the recovery runs", lambda: finished_runs(dev, 4), 240)
        figures["recovery_runs_s"] = round(time.time() - restarted, 1)
        recovery = [
            r for r in runs if r.tags["dagster/run_key"] in keys_at(later, [PASSING, FAILING])
        ]
        assert len(recovery) == 2 and len(runs) == 4  # one per overdue Source, not per slot
        assert {r.status.value for r in recovery} == {"SUCCESS"}

        # The next success cleared the failed partition.
        statuses = wait_for(
            "the failed partition cleared",
            lambda: ((s := dev.partition_statuses())["failed"] == [] and s) or None,
            60,
        )
        assert {PASSING, FAILING} <= set(statuses["materialized"])
        assert OFF not in statuses["materialized"]
        figures["after_recovery"] = statuses

        quiet_since = time.time()
        wait_for("a later tick", lambda: ticks_after(dev, quiet_since), 150)
        assert len(schedule_runs(dev)) == 4
        figures["dagster_dev_ready_s"] = [round(s, 1) for s in dev.ready_s]
    finally:
        survivors = dev.stop()
    assert not survivors, f"processes outlived Ctrl-C: {survivors}"
    record_figures("ui-schedule-partitions", figures)


def _checks_after(dev: DagsterDev, run_ids: list[str]) -> bool:
    """One finished `signal_checks` run follows the given runs (one launch), not one each."""
    import dagster as dg

    with dev.instance() as instance:
        runs = [
            r
            for r in instance.get_runs(dg.RunsFilter(job_name="signal_checks"))
            if r.tags.get("radar/after_run") in run_ids
        ]
    assert len(runs) <= 1, f"{len(runs)} checks runs for one launch"
    return len(runs) == 1 and runs[0].is_finished
