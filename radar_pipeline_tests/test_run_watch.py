"""The sensors that follow runs say what each tick saw (defs/run_watch.py): evaluated on a real
Dagster instance in a temp dir, with the cursor each tick leaves handed to the next, as the
daemon does. No tick is left with Dagster's "Sensor function returned an empty result"."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from radar_pipeline.core.clock import format_utc
from radar_pipeline.defs.collection.sensors import (
    failed_partitions_sensor,
    run_failure_dead_letter_sensor,
    signal_checks_after_collection,
    signal_checks_after_failed_collection,
)
from radar_pipeline.defs.evidence.sensors import evidence_after_checks
from radar_pipeline.defs.resources import ClockResource, RadarResource
from radar_pipeline.defs.run_watch import watch_cursor

_END_EVENT = {
    dg.DagsterRunStatus.SUCCESS: dg.DagsterEventType.RUN_SUCCESS,
    dg.DagsterRunStatus.FAILURE: dg.DagsterEventType.RUN_FAILURE,
}
SINCE = re.compile(r"^first tick: following runs that (\w+) from now \((\S+)\); earlier runs")


@dg.op
def passes() -> None:
    """Does nothing, successfully."""


@dg.op
def breaks() -> None:
    raise RuntimeError("the probe broke")


@dg.job
def probe_ok() -> None:
    passes()


@dg.job
def probe_broken() -> None:
    breaks()


@dg.asset
def probe_asset() -> int:
    return 1


@dg.asset_check(asset=probe_asset)
def probe_check() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True)


@pytest.fixture
def instance(radar_env: dict[str, Path]) -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test(temp_dir=str(radar_env["home"])) as inst:
        yield inst


def end_run(instance: dg.DagsterInstance, status: dg.DagsterRunStatus) -> str:
    """A real run of a probe job that ends in `status`; its id."""
    job = probe_ok if status == dg.DagsterRunStatus.SUCCESS else probe_broken
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert instance.get_run_by_id(result.run_id).status == status  # type: ignore[union-attr]
    return result.run_id


def evaluate(
    sensor: dg.SensorDefinition, instance: dg.DagsterInstance, cursor: str | None
) -> dg.SensorResult:
    resources = {"radar": RadarResource(), "clock": ClockResource()}
    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources)
    result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def reason(result: dg.SensorResult) -> str:
    assert not result.run_requests
    assert result.skip_reason is not None and result.skip_reason.skip_message
    assert "empty result" not in result.skip_reason.skip_message
    return result.skip_reason.skip_message


SENSORS: list[Any] = [
    (run_failure_dead_letter_sensor, dg.DagsterRunStatus.FAILURE, "collects no Signals"),
    (signal_checks_after_collection, dg.DagsterRunStatus.SUCCESS, "collected no Signals"),
    (signal_checks_after_failed_collection, dg.DagsterRunStatus.FAILURE, "collected no Signals"),
    (failed_partitions_sensor, dg.DagsterRunStatus.FAILURE, "names no Source to re-state"),
    (evidence_after_checks, dg.DagsterRunStatus.SUCCESS, "evaluated no check"),
]


@pytest.mark.parametrize(("sensor", "status", "why"), SENSORS, ids=lambda v: str(v)[:40])
def test_a_tick_says_what_it_saw(
    instance: dg.DagsterInstance, sensor: dg.SensorDefinition, status: dg.DagsterRunStatus, why: str
) -> None:
    verb = "succeeded" if status == dg.DagsterRunStatus.SUCCESS else "failed"
    before = end_run(instance, status)  # ended before the first tick: not replayed
    first = evaluate(sensor, instance, None)
    found = SINCE.match(reason(first))
    assert found and found.group(1) == verb, reason(first)
    assert before not in reason(first)

    idle = evaluate(sensor, instance, first.cursor)
    assert reason(idle) == f"no run {verb} since {found.group(2)}"
    assert idle.cursor == first.cursor

    run_id = end_run(instance, status)
    other = dg.DagsterRunStatus.FAILURE if verb == "succeeded" else dg.DagsterRunStatus.SUCCESS
    end_run(instance, other)  # another status: not this sensor's
    seen = evaluate(sensor, instance, idle.cursor)
    assert reason(seen) == f"1 run(s) {verb}: run {run_id} of {_job(verb)} {why}"
    # The next idle tick counts from the end of the run just read.
    [ended] = instance.all_logs(run_id, of_type=_END_EVENT[status])
    since = format_utc(datetime.fromtimestamp(ended.timestamp, UTC))
    assert reason(evaluate(sensor, instance, seen.cursor)) == f"no run {verb} since {since}"


def _job(verb: str) -> str:
    return probe_ok.name if verb == "succeeded" else probe_broken.name


def test_a_tick_that_requests_logs_the_other_runs(
    instance: dg.DagsterInstance, capfd: pytest.CaptureFixture[str]
) -> None:
    first = evaluate(evidence_after_checks, instance, None)
    plain = end_run(instance, dg.DagsterRunStatus.SUCCESS)
    checked = dg.materialize([probe_asset, probe_check], instance=instance).run_id
    capfd.readouterr()
    tick = evaluate(evidence_after_checks, instance, first.cursor)
    logged = capfd.readouterr().err  # the sensor's log (Dagster's handler writes to stderr)
    [request] = tick.run_requests or []
    assert request.run_key == f"evidence-after:{checked}"
    assert tick.skip_reason is None
    assert f"run {plain} of {probe_ok.name} evaluated no check" in logged
    # Handled: the next tick reads neither run again.
    assert reason(evaluate(evidence_after_checks, instance, tick.cursor)).startswith("no run ")


def test_a_cursor_left_by_the_run_status_sensor_is_read_on(instance: dg.DagsterInstance) -> None:
    """An instance that ran these sensors as `run_status_sensor`s keeps their cursor: the first
    tick after the change reads on from its record id instead of starting over."""
    first = evaluate(signal_checks_after_collection, instance, None)
    after = int(json.loads(first.cursor or "")["after"])
    legacy = json.dumps(
        {
            "__class__": "RunStatusSensorCursor",
            "record_id": after,
            "record_timestamp": "2026-12-03T23:10:04+00:00",
            "update_timestamp": None,
        }
    )
    run_id = end_run(instance, dg.DagsterRunStatus.SUCCESS)
    seen = evaluate(signal_checks_after_collection, instance, legacy)
    assert run_id in reason(seen) and "collected no Signals" in reason(seen)
    assert seen.cursor != watch_cursor(after, "2026-12-03T23:10:04+00:00")


def test_a_run_from_elsewhere_is_named_not_followed(instance: dg.DagsterInstance) -> None:
    """A sensor of a code location follows only the runs launched from it (the daemon's
    context names its repository; an in-process run has none): the tick says so."""
    first = evaluate(evidence_after_checks, instance, None)
    run_id = end_run(instance, dg.DagsterRunStatus.SUCCESS)
    context = dg.build_sensor_context(
        instance=instance, cursor=first.cursor, repository_name="__repository__"
    )
    result = evidence_after_checks(context)
    assert isinstance(result, dg.SensorResult)
    assert (
        f"run {run_id} of {probe_ok.name} ran in another process (its launcher follows it)"
        in reason(result)
    )
