"""The weekly close: a weekly-partitioned asset, its job and schedule.

A partition is the week (starting Sunday, UTC) in which a close happens, its key that Sunday's
date. The partitions are dynamic (`weeks`): a week becomes a partition when a close of it is
launched (the schedule's Sunday 00:00 tick, or `radar cleanup`), so the asset's partitions
start at the vault's first closed week and every one of them was attempted; a time-window
definition would need its first week at definitions load, which is data (the vault's first
collection) that differs per vault and is not known then, and every week before it would
show as missing. A week the machine was off on Sunday is not a partition at all; the
`retention` check still sees what that week left in Temporary Content.
"""

from datetime import UTC, datetime, timedelta

import dagster as dg

from radar_pipeline.core.clock import as_of_or_now, format_utc
from radar_pipeline.core.store.closes import record_close
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.vault.cleanup import close_temporary_content
from radar_pipeline.defs.automation import schedule_status
from radar_pipeline.defs.resources import RadarResource

WEEKLY_CLEANUP_JOB_NAME = "weekly_cleanup_job"
WEEKS_PARTITIONS_NAME = "weeks"
WEEKLY_CLEANUP_CRON = "0 0 * * 0"  # Sunday 00:00 UTC: the first instant of a week

weekly_partitions = dg.DynamicPartitionsDefinition(name=WEEKS_PARTITIONS_NAME)


def week_of(as_of: datetime) -> str:
    """The week partition key (its Sunday, `YYYY-MM-DD`, UTC) of the week containing `as_of`."""
    day = as_of.astimezone(UTC).date()
    return (day - timedelta(days=(day.weekday() + 1) % 7)).isoformat()


def add_week(instance: dg.DagsterInstance, week: str) -> None:
    """Make `week` a partition of `weekly_cleanup` (nothing when it is one already)."""
    if not instance.has_dynamic_partition(WEEKS_PARTITIONS_NAME, week):
        instance.add_dynamic_partitions(WEEKS_PARTITIONS_NAME, [week])


class CleanupConfig(dg.Config):
    """The clock of the close; empty means now (scheduled runs)."""

    as_of: str = ""


@dg.asset(partitions_def=weekly_partitions, group_name="cleanup")
def weekly_cleanup(
    context: dg.AssetExecutionContext, config: CleanupConfig, radar: RadarResource
) -> dg.MaterializeResult:  # type: ignore[type-arg]
    """The weekly close of Temporary Content: every file under `Radar/Temporary Content/` is
    deleted (links as links, never followed), nothing else is touched, and the close is
    recorded in DuckDB `cleanup_runs` with files and bytes deleted and files retained (0).
    Refuses, deleting nothing, if the folder is a link or resolves outside the vault."""
    paths = radar.paths()
    closed_at = as_of_or_now(config.as_of)
    result = close_temporary_content(paths.vault)
    record = record_close(Store.of(paths), result, closed_at, context.partition_key)
    for refused in result.refused:
        context.log.warning(f"kept in Temporary Content: {refused}")
    kept = "\n".join(f"| `{r}` |" for r in result.refused) or "| – |"
    return dg.MaterializeResult(
        metadata={
            "deleted": result.deleted,
            "bytes": result.bytes,
            "retained": result.retained,
            "closed_at": format_utc(closed_at),
            "cleanup_id": record.cleanup_id,
            "kept": dg.MetadataValue.md(f"| entry kept, and why |\n|---|\n{kept}"),
            "refused": dg.MetadataValue.json(list(result.refused)),
        }
    )


weekly_cleanup_job = dg.define_asset_job(
    WEEKLY_CLEANUP_JOB_NAME,
    selection=dg.AssetSelection.assets(weekly_cleanup),
    executor_def=dg.in_process_executor,
    description="The weekly close of Temporary Content for one week (a partition of `weeks`).",
)


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
