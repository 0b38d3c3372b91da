"""The collection schedule's runs on a real temp Dagster instance: a burst of due Sources is a
run per contiguous block, each slot of a Source is collected once (in a block or alone, and
while a run still holds it), and the checks follow a tick's runs once, after the last."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import dagster as dg
import pytest

from radar_pipeline.core.clock import format_utc
from radar_pipeline.defs.collection.config import COLLECT_JOB_NAME
from radar_pipeline.defs.collection.sensors import (
    failed_partitions_sensor,
    signal_checks_after_collection,
    signal_checks_after_failed_collection,
)
from radar_pipeline.defs.registry.sensors import source_registry_sensor
from radar_pipeline_tests.conftest import store_rows
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.sensorkit import outcome_for, tick_after
from radar_pipeline_tests.test_sensors import (
    SIX_HOURS,
    T0,
    apply_partitions,
    block_key,
    block_of,
    due_tick,
    launch,
    tick,
    wave_slot,
    write_feed_source,
)
from radar_pipeline_tests.vaultkit import rss

SIGNALS = dg.AssetKey("signals")


@pytest.fixture
def instance(radar_env: dict[str, Path]) -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as inst:
        yield inst


def partition_status(instance: dg.DagsterInstance, keys: list[str]) -> dict[str, str]:
    status = instance.get_status_by_partition(
        SIGNALS, keys, dg.DynamicPartitionsDefinition(name="sources")
    )
    return {k: v.value for k, v in status.items()}


def backoff_of(source_id: str) -> object:
    [(backoff_until,)] = store_rows(
        "SELECT backoff_until FROM feed_state WHERE source_id = $1", [source_id]
    )
    return backoff_until


def collection_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    return list(instance.get_runs(dg.RunsFilter(job_name=COLLECT_JOB_NAME)))


def test_a_slot_is_collected_once_in_a_block_and_a_failing_source_is_retried_per_backoff_step(
    radar_env: dict[str, Path],
    instance: dg.DagsterInstance,
    feed_server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    vault = radar_env["vault"]
    for sid in ("a-ok", "b-down", "c-ok"):
        write_feed_source(vault, feed_server, sid, status=503 if sid == "b-down" else 200)
    apply_partitions(instance, tick(source_registry_sensor, instance))
    start = wave_slot(instance, "b-down", T0) + timedelta(minutes=1)  # early in b's slot
    monkeypatch.setenv("RADAR_AS_OF", format_utc(start))
    requests = due_tick(instance)
    assert [block_of(r) for r in requests] == [["a-ok", "b-down", "c-ok"]]  # one run
    assert launch(instance, requests) == dict.fromkeys(["a-ok", "b-down", "c-ok"], False)
    # The run failed because one Source failed; it planned no partition, so the failed-
    # partitions sensor asks for a follow-up run over b-down alone (restate.py), which plans
    # and fails it: exactly that partition is failed.
    [run] = collection_runs(instance)
    follow_ups = tick_after(failed_partitions_sensor, instance, run.run_id).run_requests
    assert [block_of(r) for r in follow_ups or []] == [["b-down"]]
    assert launch(instance, list(follow_ups or [])) == {"b-down": False}
    assert partition_status(instance, ["a-ok", "b-down", "c-ok"]) == {
        "a-ok": "MATERIALIZED",
        "b-down": "FAILED",
        "c-ok": "MATERIALIZED",
    }
    backoff_until = backoff_of("b-down")
    assert isinstance(backoff_until, type(start))
    assert start < backoff_until < start + timedelta(hours=1)
    # In its backoff: not asked for. Out of it, still inside the slot the block covered: one
    # retry of it alone (a failure costs its backoff, not a cadence); the two that passed
    # are not asked again in their slot, nor due for half a cadence at least.
    monkeypatch.setenv("RADAR_AS_OF", format_utc(backoff_until - timedelta(seconds=1)))
    assert due_tick(instance) == []
    step = backoff_until + timedelta(seconds=1)
    monkeypatch.setenv("RADAR_AS_OF", format_utc(step))
    retry = due_tick(instance)
    assert [r.run_key for r in retry] == [block_key(step, "b-down", "b-down")]
    assert launch(instance, retry)["b-down"] is False
    # It failed again: a later backoff, and one run per step, never one per tick.
    second = backoff_of("b-down")
    assert isinstance(second, type(start)) and second > step
    for later in (step + timedelta(minutes=1), second - timedelta(seconds=1)):
        monkeypatch.setenv("RADAR_AS_OF", format_utc(later))
        assert due_tick(instance) == []
    # Its next slot: the block again (the other two are due a cadence after their check).
    next_slot = wave_slot(instance, "b-down", start) + SIX_HOURS
    monkeypatch.setenv("RADAR_AS_OF", format_utc(next_slot))
    again = due_tick(instance)
    assert [r.run_key for r in again] == [block_key(next_slot, "a-ok", "c-ok")]
    assert launch(instance, again)["b-down"] is False
    # The two that passed: their slot is spent; only b-down comes back, at its backoff's end.
    third = backoff_of("b-down")
    assert isinstance(third, type(start)) and next_slot < third < next_slot + SIX_HOURS
    monkeypatch.setenv("RADAR_AS_OF", format_utc(third - timedelta(seconds=1)))
    assert due_tick(instance) == []
    monkeypatch.setenv("RADAR_AS_OF", format_utc(third + timedelta(seconds=1)))
    assert [block_of(r) for r in due_tick(instance)] == [["b-down"]]
    # Three collections (the block, b-down's retry, the next slot's block) and the follow-up
    # that made b-down's partition failed after the first; it needed no second one.
    assert len(collection_runs(instance)) == 4


def test_a_retry_not_started_yet_is_not_asked_again_on_the_next_ticks(
    radar_env: dict[str, Path],
    instance: dg.DagsterInstance,
    feed_server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One run per backoff step even before the retry ran: the retry's run waits to start
    (a busy daemon), the Source still looks due at every tick (its state changes only at that
    run's commit), and no tick asks for it again. Dagster dedupes a schedule's run keys only
    among the runs of the same tick, so it is the waiting run that holds the step: without it
    the same step is asked for again."""
    from radar_pipeline.definitions import defs

    write_feed_source(radar_env["vault"], feed_server, "b-down", status=503)
    apply_partitions(instance, tick(source_registry_sensor, instance))
    start = wave_slot(instance, "b-down", T0) + timedelta(minutes=1)
    monkeypatch.setenv("RADAR_AS_OF", format_utc(start))
    assert launch(instance, due_tick(instance)) == {"b-down": False}
    backoff_until = backoff_of("b-down")
    assert isinstance(backoff_until, type(start))
    step = backoff_until + timedelta(seconds=1)
    monkeypatch.setenv("RADAR_AS_OF", format_utc(step))
    [retry] = due_tick(instance)
    assert block_of(retry) == ["b-down"]
    queued = instance.create_run_for_job(
        defs.resolve_job_def(COLLECT_JOB_NAME),
        run_config=retry.run_config,
        tags={**retry.tags, "dagster/run_key": str(retry.run_key)},
        # Created by the tick, not started yet (a queued run needs the daemon's code origin).
        status=dg.DagsterRunStatus.NOT_STARTED,
    )
    for later in (step + timedelta(minutes=1), step + timedelta(minutes=10)):
        monkeypatch.setenv("RADAR_AS_OF", format_utc(later))
        assert due_tick(instance) == []
    # The waiting run is what holds the step: gone (deleted, never run), the step is open again.
    instance.delete_run(queued.run_id)
    assert [block_of(r) for r in due_tick(instance)] == [["b-down"]]
    assert backoff_of("b-down") == backoff_until  # nothing ran: still the same step


