"""Evaluating the sensors that follow runs (defs/run_watch.py) as the daemon would: on a real
instance, with the cursor a previous tick left just before a given run ended; and reading
what runs recorded on each Source partition."""

from __future__ import annotations

from typing import Any

import dagster as dg

from radar_pipeline.defs import tags
from radar_pipeline.defs.run_watch import watch_cursor

_END_EVENTS = (dg.DagsterEventType.RUN_SUCCESS, dg.DagsterEventType.RUN_FAILURE)


def end_change_id(instance: dg.DagsterInstance, run_id: str) -> int:
    """The storage id of the status change with which the run ended (success or failure)."""
    for event_type in _END_EVENTS:
        changes = instance.fetch_run_status_changes(event_type, limit=1000).records
        for change in changes:
            if change.run_id == run_id:
                return change.storage_id
    raise AssertionError(f"run {run_id} has not ended")


def tick_after(
    sensor: dg.SensorDefinition,
    instance: dg.DagsterInstance,
    run_id: str,
    resources: dict[str, Any] | None = None,
) -> dg.SensorResult:
    """One tick whose cursor stops just before the run ended: it reads that run and every run
    that ended after it in the same status."""
    cursor = watch_cursor(end_change_id(instance, run_id) - 1, "the test's previous tick")
    context = dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources)
    result = sensor(context)
    assert isinstance(result, dg.SensorResult)
    return result


def outcome_for(result: dg.SensorResult, run_id: str) -> dg.RunRequest | str:
    """What the tick did for one run: the run it requested after it, or the skip reason that
    names it."""
    for request in result.run_requests or []:
        if request.tags.get(tags.AFTER_RUN) == run_id:
            return request
    reason = result.skip_reason.skip_message if result.skip_reason else None
    assert reason and run_id in reason, (run_id, result)
    return reason


def partition_events(
    instance: dg.DagsterInstance, run_ids: list[str]
) -> dict[str, tuple[str | None, dict[str, Any]]]:
    """Each Source partition's last event of the runs (an observation or a materialization):
    its description and its metadata values, as the partition's page shows them."""
    events: dict[str, tuple[str | None, dict[str, Any]]] = {}
    for run_id in run_ids:
        for entry in instance.all_logs(run_id):
            event = entry.dagster_event
            if event is None or event.event_type not in (
                dg.DagsterEventType.ASSET_OBSERVATION,
                dg.DagsterEventType.ASSET_MATERIALIZATION,
            ):
                continue
            data = event.event_specific_data
            record = getattr(data, "asset_observation", None) or getattr(
                data, "materialization", None
            )
            if record is not None and record.partition is not None:
                meta = {k: getattr(v, "value", v) for k, v in record.metadata.items()}
                events[record.partition] = (record.description, meta)
    return events
