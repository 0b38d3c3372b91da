"""The evidence snapshot follows the checks: its natural trigger.

`evidence_snapshot` is the report of the checks' verdicts, the inventory and the last
collection, so it is out of date exactly when some check was evaluated again. That happens in
a run (the checks after a collection, the daily audit, the weekly close with its `retention`
check, a check run from the UI), so a sensor follows every run that succeeded and evaluated a
check (through defs/run_watch.py, so that an idle tick says so too), and asks for one
`evidence_snapshot` run after it. Not an automation
condition: `eager()` waits while any upstream partition is missing (a Source that never
succeeded is a missing partition forever) and reacts to materializations, not to check
results; and the asset daemon it needs is off in dagster.yaml.
"""

import dagster as dg

from radar_pipeline.defs import tags
from radar_pipeline.defs.automation import TICK_SECONDS, sensor_status
from radar_pipeline.defs.evidence.jobs import evidence_snapshot_job
from radar_pipeline.defs.run_watch import runs_ended, tick_result


def evaluated_checks(instance: dg.DagsterInstance, run_id: str) -> int:
    """How many asset check evaluations the run recorded."""
    return len(instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION))


@dg.sensor(
    job=evidence_snapshot_job,
    minimum_interval_seconds=TICK_SECONDS,
    default_status=sensor_status(),
    description=(
        "After each run that evaluated asset checks (the checks after a collection, the daily "
        "audit, the weekly close): one run of `evidence_snapshot_job`, so the evidence "
        "snapshot shows the verdicts just recorded. A tick that requests none names each run "
        'it read and why; an idle tick reads "no run succeeded since <time>".'
    ),
)
def evidence_after_checks(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """One `evidence_snapshot` run per run that succeeded and evaluated checks; the tick names
    the other runs it read and why they need none (defs/run_watch.py)."""
    watch = runs_ended(context, dg.DagsterRunStatus.SUCCESS)
    outcomes = [_evidence_after(context.instance, e.run) for e in watch.ended]
    return tick_result(context, watch, outcomes)


def _evidence_after(instance: dg.DagsterInstance, run: dg.DagsterRun) -> dg.RunRequest | str:
    """The evidence snapshot run after a run that evaluated checks, or why it needs none."""
    if run.job_name == evidence_snapshot_job.name:
        return f"run {run.run_id} is an evidence snapshot"
    if not evaluated_checks(instance, run.run_id):
        return f"run {run.run_id} of {run.job_name} evaluated no check"
    return dg.RunRequest(
        run_key=f"evidence-after:{run.run_id}",
        tags={tags.AFTER_RUN: run.run_id, tags.PRIORITY: str(tags.EVIDENCE_CHECKS_PRIORITY)},
    )
