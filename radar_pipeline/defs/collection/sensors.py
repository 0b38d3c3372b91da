"""Sensors of collection: due Sources get one run per slot, and a failed run leaves a dead letter.

Why sensors and no schedule for collection: each Source has its own cadence (written in its
file, editable at any time) and its due-ness depends on DuckDB state (lastSuccessAt, backoff).
A schedule has one cron for everything and would have to read the same state anyway. The due
sensor reads the state at evaluation time, so after any downtime it sees each overdue Source
once, now: there is no tick history to replay.
"""

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.plan.collection import SourceTiming, source_timings
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.core.store.dead_letters import record_run_failure
from radar_pipeline.core.store.feed_state import load_states
from radar_pipeline.defs.collection.config import (
    COLLECT_JOB_NAME,
    SIGNALS_KEY,
    collect_run_config,
    config_of,
)
from radar_pipeline.defs.collection.jobs import collect_job
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME
from radar_pipeline.defs.resources import RadarResource

AS_OF_ENV = "RADAR_AS_OF"
TICK_SECONDS = 60
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
PARTITION_TAG = "dagster/partition"


def evaluation_time(environ: Mapping[str, str] | None = None) -> datetime:
    """The sensors' clock: `RADAR_AS_OF` (ISO-8601; simulations and tests), else now (UTC).

    The same variable is passed on to the runs a sensor requests, so the run decides with the
    clock the sensor decided with (as `radar collect --as-of` does for one command).
    """
    env = os.environ if environ is None else environ
    value = env.get(AS_OF_ENV, "").strip()
    return parse_utc(value) if value else datetime.now(UTC)


def run_key(timing: SourceTiming) -> str:
    """`<source>:<due slot>`: one slot of one Source launches at most one run, ever."""
    return f"{timing.source_id}:{format_utc(timing.slot)}"


def queue_priority(timing: SourceTiming) -> int:
    """`dagster/priority` for the run queue (higher first): critical, then primary/discovery,
    then the rest; inside a group high > normal > low."""
    group, within = timing.rank
    return 10 * (2 - group) + (3 - within)


def due_run_request(timing: SourceTiming, as_of: str) -> dg.RunRequest:
    """One per-partition run of `collect_signals` in mode `due` for one Source."""
    clock = parse_utc(as_of) if as_of else None
    return dg.RunRequest(
        run_key=run_key(timing),
        partition_key=timing.source_id,
        run_config=collect_run_config("due", [timing.source_id], clock, "sensor"),
        tags={
            "dagster/priority": str(queue_priority(timing)),
            "radar/trigger": "sensor",
            "radar/mode": "due",
            "radar/slot": format_utc(timing.slot),
        },
    )


def _requested_slots(cursor: str | None) -> dict[str, str]:
    try:
        value = json.loads(cursor) if cursor else {}
    except json.JSONDecodeError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


@dg.sensor(
    job=collect_job,
    minimum_interval_seconds=TICK_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def due_sources_sensor(
    context: dg.SensorEvaluationContext, radar: RadarResource
) -> dg.SensorResult:
    """One run per due Source partition, run key `<source>:<due slot>`, in recovery priority
    order. Due means the planner's rule (`schedule.next_check_at` has come: the Source's next
    grid point, at the latest lastSuccessAt + cadence; not in backoff), read at evaluation
    time: after downtime each overdue Source gets exactly one current run; missed slots are
    never requested. The cursor remembers the last slot requested per Source
    so a repeated tick asks for nothing (the daemon's run-key dedupe is the second guard)."""
    now = evaluation_time()
    paths = radar.paths()
    partitions = set(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    snapshot = load_registry(paths.vault)
    with radar.store().transaction() as con:
        states = load_states(con)
    requested = _requested_slots(context.cursor)
    as_of = os.environ.get(AS_OF_ENV, "").strip()
    run_requests: list[dg.RunRequest] = []
    for timing in source_timings(snapshot, states, now):
        # A Source not yet a partition waits one tick for the registry sensor to add it.
        if not timing.due or timing.source_id not in partitions:
            continue
        slot = format_utc(timing.slot)
        if requested.get(timing.source_id) == slot:
            continue
        run_requests.append(due_run_request(timing, as_of))
        requested[timing.source_id] = slot
    cursor = json.dumps({k: v for k, v in requested.items() if k in partitions}, sort_keys=True)
    if not run_requests:
        return dg.SensorResult(skip_reason=f"no Source due at {format_utc(now)}", cursor=cursor)
    return dg.SensorResult(run_requests=run_requests, cursor=cursor)


def run_sources(
    tags: Mapping[str, str], run_config: Mapping[str, Any], partitions: Sequence[str]
) -> list[str]:
    """The Sources a run covered: its partition, or its partition range (in partition order)
    narrowed to the selection in its config; keys that are not Source partitions are ignored
    (a run of another asset)."""
    if tags.get(PARTITION_TAG):
        keys = [tags[PARTITION_TAG]]
    elif tags.get(RANGE_START_TAG) in partitions and tags.get(RANGE_END_TAG) in partitions:
        start = partitions.index(tags[RANGE_START_TAG])
        end = partitions.index(tags[RANGE_END_TAG])
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
    minimum_interval_seconds=TICK_SECONDS, default_status=dg.DefaultSensorStatus.RUNNING
)
def run_failure_dead_letter_sensor(
    context: dg.RunFailureSensorContext, radar: RadarResource
) -> None:
    """A failed run (crash, killed process, op error) leaves one open dead letter, stage
    `dagster-run`, per Source it covered; the next due tick retries those Sources."""
    run = context.dagster_run
    if not collects_signals(run.job_name, run.asset_selection):
        context.log.info(f"run {run.run_id} of {run.job_name} failed; it collects no Signals")
        return
    partitions = list(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    sources = run_sources(run.tags, run.run_config or {}, partitions)
    if not sources:
        context.log.info(f"run {run.run_id} failed but covered no Source partition")
        return
    message = context.failure_event.message or f"Dagster run {run.run_id} failed"
    added = record_run_failure(radar.store(), run.run_id, sources, message, evaluation_time())
    context.log.info(f"run {run.run_id} failed: {added} dead letters for {', '.join(sources)}")
