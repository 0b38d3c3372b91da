"""The daily prune of the run history: its op, job and schedule (listed under Automation).

The schedule ticks once a day, at `PRUNE_CRON` (00:30 UTC), and its run prunes by the tick's
clock: the scheduled time, or the `clock` resource's time when one is set (the clock of every
schedule and sensor here, for simulations). A simulation that needs a prune per simulated day
evaluates this schedule itself with that day's clock (`dg.build_schedule_context(
scheduled_execution_time=...)`, as benchmarks/soak.py does); the production cadence is never
bent for it. The run key
`prune-history:<day>` keeps one prune per day of the clock however often it is evaluated.
"""

from datetime import UTC, datetime

import dagster as dg

from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.store.connection import Store
from radar_pipeline.defs import tags
from radar_pipeline.defs.automation import schedule_status
from radar_pipeline.defs.history.prune import prune_run_history
from radar_pipeline.defs.resources import ClockResource, RadarResource

PRUNE_JOB_NAME = "prune_run_history"
PRUNE_OP = "prune_runs"
PRUNE_CRON = "30 0 * * *"


class PruneConfig(dg.Config):
    """The prune's clock (empty: now) and how many days it keeps (-1: the `radar` resource's
    `RADAR_RUN_RETENTION_DAYS`, default 30)."""

    as_of: str = ""
    keep_days: int = -1


def prune_run_config(as_of: datetime | None) -> dict[str, object]:
    return {"ops": {PRUNE_OP: {"config": {"as_of": format_utc(as_of) if as_of else ""}}}}


@dg.op(name=PRUNE_OP)
def prune_run_history_op(
    context: dg.OpExecutionContext, config: PruneConfig, radar: RadarResource
) -> None:
    """Delete the Dagster runs (and their event logs) older than the retention, except those
    a partition, a check or an open dead letter still needs (core/run_history.py)."""
    as_of = parse_utc(config.as_of) if config.as_of else datetime.now(UTC)
    settings = radar.settings()
    keep = config.keep_days if config.keep_days >= 0 else settings.run_retention_days
    result = prune_run_history(context.instance, Store.of(settings.paths), keep, as_of)
    context.log.info(f"run history pruned: {result.to_json()}")


@dg.job(
    name=PRUNE_JOB_NAME,
    executor_def=dg.in_process_executor,
    description=(
        "Keeps the run history bounded: deletes the Dagster runs older than "
        "RADAR_RUN_RETENTION_DAYS (default 30) that no partition, check or open dead letter "
        "still needs."
    ),
)
def prune_run_history_job() -> None:
    """Keeps the run history bounded: runs older than RADAR_RUN_RETENTION_DAYS go."""
    prune_run_history_op()


@dg.schedule(
    job=prune_run_history_job,
    cron_schedule=PRUNE_CRON,
    execution_timezone="UTC",
    default_status=schedule_status(),
    description=(
        "Daily at 00:30 UTC: delete Dagster runs older than RADAR_RUN_RETENTION_DAYS (default "
        "30), except a run holding a partition's latest materialization or failure, a check's "
        "latest result, or an open dead letter. One run per day of its clock."
    ),
)
def run_history_schedule(
    context: dg.ScheduleEvaluationContext, clock: ClockResource
) -> dg.RunRequest | dg.SkipReason:
    """One prune per day of the tick's clock (the `clock` resource's when set, else the
    scheduled time); a day that has its prune run is skipped."""
    scheduled = context.scheduled_execution_time
    now = clock.fixed() or (scheduled.astimezone(UTC) if scheduled else None)
    now = now or datetime.now(UTC)
    key = f"prune-history:{now.date().isoformat()}"
    if context.instance.get_run_ids(dg.RunsFilter(tags={tags.RUN_KEY: key}), limit=1):
        return dg.SkipReason(f"the run history of {now.date().isoformat()} is pruned already")
    # The run judges by the tick's clock, so a simulated day prunes by its own time.
    return dg.RunRequest(run_key=key, run_config=prune_run_config(now))
