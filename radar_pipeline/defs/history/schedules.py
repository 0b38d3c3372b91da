"""The daily prune of the run history: its schedule (listed under Automation; the job is in
jobs.py).

The schedule ticks once a day, at `PRUNE_CRON` (00:30 UTC), and its run prunes by the tick's
clock: the scheduled time, or `RADAR_AS_OF` when set (the clock of every schedule and sensor
here, for simulations). A simulation that needs a prune per simulated day evaluates this
schedule itself with that day's clock (`dg.build_schedule_context(scheduled_execution_time=
...)`, as benchmarks/soak.py does); the production cadence is never bent for it. The run key
`prune-history:<day>` keeps one prune per day of the clock however often it is evaluated.
"""

from datetime import UTC, datetime

import dagster as dg

from radar_pipeline.core.config import Settings
from radar_pipeline.defs import tags
from radar_pipeline.defs.automation import schedule_status
from radar_pipeline.defs.history.jobs import prune_run_config, prune_run_history_job

PRUNE_CRON = "30 0 * * *"


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
def run_history_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
    """One prune per day of the tick's clock (`RADAR_AS_OF`, else the scheduled time); a day
    that has its prune run is skipped."""
    scheduled = context.scheduled_execution_time
    now = Settings.from_env().as_of or (scheduled.astimezone(UTC) if scheduled else None)
    now = now or datetime.now(UTC)
    key = f"prune-history:{now.date().isoformat()}"
    if context.instance.get_run_ids(dg.RunsFilter(tags={tags.RUN_KEY: key}), limit=1):
        return dg.SkipReason(f"the run history of {now.date().isoformat()} is pruned already")
    # The run judges by the tick's clock, so a simulated day prunes by its own time.
    return dg.RunRequest(run_key=key, run_config=prune_run_config(now))
