"""The weekly close's schedule: Sunday 00:00 UTC, the first instant of a week."""

from datetime import UTC, datetime

import dagster as dg

from radar_pipeline.defs.automation import schedule_status
from radar_pipeline.defs.cleanup.jobs import weekly_cleanup_job
from radar_pipeline.defs.cleanup.partitions import add_week, week_of

WEEKLY_CLEANUP_CRON = "0 0 * * 0"  # Sunday 00:00 UTC: the first instant of a week


@dg.schedule(
    job=weekly_cleanup_job,
    cron_schedule=WEEKLY_CLEANUP_CRON,
    execution_timezone="UTC",
    default_status=schedule_status(),
    description=(
        "Weekly, Sunday 00:00 UTC: closes the week that starts then (empties Temporary "
        "Content), adding that week as a `weekly_cleanup` partition; its `retention` check "
        "runs in the same run."
    ),
)
def weekly_cleanup_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    """The week of the tick becomes a partition, and its close is requested (once per week:
    the run key is the week)."""
    tick = context.scheduled_execution_time or datetime.now(UTC)
    week = week_of(tick)
    add_week(context.instance, week)
    return dg.RunRequest(run_key=f"weekly-cleanup:{week}", partition_key=week)
