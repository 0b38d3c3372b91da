"""The collection schedule: every minute, one run per due Source partition.

One schedule for every Source, not one per Source: each Source's cadence is written in its
file (editable at any time) and its due-ness depends on DuckDB state (lastSuccessAt,
backoff), so a cron per Source would have to be rebuilt whenever a file changes and would
still have to read the same state. Instead the schedule ticks every minute and asks the
planner's due rule (core/plan: each Source on its own grid of stable offsets) which Sources
are due now. Each due Source gets one run with run key `<source>:<due slot>`, so a slot never
launches twice, however often the schedule ticks, and a Source still due a minute later (its
run queued, or failed and out of backoff within the same slot) is not asked for again.

No replay: after any downtime the daemon evaluates only the latest tick of this schedule
(Dagster does not catch up missed ticks of a schedule without a partition set), and that tick
reads the state now: each overdue Source gets exactly one current run, whatever number of its
slots went by.
"""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg

from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.config import Settings
from radar_pipeline.core.plan.collection import SourceTiming, source_timings
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.core.store.feed_state import load_states
from radar_pipeline.defs.collection.config import collect_run_config
from radar_pipeline.defs.collection.jobs import collect_job
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME
from radar_pipeline.defs.resources import RadarResource

COLLECT_CRON = "* * * * *"
RUN_KEY_TAG = "dagster/run_key"
TRIGGER = "schedule"


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
        run_config=collect_run_config("due", [timing.source_id], clock, TRIGGER),
        tags={
            "dagster/priority": str(queue_priority(timing)),
            "radar/trigger": TRIGGER,
            "radar/mode": "due",
            "radar/slot": format_utc(timing.slot),
        },
    )


def schedule_clock(context: dg.ScheduleEvaluationContext) -> tuple[datetime, str]:
    """The tick's clock and the `as_of` its runs get: `RADAR_AS_OF` (simulations and tests;
    the runs decide with the same clock), else the tick's scheduled time (runs use now)."""
    as_of = Settings.from_env().as_of_text
    if as_of:
        return parse_utc(as_of), as_of
    scheduled = context.scheduled_execution_time
    return (scheduled.astimezone(UTC) if scheduled else datetime.now(UTC)), ""


def _spent(instance: dg.DagsterInstance, key: str) -> bool:
    """A run with this run key exists already (launched by this schedule or an earlier one)."""
    return bool(instance.get_run_ids(dg.RunsFilter(tags={RUN_KEY_TAG: key}), limit=1))


@dg.schedule(
    job=collect_job,
    cron_schedule=COLLECT_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description=(
        "Every minute: one run of `collect_signals` per due Source partition (its cadence "
        "passed on its own grid, not in backoff), run key `<source>:<due slot>`, critical "
        "Sources first. Missed ticks are never replayed: after downtime, one run per overdue "
        "Source."
    ),
)
def due_sources_schedule(
    context: dg.ScheduleEvaluationContext, radar: RadarResource
) -> list[dg.RunRequest] | dg.SkipReason:
    """One run per due Source partition whose slot has no run yet, in recovery priority order
    (critical, then primary/discovery, then the rest). A Source that is not yet a partition
    waits one tick for the registry sensor to add it."""
    now, as_of = schedule_clock(context)
    paths = radar.paths()
    partitions = set(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    snapshot = load_registry(paths.vault)
    with radar.store().transaction() as con:
        states = load_states(con)
    requests = [
        due_run_request(timing, as_of)
        for timing in source_timings(snapshot, states, now)
        if timing.due
        and timing.source_id in partitions
        and not _spent(context.instance, run_key(timing))
    ]
    if not requests:
        return dg.SkipReason(f"no Source due at {format_utc(now)} without a run in its slot")
    return requests