@pytest.mark.slow  # a run held open for a few seconds by a slow feed
def test_a_source_held_by_a_run_is_not_asked_again_when_its_slot_rolls_over(
    radar_env: dict[str, Path],
    instance: dg.DagsterInstance,
    feed_server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The double run of a burst: a Source's run waits in the queue (or runs) while its slot
    ends; the next slot's run key is new, the Source still looks due (its state changes only
    at the commit), so a run key per slot alone would launch it a second time."""
    body = rss([{"title": "slow", "guid": "slow", "link": "https://example.com/slow"}])
    feed_server.add("/slow.xml", body, latency_s=4.0)
    from radar_pipeline_tests.vaultkit import write_source

    write_source(radar_env["vault"], "slow", feed_server.url("/slow.xml"))
    apply_partitions(instance, tick(source_registry_sensor, instance))
    boundary = wave_slot(instance, "slow", T0) + SIX_HOURS
    monkeypatch.setenv("RADAR_AS_OF", format_utc(boundary - timedelta(seconds=30)))
    requests = due_tick(instance)
    assert [block_of(r) for r in requests] == [["slow"]]
    outcome: dict[str, bool] = {}
    errors: list[BaseException] = []

    def collect() -> None:
        try:
            outcome.update(launch(instance, requests))
        except BaseException as exc:  # seen by the test, not lost in the thread
            errors.append(exc)

    worker = threading.Thread(target=collect)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while not collection_runs(instance) and time.monotonic() < deadline:
            time.sleep(0.1)
        [run] = collection_runs(instance)
        assert not run.is_finished
        # The slot rolled over while the run still holds the Source: no second run.
        monkeypatch.setenv("RADAR_AS_OF", format_utc(boundary + timedelta(seconds=30)))
        assert due_tick(instance) == []
    finally:
        # A bound on a loaded machine's run (a 4 s feed, the first run's imports), not a target.
        worker.join(timeout=240)
    # A run still going would collect into the next tests' store.
    assert not worker.is_alive(), "the launch thread's run did not end within 240 s"
    assert not errors, errors
    assert outcome == {"slow": True}
    assert due_tick(instance) == []  # collected: not due again in this new slot either
    assert len(collection_runs(instance)) == 1


def test_one_checks_run_follows_the_last_run_of_a_tick(
    radar_env: dict[str, Path],
    instance: dg.DagsterInstance,
    feed_server: FeedServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    vault = radar_env["vault"]
    write_feed_source(vault, feed_server, "a-first")
    # Disabled, of the same cadence: it lies between the two and splits the blocks.
    write_feed_source(vault, feed_server, "m-off", enabled="false")
    write_feed_source(vault, feed_server, "z-down", status=503)
    apply_partitions(instance, tick(source_registry_sensor, instance))
    monkeypatch.setenv("RADAR_AS_OF", format_utc(T0))
    requests = due_tick(instance)
    assert sorted(block_of(r) for r in requests) == [["a-first"], ["z-down"]]
    launch(instance, requests)
    runs = sorted(
        (instance.get_run_record_by_id(r.run_id) for r in collection_runs(instance)),
        key=lambda rec: rec.end_time or 0.0 if rec else 0.0,
    )
    verdicts = []
    for record in runs:
        assert record is not None
        run = record.dagster_run
        sensor = (
            signal_checks_after_collection
            if run.status == dg.DagsterRunStatus.SUCCESS
            else signal_checks_after_failed_collection
        )
        verdicts.append(outcome_for(tick_after(sensor, instance, run.run_id), run.run_id))
    # Two runs, one launch: the first to end waits, the last one asks for the checks.
    first, last = verdicts
    assert isinstance(first, str) and "follow its last run" in first
    assert isinstance(last, dg.RunRequest)
    assert last.run_key == f"checks-after:{requests[0].tags['radar/launch']}"
    assert int(last.tags["dagster/priority"]) < min(
        int(r.tags["dagster/priority"]) for r in requests
    )
    assert last.run_config["ops"]["signal_evidence"]["config"]["as_of"] == format_utc(T0)
