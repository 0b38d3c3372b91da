"""The weekly close: a weekly-partitioned asset, its job and schedule, and the CLI launcher.

A partition is the week (starting Sunday, UTC) in which a close happens. `end_offset=1` makes
the running week a partition, so the schedule's Sunday 00:00 tick and `radar cleanup` both
materialize the week of their own clock.
"""

from datetime import UTC, datetime
from typing import Any

import dagster as dg

from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.errors import CleanupRefused, RadarError
from radar_pipeline.core.store.closes import record_close
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.vault.cleanup import close_temporary_content
from radar_pipeline.defs.resources import RadarResource

WEEKLY_CLEANUP_JOB_NAME = "weekly_cleanup_job"
FIRST_WEEK = "2025-01-05"  # a Sunday; the first week a close can be recorded for

weekly_partitions = dg.WeeklyPartitionsDefinition(
    start_date=FIRST_WEEK, timezone="UTC", end_offset=1
)


class CleanupConfig(dg.Config):
    """The clock of the close; empty means now (scheduled runs)."""

    as_of: str = ""


@dg.asset(partitions_def=weekly_partitions, group_name="radar")
def weekly_cleanup(
    context: dg.AssetExecutionContext, config: CleanupConfig, radar: RadarResource
) -> dg.MaterializeResult:  # type: ignore[type-arg]
    """The weekly close of Temporary Content: every file under `Radar/Temporary Content/` is
    deleted (links as links, never followed), nothing else is touched, and the close is
    recorded in DuckDB `cleanup_runs` with files and bytes deleted and files retained (0).
    Refuses, deleting nothing, if the folder is a link or resolves outside the vault."""
    paths = radar.paths()
    closed_at = parse_utc(config.as_of) if config.as_of else datetime.now(UTC)
    result = close_temporary_content(paths.vault)
    record = record_close(Store(paths.db), result, closed_at, context.partition_key)
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


class CleanupFailed(RadarError):
    """The close's Dagster run failed for a reason other than a refusal."""

    stage = "cleanup"


def week_of(as_of: datetime) -> str:
    """The weekly partition key (its Sunday, UTC) of the week containing `as_of`."""
    key = weekly_partitions.get_partition_key_for_timestamp(as_of.timestamp())
    return str(key)


def launch_cleanup(instance: dg.DagsterInstance, as_of: datetime) -> dict[str, Any]:
    """Materialize the week of `as_of` in this process (one Dagster run, its retention check
    after it) on the vault and DuckDB of the environment (`RADAR_VAULT`, `RADAR_DB`).

    Returns `{"deleted", "bytes", "retained"}` plus the week, clock, kept entries and run id.
    Raises CleanupRefused (nothing deleted) when the close refuses the layout, or when the
    week is not a partition (before FIRST_WEEK or after the running week).
    """
    from radar_pipeline.definitions import defs

    week = week_of(as_of)
    now_week = week_of(datetime.now(UTC))
    if week < FIRST_WEEK or week > now_week:
        raise CleanupRefused(
            f"--as-of {format_utc(as_of)} falls in week {week}, which has no weekly partition "
            f"(weeks run from {FIRST_WEEK} to the running week {now_week}); nothing was deleted"
        )
    job = defs.resolve_job_def(WEEKLY_CLEANUP_JOB_NAME)
    run_config = {
        "ops": {"weekly_cleanup": {"config": {"as_of": format_utc(as_of)}}},
        # The failure is raised below as one clear line; Dagster's own account (with its
        # traceback) stays in the run's log in the UI, not on the terminal.
        "loggers": {"console": {"config": {"log_level": "CRITICAL"}}},
    }
    result = job.execute_in_process(
        run_config=run_config,
        instance=instance,
        partition_key=week,
        tags={"radar/trigger": "cli"},
        raise_on_error=False,
    )
    if not result.success:
        raise _run_failure(result)
    [mat] = result.asset_materializations_for_node("weekly_cleanup")
    meta = mat.metadata
    return {
        "deleted": int(meta["deleted"].value),  # type: ignore[arg-type]
        "bytes": int(meta["bytes"].value),  # type: ignore[arg-type]
        "retained": int(meta["retained"].value),  # type: ignore[arg-type]
        "week": week,
        "closedAt": format_utc(as_of),
        "refused": list(meta["refused"].value),  # type: ignore[arg-type]
        "dagsterRunId": result.run_id,
    }


def _run_failure(result: dg.ExecuteInProcessResult) -> RadarError:
    """The failed run's root cause as one line: a refusal keeps its own message."""
    for event in result.all_events:
        if not event.is_step_failure or event.event_specific_data is None:
            continue
        error = event.event_specific_data.error  # type: ignore[union-attr]
        while error is not None and error.cause is not None:
            error = error.cause
        if error is None:
            continue
        message = str(error.message).strip().splitlines()[-1].split(": ", 1)[-1]
        if error.cls_name == "CleanupRefused":
            return CleanupRefused(message.removeprefix("cleanup: "))
        return CleanupFailed(f"{message} (Dagster run {result.run_id})")
    return CleanupFailed(f"Dagster run {result.run_id} failed; see the Dagster UI")
