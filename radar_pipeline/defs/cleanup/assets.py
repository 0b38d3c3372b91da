"""The weekly close: a weekly-partitioned asset, its job and schedule.

A partition is the week (starting Sunday, UTC) in which a close happens. `end_offset=1` makes
the running week a partition, so the schedule's Sunday 00:00 tick and `radar cleanup` both
materialize the week of their own clock.
"""

from datetime import datetime

import dagster as dg

from radar_pipeline.core.clock import as_of_or_now, format_utc
from radar_pipeline.core.store.closes import record_close
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.vault.cleanup import close_temporary_content
from radar_pipeline.defs.resources import RadarResource

WEEKLY_CLEANUP_JOB_NAME = "weekly_cleanup_job"
FIRST_WEEK = "2025-01-05"  # a Sunday; the first week a close can be recorded for

weekly_partitions = dg.WeeklyPartitionsDefinition(
    start_date=FIRST_WEEK, timezone="UTC", end_offset=1
)


def week_of(as_of: datetime) -> str:
    """The weekly partition key (its Sunday, UTC) of the week containing `as_of`."""
    key = weekly_partitions.get_partition_key_for_timestamp(as_of.timestamp())
    return str(key)


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
    partitions_def=weekly_partitions,
    executor_def=dg.in_process_executor,
)

weekly_cleanup_schedule = dg.build_schedule_from_partitioned_job(
    weekly_cleanup_job,
    name="weekly_cleanup_schedule",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
