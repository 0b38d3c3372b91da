"""Launching the weekly close from a command: one run of `weekly_cleanup_job` in this process."""

from datetime import datetime

import dagster as dg

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.config import Settings
from radar_pipeline.core.contract.operations import CleanupOutput
from radar_pipeline.core.errors import CleanupRefused, RadarError
from radar_pipeline.defs import tags
from radar_pipeline.defs.cleanup.jobs import WEEKLY_CLEANUP_JOB_NAME
from radar_pipeline.defs.cleanup.partitions import add_week, week_of
from radar_pipeline.defs.resources import settings_run_config, with_resources


class CleanupFailed(RadarError):
    """The close's Dagster run failed for a reason other than a refusal."""

    stage = "cleanup"


def launch_cleanup(
    defs: dg.Definitions,
    instance: dg.DagsterInstance,
    as_of: datetime,
    now: datetime | None = None,
    settings: Settings | None = None,
) -> CleanupOutput:
    """Materialize the week of `as_of` in this process (one Dagster run, its retention check
    after it) on the vault and DuckDB of the environment (`RADAR_VAULT`, `RADAR_DB`).

    Returns what was deleted and retained, with the week, clock, kept entries and run id.
    The week becomes a partition of `weekly_cleanup` first (the partitions are the weeks a
    close was launched for). Raises CleanupRefused (nothing deleted) when the close refuses
    the layout, or when the week is after the running week (the week of `now`: the caller's
    reading of the wall clock; None: `as_of` is that reading). `settings`: those the caller
    read (the `radar` command), handed to the run as its `radar` resource's config.
    """
    week = week_of(as_of)
    now_week = week_of(as_of if now is None else now)
    if week > now_week:
        raise CleanupRefused(
            f"--as-of {format_utc(as_of)} falls in week {week}, after the running week "
            f"{now_week}: a week is closed when it starts, not before; nothing was deleted"
        )
    add_week(instance, week)
    job = defs.resolve_job_def(WEEKLY_CLEANUP_JOB_NAME)
    run_config = {
        "ops": {"weekly_cleanup": {"config": {"as_of": format_utc(as_of)}}},
        # The failure is raised below as one clear line; Dagster's own account (with its
        # traceback) stays in the run's log in the UI, not on the terminal.
        "loggers": {"console": {"config": {"log_level": "CRITICAL"}}},
    }
    if settings is not None:
        run_config = with_resources(run_config, settings_run_config(settings))
    result = job.execute_in_process(
        run_config=run_config,
        instance=instance,
        partition_key=week,
        tags={tags.TRIGGER: "cli"},
        raise_on_error=False,
    )
    if not result.success:
        raise _run_failure(result)
    [mat] = result.asset_materializations_for_node("weekly_cleanup")
    meta = mat.metadata
    return CleanupOutput(
        deleted=int(meta["deleted"].value),  # type: ignore[arg-type]
        bytes=int(meta["bytes"].value),  # type: ignore[arg-type]
        retained=int(meta["retained"].value),  # type: ignore[arg-type]
        week=week,
        closed_at=format_utc(as_of),
        refused=tuple(meta["refused"].value),  # type: ignore[arg-type]
        dagster_run_id=result.run_id,
    )


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
