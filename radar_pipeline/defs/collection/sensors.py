"""Sensors of collection: a run that died leaves a dead letter per Source it covered.

Due Sources are requested by `due_sources_schedule` (schedules.py), which reads the same
clock (the `clock` resource) as the sensors here.
"""

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dagster as dg

from radar_pipeline.core.store.dead_letters import record_run_failure
from radar_pipeline.defs import tags
from radar_pipeline.defs.automation import TICK_SECONDS, sensor_status
from radar_pipeline.defs.collection.config import (
    COLLECT_JOB_NAME,
    SIGNALS_KEY,
    config_of,
    failed_sources_of,
)
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME
from radar_pipeline.defs.resources import ClockResource, RadarResource


def run_sources(
    run_tags: Mapping[str, str], run_config: Mapping[str, Any], partitions: Sequence[str]
) -> list[str]:
    """The Sources a run covered: its partition, or its partition range (in partition order)
    narrowed to the selection in its config; keys that are not Source partitions are ignored
    (a run of another asset). A launcher's config may also name Sources it expected to skip
    (in backoff), outside the range: they are not the run's to check, so not counted here."""
    if run_tags.get(tags.PARTITION):
        keys = [run_tags[tags.PARTITION]]
    elif (
        run_tags.get(tags.RANGE_START) in partitions and run_tags.get(tags.RANGE_END) in partitions
    ):
        start = partitions.index(run_tags[tags.RANGE_START])
        end = partitions.index(run_tags[tags.RANGE_END])
        keys = list(partitions[start : end + 1])
    else:
        keys = []
    config = config_of(run_config)
    selected = config.sources if config is not None else []
    if selected:
        keys = [k for k in keys if k in set(selected)]
    return [k for k in keys if k in set(partitions)]


def collects_signals(job_name: str, asset_selection: Iterable[dg.AssetKey] | None) -> bool:
    """A run that collects Signals: the `collect_signals` job, or an asset job (UI
    materialization, backfill) that selects `signals` itself. Check-only runs (the `on_cadence`
    and evidence checks) carry a Source partition too but collect nothing."""
    return job_name == COLLECT_JOB_NAME or SIGNALS_KEY in set(asset_selection or ())


@dg.run_failure_sensor(
    minimum_interval_seconds=TICK_SECONDS,
    default_status=sensor_status(),
    description=(
        "After a collection run that failed as a whole (crash, killed process, an error "
        "before its commit): one open dead letter per Source it covered (`radar dlq list`). "
        "A tick that records some succeeds (the run's log names the sensor); one that needs "
        "none is skipped with the reason."
    ),
)
def run_failure_dead_letter_sensor(
    context: dg.RunFailureSensorContext, radar: RadarResource, clock: ClockResource
) -> dg.SkipReason | None:
    """A failed run leaves one open dead letter, stage `dagster-run`, per Source it covered,
    when it failed as a whole (a crash, a killed process, an op error before the commit); the
    next due slot retries those Sources. A run that failed because some of its Sources failed
    adds nothing: its commit already recorded each failure (dead letter, health, DuckDB).
    Returns the reason when it records nothing (the tick shows it as skipped)."""
    run = context.dagster_run
    if not collects_signals(run.job_name, run.asset_selection):
        return dg.SkipReason(f"run {run.run_id} of {run.job_name} failed; it collects no Signals")
    recorded = failed_sources_of(context.instance, run.run_id)
    if recorded is not None:
        return dg.SkipReason(
            f"run {run.run_id} failed because Sources failed ({', '.join(recorded)}); "
            "their failures are recorded already"
        )
    partitions = list(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    sources = run_sources(run.tags, run.run_config or {}, partitions)
    if not sources:
        return dg.SkipReason(f"run {run.run_id} failed but covered no Source partition")
    message = context.failure_event.message or f"Dagster run {run.run_id} failed"
    added = record_run_failure(radar.store(), run.run_id, sources, message, clock.now())
    context.log.info(f"run {run.run_id} failed: {added} dead letters for {', '.join(sources)}")
    return None
