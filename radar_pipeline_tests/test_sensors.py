"""Sensors and the collection schedule on a real temp Dagster instance: `evaluate_tick`, then
what the daemon would do with the result (apply partition requests, launch the requested runs
in-process). The clock is `RADAR_AS_OF`, never the wall clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.config import clock_from_env
from radar_pipeline.core.plan.collection import place_sources
from radar_pipeline.core.plan.schedule import due_slot
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.defs.collection.checks import ON_CADENCE
from radar_pipeline.defs.collection.config import COLLECT_JOB_NAME, SIGNALS_KEY
from radar_pipeline.defs.collection.runs import collects_signals, run_sources
from radar_pipeline.defs.collection.schedules import due_sources_schedule
from radar_pipeline.defs.collection.sensors import (
    failed_partitions_sensor,
    run_failure_dead_letter_sensor,
    source_freshness_sensor,
)
from radar_pipeline.defs.history.prune import run_clock
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME
from radar_pipeline.defs.registry.sensors import source_registry_sensor
from radar_pipeline.defs.resources import ClockResource, RadarResource
from radar_pipeline_tests.conftest import refused_store_url, store_rows, store_url_under_test
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.sensorkit import outcome_for, tick_after
from radar_pipeline_tests.vaultkit import rss, write_source

SIX_HOURS = timedelta(hours=6)
T0 = datetime(2026, 11, 2, 9, 17, tzinfo=UTC)
# (id, role, priority): the order the schedule must request them in after downtime.
PRIORITY_ORDER = (
    ("eng-crit", "engineering-blog", "critical"),
    ("disc-high", "discovery", "high"),
    ("prim-low", "primary", "low"),
    ("blog-high", "engineering-blog", "high"),
    ("research-normal", "research", "normal"),
)
SIX_HOUR_IDS = [sid for sid, _, _ in PRIORITY_ORDER]


@pytest.fixture
def instance(radar_env: dict[str, Path]) -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as inst:
        yield inst


def write_feed_source(
    vault: Path, server: FeedServer, sid: str, status: int = 200, **overrides: str
) -> None:
    body = rss([{"title": sid, "guid": sid, "link": f"https://example.com/{sid}"}])
    headers = None if status == 200 else {"Content-Type": "text/plain"}
    server.add(f"/{sid}.xml", body if status == 200 else b"down", status=status, headers=headers)
    write_source(vault, sid, server.url(f"/{sid}.xml"), **overrides)


def tick(
    sensor: dg.SensorDefinition, instance: dg.DagsterInstance, cursor: str | None = None
) -> dg.SensorExecutionData:
    from radar_pipeline.definitions import defs

    return sensor.evaluate_tick(
        dg.build_sensor_context(
            instance_ref=instance.get_ref(),
            cursor=cursor,
            definitions=defs,
            resources={"radar": RadarResource(), "clock": ClockResource(as_of=clock_from_env())},
        )
    )


def due_tick(instance: dg.DagsterInstance) -> list[dg.RunRequest]:
    """One tick of `due_sources_schedule` (its clock: RADAR_AS_OF), as the daemon evaluates it."""
    from radar_pipeline.definitions import defs

    context = dg.build_schedule_context(
        instance=instance,
        scheduled_execution_time=datetime.now(UTC),
        repository_def=defs.get_repository_def(),
        resources={"radar": RadarResource(), "clock": ClockResource(as_of=clock_from_env())},
    )
    data = due_sources_schedule.evaluate_tick(context)
    return list(data.run_requests or [])


def apply_partitions(instance: dg.DagsterInstance, data: dg.SensorExecutionData) -> None:
    for req in data.dynamic_partitions_requests or []:
        if isinstance(req, dg.AddDynamicPartitionsRequest):
            instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        else:
            for key in req.partition_keys:
                instance.delete_dynamic_partition(req.partitions_def_name, key)


def wave_slot(
    instance: dg.DagsterInstance, sid: str, now: datetime, cadence: timedelta = SIX_HOURS
) -> datetime:
    """The slot containing `now` of `sid` on the grid the schedule gives it: its wave's, by
    its position among the partitions of its cadence (core/plan/waves)."""
    partitions = instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME)
    placement = place_sources(load_registry(RadarResource().paths().vault), partitions)
    return due_slot(sid, cadence, now, placement.offset(sid, cadence))


def block_of(req: dg.RunRequest) -> list[str]:
    """The Sources a request's run covers: its config's selection (the range's contents)."""
    return list(req.run_config["ops"]["signals"]["ops"]["plan"]["config"]["sources"])


def launch(instance: dg.DagsterInstance, requests: list[dg.RunRequest]) -> dict[str, bool]:
    """Run each request as the daemon would launch it (here in-process), run key and range
    tags included; returns, per Source, the success of the run that covered it (a run in
    which one of its Sources failed is a failed run)."""
    from radar_pipeline.definitions import defs

    job = defs.resolve_job_def(COLLECT_JOB_NAME)
    outcome: dict[str, bool] = {}
    for req in requests:
        assert req.partition_key is None  # a block: its config (or range tags) says which
        result = job.execute_in_process(
            run_config=req.run_config,
            instance=instance,
            tags={**req.tags, "dagster/run_key": str(req.run_key)},
            raise_on_error=False,
        )
        outcome.update(dict.fromkeys(block_of(req), result.success))
    return outcome


def run_cadence_checks(
    instance: dg.DagsterInstance, data: dg.SensorExecutionData
) -> tuple[bool, int, str]:
    """Launch the freshness sensor's check-only run, as the daemon would: one per tick, however
    many Sources flipped. Its verdict: passed, how many Sources are late, which."""
    from radar_pipeline.definitions import defs

    job = defs.resolve_job_def("source_cadence_check")
    [req] = data.run_requests or []
    assert int(req.tags["dagster/priority"]) < 0  # queued behind every collection run
    result = job.execute_in_process(
        run_config=req.run_config,
        instance=instance,
        tags={**req.tags, "dagster/run_key": str(req.run_key)},
    )
    assert result.success
    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.check_name == ON_CADENCE
    meta = evaluation.metadata
    return evaluation.passed, int(meta["overdue"].value), str(meta["late"].value)  # type: ignore[arg-type]


def test_cadence_check_runs_carry_the_tick_clock(
    radar_env: dict[str, Path], instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The freshness sensor's check-only run gets the tick's `as_of` in its config, as the
    collection runs do: it judges by that clock, and a prune dates it by it (not by its real
    start), so a simulated month prunes it by the same rule as the collections."""
    write_source(radar_env["vault"], "alpha", "https://example.com/a.xml")
    apply_partitions(instance, tick(source_registry_sensor, instance))
    monkeypatch.setenv("RADAR_AS_OF", format_utc(T0))
    [req] = tick(source_freshness_sensor, instance).run_requests or []  # never checked: late
    assert run_clock(req.run_config) == T0
    # Its process may have another clock; the run keeps the one it was requested at.
    monkeypatch.setenv("RADAR_AS_OF", format_utc(T0 + timedelta(days=30)))
    from radar_pipeline.definitions import defs

    result = defs.resolve_job_def("source_cadence_check").execute_in_process(
        run_config=req.run_config, instance=instance, tags=req.tags
    )
    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.metadata["as_of"].value == format_utc(T0)
    [run] = instance.get_runs(dg.RunsFilter(job_name="source_cadence_check"))
    assert run_clock(run.run_config or {}) == T0


def block_key(now: datetime, first: str, last: str) -> str:
    return f"due:{format_utc(now)}:{first}..{last}"


def test_registry_sensor_follows_source_files(
    radar_env: dict[str, Path], instance: dg.DagsterInstance
) -> None:
    vault = radar_env["vault"]
    write_source(vault, "alpha", "https://example.com/a.xml")
    write_source(vault, "beta", "https://example.com/b.xml")
    data = tick(source_registry_sensor, instance)
    apply_partitions(instance, data)
    assert set(instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME)) == {"alpha", "beta"}
    again = tick(source_registry_sensor, instance)
    assert not again.dynamic_partitions_requests and "in sync" in str(again.skip_message)

    write_source(vault, "gamma", "https://example.com/c.xml")  # a new valid file
    (vault / "Radar/Sources/alpha.md").unlink()  # a deleted file
    write_source(vault, "beta", "not a url")  # a file that became invalid
    changed = tick(source_registry_sensor, instance)
    # The tick says what it did (Dagster records it as a skipped tick with this reason).
    assert str(changed.skip_message).startswith(
        "added 1 partition(s): gamma; removed 2 partition(s) (file gone or invalid): alpha, beta"
    )
    apply_partitions(instance, changed)
    assert instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME) == ["gamma"]


def test_schedule_one_run_per_block_of_due_sources_in_priority_order(
    radar_env: dict[str, Path],
    instance: dg.DagsterInstance,
    feed_server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    vault = radar_env["vault"]
    for sid, role, priority in reversed(PRIORITY_ORDER):
        write_feed_source(vault, feed_server, sid, role=role, priority=priority)
    write_feed_source(vault, feed_server, "by-hand", cadence="manual")
    write_feed_source(vault, feed_server, "c-off", enabled="false")
    write_feed_source(vault, feed_server, "switched-off", enabled="false")
    apply_partitions(instance, tick(source_registry_sensor, instance))
    monkeypatch.setenv("RADAR_AS_OF", format_utc(T0))

    # The registry adds them by cadence, then id; `manual` last.
    assert instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME) == [
        "blog-high",
        "c-off",
        "disc-high",
        "eng-crit",
        "prim-low",
        "research-normal",
        "switched-off",
        "by-hand",
    ]
    requests = due_tick(instance)
    # Never checked: all five due. `c-off` (disabled) splits them into two contiguous blocks;
    # the block of the most urgent Source (eng-crit) first, ranked by it in the queue.
    assert [block_of(r) for r in requests] == [
        ["disc-high", "eng-crit", "prim-low", "research-normal"],
        ["blog-high"],
    ]
    # They plan no partition (the Sources are in the config): an unchanged check records
    # nothing on its partition (partition_events.py).
    assert [r.partition_key for r in requests] == [None, None]
    assert not any(k.startswith("dagster/asset_partition_range") for r in requests for k in r.tags)
    assert [r.run_key for r in requests] == [
        block_key(T0, "disc-high", "research-normal"),
        block_key(T0, "blog-high", "blog-high"),
    ]
    assert [int(r.tags["dagster/priority"]) for r in requests] == [23, 2]
    fetch_config = requests[0].run_config["ops"]["signals"]["ops"]["plan"]["config"]
    assert {k: v for k, v in fetch_config.items() if k != "launch"} == {
        "mode": "due",
        "sources": ["disc-high", "eng-crit", "prim-low", "research-normal"],
        "as_of": format_utc(T0),
        "trigger": "schedule",
    }
    # The runs of one tick share one launch (the checks follow it) and record its clock.
    assert len({r.tags["radar/launch"] for r in requests}) == 1
    assert fetch_config["launch"] == requests[0].tags["radar/launch"]
    assert {r.tags["radar/tick"] for r in requests} == {format_utc(T0)}
    # Nothing launched yet: a repeated tick asks for the same keys (no state of its own).
    assert [r.run_key for r in due_tick(instance)] == [r.run_key for r in requests]


def test_schedule_is_on_by_default_and_replaces_the_due_sensor() -> None:
    from radar_pipeline.definitions import defs

    schedule = defs.resolve_schedule_def("due_sources_schedule")
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    assert schedule.cron_schedule == "* * * * *"
    assert schedule.job_name == COLLECT_JOB_NAME
    assert "due_sources_sensor" not in {s.name for s in defs.sensors or []}


@pytest.mark.slow  # 18 in-process runs (collections and check-only runs)
def test_no_replay_after_downtime_and_freshness_in_one_run_per_tick(
    radar_env: dict[str, Path],
    instance: dg.DagsterInstance,
    feed_server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    vault = radar_env["vault"]
    ids = SIX_HOUR_IDS[:3]  # three Sources keep the 18 in-process runs affordable
    for sid, role, priority in PRIORITY_ORDER[:3]:
        write_feed_source(vault, feed_server, sid, role=role, priority=priority)
    apply_partitions(instance, tick(source_registry_sensor, instance))

    monkeypatch.setenv("RADAR_AS_OF", format_utc(T0))
    never = tick(source_freshness_sensor, instance)  # never succeeded: late
    assert run_cadence_checks(instance, never) == (False, 3, ", ".join(ids))
    first = due_tick(instance)
    assert [block_of(r) for r in first] == [sorted(ids)]  # one block: one run for three
    assert launch(instance, first) == dict.fromkeys(ids, True)
    monkeypatch.setenv("RADAR_AS_OF", format_utc(T0 + timedelta(minutes=1)))
    assert not due_tick(instance)
    freshness = tick(source_freshness_sensor, instance, cursor=never.cursor)
    assert run_cadence_checks(instance, freshness) == (True, 0, "none")
    collections = [r for r in instance.get_runs() if r.job_name == COLLECT_JOB_NAME]
    assert len(collections) == 1

    # Dagster stopped for three days: twelve slots per Source went by.
    later = T0 + timedelta(days=3)
    monkeypatch.setenv("RADAR_AS_OF", format_utc(later))
    late = tick(source_freshness_sensor, instance, cursor=freshness.cursor)
    assert run_cadence_checks(instance, late) == (False, 3, ", ".join(ids))
    requests = due_tick(instance)
    # One current check each, in one run.
    assert [r.run_key for r in requests] == [block_key(later, *sorted(ids)[::2])]
    launch(instance, requests)
    collections = [r for r in instance.get_runs() if r.job_name == COLLECT_JOB_NAME]
    assert len(collections) == 2

    monkeypatch.setenv("RADAR_AS_OF", format_utc(later + timedelta(minutes=1)))
    assert not due_tick(instance)
    on_time = tick(source_freshness_sensor, instance, cursor=late.cursor)
    assert run_cadence_checks(instance, on_time) == (True, 0, "none")
    # Nothing changed since: the freshness sensor stays quiet, and its tick says what it saw.
    quiet = tick(source_freshness_sensor, instance, cursor=on_time.cursor)
    assert not quiet.run_requests
    assert quiet.skip_message == "no Source changed its cadence verdict (3 Source(s), 0 late)"


def test_schedule_respects_backoff_and_retries_when_it_ends(
    radar_env: dict[str, Path],
    instance: dg.DagsterInstance,
    feed_server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_feed_source(radar_env["vault"], feed_server, "flaky", status=503)
    apply_partitions(instance, tick(source_registry_sensor, instance))
    start = wave_slot(instance, "flaky", T0) + timedelta(minutes=1)  # early in a slot
    monkeypatch.setenv("RADAR_AS_OF", format_utc(start))
    first = due_tick(instance)
    # The Source fails, so its run fails naming it (and its follow-up run makes its partition
    # failed: restate.py).
    assert launch(instance, first) == {"flaky": False}
    [run] = instance.get_runs(dg.RunsFilter(job_name=COLLECT_JOB_NAME))
    assert run.status == dg.DagsterRunStatus.FAILURE
    launch(instance, list(tick_after(failed_partitions_sensor, instance, run.run_id).run_requests))
    status = instance.get_status_by_partition(
        dg.AssetKey("signals"), ["flaky"], dg.DynamicPartitionsDefinition(name="sources")
    )
    assert {k: v.value for k, v in status.items()} == {"flaky": "FAILED"}
    [(backoff_until,)] = store_rows(
        "SELECT backoff_until FROM feed_state WHERE source_id = 'flaky'"
    )
    assert start < backoff_until < start + timedelta(hours=1)

    # In backoff: not requested.
    monkeypatch.setenv("RADAR_AS_OF", format_utc(backoff_until - timedelta(seconds=1)))
    assert not due_tick(instance)
    # Backoff over, still in the same slot: one retry now, not at the next slot (a failure
    # costs its backoff, not a cadence).
    ended = backoff_until + timedelta(seconds=1)
    monkeypatch.setenv("RADAR_AS_OF", format_utc(ended))
    retry = due_tick(instance)
    assert ended < wave_slot(instance, "flaky", start) + SIX_HOURS
    assert [r.run_key for r in retry] == [block_key(ended, "flaky", "flaky")]


def test_run_failure_sensor_records_a_dead_letter(
    radar_env: dict[str, Path],
    instance: dg.DagsterInstance,
    feed_server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from radar_pipeline.definitions import defs

    write_feed_source(radar_env["vault"], feed_server, "victim")
    instance.add_dynamic_partitions(SOURCES_PARTITIONS_NAME, ["victim"])
    # The run's process cannot open its store: a directory stands where the DuckDB file should
    # be, and (under RADAR_TEST_STORE_URL) nothing listens at the PostgreSQL store's address.
    url = store_url_under_test()
    broken = radar_env["root"] / "not-a-db"
    broken.mkdir()
    monkeypatch.setenv("RADAR_DB", str(broken))
    if url:
        monkeypatch.setenv("RADAR_STORE_URL", refused_store_url())
    result = defs.resolve_job_def(COLLECT_JOB_NAME).execute_in_process(
        instance=instance, partition_key="victim", raise_on_error=False
    )
    assert not result.success
    # A check-only run on the same partition fails the same way: it collected nothing.
    check_only = defs.resolve_job_def("source_cadence_check").execute_in_process(
        instance=instance, tags={"dagster/partition": "victim"}, raise_on_error=False
    )
    assert not check_only.success
    monkeypatch.setenv("RADAR_DB", str(radar_env["db"]))
    if url:
        monkeypatch.setenv("RADAR_STORE_URL", url)
    resources = {"radar": RadarResource(), "clock": ClockResource(as_of=clock_from_env())}
    for run_id in (result.run_id, check_only.run_id, result.run_id):
        # The collection's failure twice: a repeated evaluation adds nothing.
        tick_after(run_failure_dead_letter_sensor, instance, run_id, resources)
    rows = store_rows(
        "SELECT collection_id, source_id, stage, error_class, status, attempt FROM dead_letters"
    )
    assert rows == [(result.run_id, "victim", "dagster-run", "run-failure", "open", 1)]


@pytest.mark.parametrize(
    ("job_name", "selection", "expected"),
    [
        (COLLECT_JOB_NAME, None, True),
        ("__ASSET_JOB", [dg.AssetKey("signals")], True),  # a UI materialization or backfill
        ("__ASSET_JOB", [dg.AssetKey("source_registry")], False),
        ("__ASSET_JOB", [], False),  # checks only
        ("source_cadence_check", None, False),
        ("signal_checks", None, False),
    ],
)
def test_collects_signals(
    job_name: str, selection: list[dg.AssetKey] | None, expected: bool
) -> None:
    assert collects_signals(job_name, selection) is expected


@pytest.mark.parametrize(
    ("tags", "sources", "expected"),
    [
        ({"dagster/partition": "b"}, [], ["b"]),
        (
            {
                "dagster/asset_partition_range_start": "a",
                "dagster/asset_partition_range_end": "c",
            },
            [],
            ["a", "b", "c"],
        ),
        (
            {
                "dagster/asset_partition_range_start": "a",
                "dagster/asset_partition_range_end": "d",
            },
            ["d", "b"],
            ["b", "d"],
        ),
        ({"dagster/partition": "2026-11-22"}, [], []),  # a weekly partition, not a Source
        ({}, [], []),
        ({}, ["d", "b"], ["d", "b"]),  # a run that plans no partition: its config's Sources
    ],
)
def test_run_sources(tags: dict[str, str], sources: list[str], expected: list[str]) -> None:
    config = {"ops": {"signals": {"ops": {"plan": {"config": {"sources": sources}}}}}}
    assert run_sources(tags, config, ["a", "b", "c", "d"]) == expected


def test_a_run_failed_by_its_sources_gets_no_second_dead_letter_and_still_its_checks(
    radar_env: dict[str, Path],
    instance: dg.DagsterInstance,
    feed_server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from radar_pipeline.defs.collection.sensors import (
        signal_checks_after_collection,
        signal_checks_after_failed_collection,
    )

    write_feed_source(radar_env["vault"], feed_server, "down", status=503)
    apply_partitions(instance, tick(source_registry_sensor, instance))
    monkeypatch.setenv("RADAR_AS_OF", format_utc(T0))
    assert launch(instance, due_tick(instance)) == {"down": False}
    [run] = instance.get_runs(dg.RunsFilter(job_name=COLLECT_JOB_NAME))
    resources = {"radar": RadarResource(), "clock": ClockResource(as_of=clock_from_env())}
    dead_letters = tick_after(run_failure_dead_letter_sensor, instance, run.run_id, resources)
    assert "their failures are recorded already" in outcome_for(dead_letters, run.run_id)
    rows = store_rows("SELECT source_id, collection_id, stage FROM dead_letters")
    # Only the commit's own dead letter: the run failed because its Source failed.
    assert [(s, c) for s, c, _ in rows] == [("down", run.run_id)]
    assert rows[0][2] != "dagster-run"

    checks = tick_after(signal_checks_after_failed_collection, instance, run.run_id)
    request = outcome_for(checks, run.run_id)
    assert isinstance(request, dg.RunRequest)
    # The checks follow the tick's launch (here one run): requested once, by its last run.
    assert request.run_key == f"checks-after:{run.tags['radar/launch']}"
    assert int(request.tags["dagster/priority"]) < 0  # behind every collection in the queue
    assert signal_checks_after_collection.name != signal_checks_after_failed_collection.name


def test_a_newly_failed_source_is_restated_by_a_follow_up_run(
    radar_env: dict[str, Path],
    instance: dg.DagsterInstance,
    feed_server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A scheduled run plans no partition, so the Source it failed does not read failed; the
    failed-partitions sensor requests one follow-up run over its partition, which checks
    nothing (the Source is in its backoff) and fails naming it: then it reads failed."""
    from radar_pipeline.defs.collection.assets import signals

    write_feed_source(radar_env["vault"], feed_server, "down", status=503)
    apply_partitions(instance, tick(source_registry_sensor, instance))
    monkeypatch.setenv("RADAR_AS_OF", format_utc(T0))
    assert launch(instance, due_tick(instance)) == {"down": False}
    [run] = instance.get_runs(dg.RunsFilter(job_name=COLLECT_JOB_NAME))

    def shown() -> str | None:
        status = instance.get_status_by_partition(SIGNALS_KEY, ["down"], signals.partitions_def)
        value = (status or {}).get("down")
        return value.value if value else None

    assert shown() is None  # checked, failed, but planned by no run yet
    result = tick_after(failed_partitions_sensor, instance, run.run_id)
    [follow_up] = result.run_requests or []
    assert follow_up.run_key == f"restate:{run.run_id}:down..down"
    assert (
        follow_up.tags["dagster/asset_partition_range_start"],
        follow_up.tags["dagster/asset_partition_range_end"],
        follow_up.tags["radar/restates"],
        follow_up.tags["radar/launch"],
    ) == ("down", "down", run.run_id, run.tags["radar/launch"])
    attempts = store_rows("SELECT count(*) FROM fetch_attempts")
    assert launch(instance, [follow_up]) == {"down": False}
    assert shown() == "FAILED"
    assert store_rows("SELECT count(*) FROM fetch_attempts") == attempts  # nothing fetched
    [restated] = instance.get_runs(dg.RunsFilter(tags={"radar/restates": run.run_id}))
    [failure] = instance.all_logs(restated.run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
    message = failure.dagster_event.step_failure_data.error.message  # type: ignore[union-attr]
    assert "1 Source failed\ndown: fetch: http-5xx" in message
    # The follow-up asks for nothing more: no loop of follow-ups.
    again = tick_after(failed_partitions_sensor, instance, restated.run_id)
    assert "no Source to re-state" in str(outcome_for(again, restated.run_id))
