"""The evidence snapshot follows the checks: its natural trigger.

`evidence_snapshot` is the report of the checks' verdicts, the inventory and the last
collection, so it is out of date exactly when some check was evaluated again. That happens in
a run (the checks after a collection, the daily audit, the weekly close with its `retention`
check, a check run from the UI), so a run status sensor follows every run that succeeded and
evaluated a check, and asks for one `evidence_snapshot` run after it. Not an automation
condition: `eager()` waits while any upstream partition is missing (a Source that never
succeeded is a missing partition forever) and reacts to materializations, not to check
results; and the asset daemon it needs is off in dagster.yaml.
"""

import dagster as dg

from radar_pipeline.defs import tags
from radar_pipeline.defs.automation import TICK_SECONDS, sensor_status
from radar_pipeline.defs.evidence.jobs import evidence_snapshot_job


def evaluated_checks(instance: dg.DagsterInstance, run_id: str) -> int:
    """How many asset check evaluations the run recorded."""
    return len(instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION))


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    request_job=evidence_snapshot_job,
    minimum_interval_seconds=TICK_SECONDS,
    default_status=sensor_status(),
    description=(
        "After each run that evaluated asset checks (the checks after a collection, the daily "
        "audit, the weekly close): one run of `evidence_snapshot_job`, so the evidence "
        "snapshot shows the verdicts just recorded."
    ),
)
def evidence_after_checks(context: dg.RunStatusSensorContext) -> dg.RunRequest | dg.SkipReason:
    """One `evidence_snapshot` run per run that evaluated checks; other runs are skipped with
    the reason."""
    run = context.dagster_run
    if run.job_name == evidence_snapshot_job.name:
        return dg.SkipReason(f"run {run.run_id} is an evidence snapshot")
    evaluated = evaluated_checks(context.instance, run.run_id)
    if not evaluated:
        return dg.SkipReason(f"run {run.run_id} of {run.job_name} evaluated no check")
    return dg.RunRequest(
        run_key=f"evidence-after:{run.run_id}",
        tags={tags.AFTER_RUN: run.run_id, tags.PRIORITY: str(tags.EVIDENCE_CHECKS_PRIORITY)},
    )
