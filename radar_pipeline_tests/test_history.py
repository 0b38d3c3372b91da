"""Run history is bounded: `radar history prune` and the daily schedule delete old runs (and
their event shards) and keep every run something still shows; what every partition shows is
the same before and after, read through the instance (its status cache rebuilt from what is
left). A simulated fortnight is pruned by the runs' own clock (`--as-of`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.config import Settings, days_to_keep
from radar_pipeline.core.errors import ConfigError
from radar_pipeline.core.run_history import RunEntry, plan_prune
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.store.dead_letters import list_dead_letters
from radar_pipeline.defs.collection.config import SIGNALS_KEY
from radar_pipeline.defs.collection.launch import launch_collection
from radar_pipeline.defs.history.prune import prune_run_history, run_clock, run_entries
from radar_pipeline.defs.history.schedules import run_history_schedule
from radar_pipeline.defs.instance import open_instance
from radar_pipeline.defs.partitions import sources_partitions
from radar_pipeline.defs.resources import ClockResource
from radar_pipeline_tests.feedserver import FeedServer, RequestHandler
from radar_pipeline_tests.vaultkit import rss, write_source

RADAR = str(Path(sys.executable).parent / "radar")
T0 = datetime(2026, 3, 2, 6, 0, tzinfo=UTC)
DAYS = 10
KEEP = 3


def test_the_rule_keeps_young_unended_and_protected_runs() -> None:
    cutoff = T0
    runs = [
        RunEntry("old", T0 - timedelta(days=2), ended=True),
        RunEntry("old-running", T0 - timedelta(days=2), ended=False),
        RunEntry("old-needed", T0 - timedelta(days=3), ended=True),
        RunEntry("young", T0 + timedelta(minutes=1), ended=True),
    ]
    plan = plan_prune(runs, {"old-needed"}, cutoff)
    assert plan.delete == ("old",)
    assert set(plan.keep) == {"old-running", "old-needed", "young"}
    assert plan.protected == ("old-needed",)


def retention_days(environ: dict[str, str]) -> int:
    return Settings.from_env(environ).run_retention_days


def test_retention_days_from_the_environment() -> None:
    assert retention_days({}) == 30
    assert retention_days({"RADAR_RUN_RETENTION_DAYS": "7"}) == 7
    # One rule for the variable and `--keep-days`: 0 keeps only what is still needed.
    assert retention_days({"RADAR_RUN_RETENTION_DAYS": "0"}) == 0
    assert days_to_keep("0", "--keep-days") == 0
    with pytest.raises(ConfigError, match="whole number"):
        retention_days({"RADAR_RUN_RETENTION_DAYS": "a week"})
    with pytest.raises(ConfigError, match="0 or more"):
        days_to_keep("-1", "--keep-days")


def test_a_run_counts_from_the_clock_its_config_carries() -> None:
    config = {"ops": {"signals": {"ops": {"plan": {"config": {"as_of": "2026-03-02T06:00:00Z"}}}}}}
    assert run_clock(config) == T0
    assert run_clock({"ops": {"weekly_cleanup": {"config": {"as_of": ""}}}}) is None


@pytest.fixture
def instance(radar_env: dict[str, Path]) -> Iterator[dg.DagsterInstance]:
    with open_instance(radar_env["home"]) as inst:
        yield inst


def _statuses(instance: dg.DagsterInstance, keys: list[str]) -> dict[str, Any]:
    """What each partition of `signals` shows: its status (the status cache rebuilt from the
    events that are left) and its latest materialization (run and storage id)."""
    instance.wipe_asset_cached_status([SIGNALS_KEY])
    status = instance.get_status_by_partition(SIGNALS_KEY, keys, sources_partitions) or {}
    shown: dict[str, Any] = {}
    for key in keys:
        latest = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=SIGNALS_KEY, asset_partitions=[key]), limit=1
        ).records
        shown[key] = (
            str(status.get(key)),
            (latest[0].run_id, latest[0].storage_id) if latest else None,
        )
    return shown


class Farm:
    """Four Sources over a simulated fortnight: `steady` always answers; `early` is checked
    on the first day only (its latest materialization is old); `lost` passes on the first day,
    fails on the second and is never checked again (its latest attempt, a failure, is old, and
    its dead letter is open); `flaky` fails on day 2 (its dead letter left open: the only
    reason to keep that run) and passes every other day."""

    def __init__(self, server: FeedServer, vault: Path) -> None:
        self.day = 0
        for sid in ("steady", "early", "lost", "flaky"):
            server.add(f"/{sid}.xml", handler=self._handler(sid))
            write_source(vault, sid, server.url(f"/{sid}.xml"), cadence="PT1H")

    def _handler(self, sid: str) -> Any:
        def handle(req: RequestHandler) -> None:
            if (sid == "lost" and self.day >= 1) or (sid == "flaky" and self.day == 2):
                req.send_simple(500, b"down", {"Content-Type": "text/plain"})
                return
            items = [
                {"title": f"{sid} {d}", "guid": f"{sid}-{d}", "link": f"https://x.test/{sid}/{d}"}
                for d in range(self.day + 1)
            ]
            req.send_simple(200, rss(items), {"Content-Type": "application/rss+xml"})

        return handle


@pytest.mark.slow
def test_a_simulated_fortnight_is_pruned_and_every_partition_shows_the_same(
    radar_env: dict[str, Path], feed_server: FeedServer, instance: dg.DagsterInstance
) -> None:
    from radar_pipeline.definitions import defs

    settings = Settings.from_env()
    paths = settings.paths
    farm = Farm(feed_server, radar_env["vault"])
    for day in range(DAYS):
        farm.day = day
        sources = {0: ("steady", "early", "lost", "flaky"), 1: ("steady", "lost", "flaky")}.get(
            day, ("steady", "flaky")
        )
        launch_collection(
            defs, instance, settings, "explicit", sources, T0 + timedelta(days=day), "test"
        )
    keys = ["steady", "early", "lost", "flaky"]
    before = _statuses(instance, keys)
    assert before["lost"][0] == "AssetPartitionStatus.FAILED"
    assert before["early"][0] == "AssetPartitionStatus.MATERIALIZED"
    open_runs = {d.collection_id for d in list_dead_letters(Store.of(paths), "open")}
    assert len(open_runs) == 2, open_runs  # day 1 (lost) and day 2 (flaky)
    runs = {r.run_id: r for r in run_entries(instance)}
    shards = radar_env["home"] / "history" / "runs"
    sizes = {rid: (shards / f"{rid}.db").stat().st_size for rid in runs}

    as_of = T0 + timedelta(days=DAYS - 1, hours=1)
    env = {**os.environ, "RADAR_RUN_RETENTION_DAYS": str(KEEP)}
    proc = subprocess.run(
        [RADAR, "history", "prune", "--as-of", format_utc(as_of), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
    result = json.loads(proc.stdout)

    left = {r.run_id for r in run_entries(instance)}
    deleted = set(runs) - left
    cutoff = as_of - timedelta(days=KEEP)
    assert result["deletedRuns"] == len(deleted) > 0
    assert result["keptRuns"] == len(left)
    assert result["bytesFreed"] == sum(sizes[r] for r in deleted) > 0
    assert all(runs[r].started_at < cutoff for r in deleted)
    assert all(not (shards / f"{r}.db").exists() for r in deleted)
    assert open_runs <= left  # an open dead letter keeps its run
    assert before["early"][1][0] in left  # the latest materialization of an old partition
    # Day 0 (latest materializations), day 1 (lost's dead letter) and its follow-up (lost's
    # latest planned event: its failure), day 2 (flaky's dead letter) and its follow-up (the
    # latest planned event of flaky: a collection plans no partition, restate.py).
    assert result["protectedRuns"] == 5
    assert _statuses(instance, keys) == before
    # Nothing more to do: a second prune deletes nothing.
    again = prune_run_history(instance, Store.of(paths), KEEP, as_of)
    assert again.plan.delete == ()


def test_the_daily_schedule_prunes_once_per_day_of_its_clock(
    radar_env: dict[str, Path], instance: dg.DagsterInstance
) -> None:
    from radar_pipeline.definitions import defs

    # It ticks once a day, as its description says; a simulation evaluates it with its own
    # clock (the scheduled time), as here, instead of a tick every minute.
    assert run_history_schedule.cron_schedule == "30 0 * * *"
    assert "Daily" in (run_history_schedule.description or "")
    defs.get_repository_def().load_all_definitions()  # what the daemon's code server loads
    tick = datetime(2026, 3, 5, 0, 30, tzinfo=UTC)
    context = dg.build_schedule_context(
        instance=instance,
        scheduled_execution_time=tick,
        repository_def=defs.get_repository_def(),
        resources={"clock": ClockResource()},
    )
    [request] = run_history_schedule.evaluate_tick(context).run_requests or []
    assert request.run_key == "prune-history:2026-03-05"
    config = request.run_config
    assert run_clock(config) == tick
    result = defs.resolve_job_def("prune_run_history").execute_in_process(
        run_config=config, instance=instance, tags={"dagster/run_key": request.run_key}
    )
    assert result.success
    again = run_history_schedule.evaluate_tick(context)
    assert not again.run_requests and again.skip_message
    # The next day's tick prunes again.
    next_day = dg.build_schedule_context(
        instance=instance,
        scheduled_execution_time=tick + timedelta(days=1),
        repository_def=defs.get_repository_def(),
        resources={"clock": ClockResource()},
    )
    [later] = run_history_schedule.evaluate_tick(next_day).run_requests or []
    assert later.run_key == "prune-history:2026-03-06"
