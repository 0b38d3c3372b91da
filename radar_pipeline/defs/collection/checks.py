"""The evidence checks on `signals`, and how they follow every collection.

The checks are unpartitioned although `signals` is partitioned by Source: a collection is one
range run over many Source partitions, and in a range run Dagster keeps partitioned check
records PLANNED and accepts one result per check. So each check judges the whole vault and
DuckDB and is stored with `partition=None`: one verdict over all Sources.

They run one way: as the `signal_checks` job, after the collection run that changed what they
judge. `radar collect` runs that job itself right after its collection (and tags its run so);
for every other collection run (schedule, backfill, UI) a run status sensor requests it:
`signal_checks_after_collection` after a successful run, `signal_checks_after_failed_collection`
after a run that failed only because some of its Sources failed (its commit went through, so
the vault and DuckDB changed). A run that died before its commit changed nothing to judge.
The runs of one launch (one tick of the schedule: a run per block of due Sources) share a
`radar/launch` tag and are followed by one checks run, requested when the last of them ends;
check runs queue behind every collection (`dagster/priority`, defs/tags.py).
From the UI, any check can also be run alone.

How far the checks after a collection read the Signals folder: incrementally
(`AuditScope.full = False`, set by `checks_run_config`). They stat no file when the folder's
directory mtime is as recorded (core/vault/folder_state.py), so a Signal rewritten in place
outside the pipeline is not seen by them; it is seen by the next full read: the daily
`signal_audit` run (`signal_audit_schedule`), `radar report`, or any check run by hand (a
check's default is the full read). Each result's metadata says which read it judged
(`folder_scan`, `files_stat`, `names_listed`).
"""

from collections.abc import Iterable
from datetime import UTC, datetime

import dagster as dg

from radar_pipeline.core.audit.run import run_audit
from radar_pipeline.core.clock import as_of_or_now
from radar_pipeline.defs import tags
from radar_pipeline.defs.check_results import check_result
from radar_pipeline.defs.cleanup.checks import retention_check
from radar_pipeline.defs.collection.config import (
    SIGNALS_KEY,
    CollectConfig,
    config_of,
    failed_sources_of,
)
from radar_pipeline.defs.collection.freshness import CADENCE_CHECK_OP, on_cadence_check
from radar_pipeline.defs.collection.stream_checks import STREAM_CHECKS
from radar_pipeline.defs.registry.checks import registry_check
from radar_pipeline.defs.resources import RadarResource

SIGNAL_CHECKS_JOB_NAME = "signal_checks"


# The daily full read of the Signals folder (UTC): what finds a Signal rewritten in place.
SIGNAL_AUDIT_JOB_NAME = "signal_audit"
SIGNAL_AUDIT_CRON = "17 3 * * *"
INCREMENTAL_NOTE = (
    " After a collection it reads the Signals folder incrementally (a file rewritten in place is"
    " found by the daily full `signal_audit`); run by hand or by that schedule it stats every"
    " file. Metadata `folder_scan` says which."
)


class CheckClock(dg.Config):
    """The clock of the collection the checks follow (`as_of`); empty means now."""

    as_of: str = ""


class AuditScope(dg.Config):
    """`full`: stat every Signal file (the default); false: the incremental read the checks
    after a collection use (core/vault/folder_state.py says what it trusts)."""

    full: bool = True


@dg.asset_check(
    asset=SIGNALS_KEY,
    name="idempotency",
    blocking=False,
    description="One Signal file and one index row per identity, over the whole vault."
    + INCREMENTAL_NOTE,
)
def idempotency_check(config: AuditScope, radar: RadarResource) -> dg.AssetCheckResult:
    """Every identity has exactly one Signal file and one index row; no two files share an
    identity. Judges the whole vault and DuckDB."""
    return check_result(run_audit("idempotency", radar.paths(), datetime.now(UTC), config.full))


@dg.asset_check(
    asset=SIGNALS_KEY,
    name="provenance",
    blocking=False,
    description="Every Signal carries its full provenance, over the whole vault."
    + INCREMENTAL_NOTE,
)
def provenance_check(config: AuditScope, radar: RadarResource) -> dg.AssetCheckResult:
    """Every Signal carries every provenance field of the contract, and `publishedAt` is empty
    unless verified evidence exists. Judges every Signal file."""
    return check_result(run_audit("provenance", radar.paths(), datetime.now(UTC), config.full))


@dg.asset_check(asset=SIGNALS_KEY, name="overdue", blocking=False)
def overdue_check(config: CheckClock, radar: RadarResource) -> dg.AssetCheckResult:
    """Eligible Sources past their cadence, at the collection's clock (0 after a recovery).
    WARN: a failing publisher keeps its Source overdue; that is recorded, not broken."""
    now = as_of_or_now(config.as_of)
    return check_result(run_audit("overdue", radar.paths(), now))


@dg.asset_check(
    asset=SIGNALS_KEY,
    name="agreement",
    blocking=False,
    description="The vault and the DuckDB index hold the same Signal ids." + INCREMENTAL_NOTE,
)
def agreement_check(config: AuditScope, radar: RadarResource) -> dg.AssetCheckResult:
    """The vault and the DuckDB index hold the same Signal ids (an index row without a file is
    an ERROR; a file not indexed yet a WARN)."""
    return check_result(run_audit("agreement", radar.paths(), datetime.now(UTC), config.full))


SIGNAL_CHECKS = [idempotency_check, provenance_check, overdue_check, agreement_check]
# Every evidence check, after every collection: those on `signals`, the registry's (a
# collection reads it) and `retention` (a collection may write full text to Temporary Content).
AFTER_COLLECTION_CHECKS = [
    *SIGNAL_CHECKS,
    *STREAM_CHECKS,
    on_cadence_check,
    registry_check,
    retention_check,
]
AFTER_COLLECTION_KEYS = frozenset(
    key for check in AFTER_COLLECTION_CHECKS for key in check.check_keys
)

signal_checks_job = dg.define_asset_job(
    SIGNAL_CHECKS_JOB_NAME,
    selection=dg.AssetSelection.checks(*AFTER_COLLECTION_CHECKS),
    executor_def=dg.in_process_executor,
    description=(
        "The evidence checks after a collection: every check on `signals`, the registry's and "
        "`retention`, at the collection's clock, so none reads 'Not evaluated' and `radar "
        "report` agrees."
    ),
)


signal_audit_job = dg.define_asset_job(
    SIGNAL_AUDIT_JOB_NAME,
    selection=dg.AssetSelection.checks(*SIGNAL_CHECKS),
    executor_def=dg.in_process_executor,
    description=(
        "The evidence checks on `signals` with a stat of every Signal file: finds what the "
        "incremental checks after a collection cannot (a file rewritten in place)."
    ),
)

signal_audit_schedule = dg.ScheduleDefinition(
    name="signal_audit_schedule",
    job=signal_audit_job,
    cron_schedule=SIGNAL_AUDIT_CRON,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="The daily full audit of the Signals folder (every file stat'ed).",
)

# The checks that read the Signals folder, by op name (`<asset>_<check>`).
_FOLDER_CHECK_OPS = ("signals_idempotency", "signals_provenance", "signals_agreement")


def checks_run_config(
    as_of: str, checks: Iterable[dg.AssetCheckKey] = AFTER_COLLECTION_KEYS
) -> dict[str, object]:
    """The checks job's run config after a collection, for the checks it runs: `overdue` and
    `on_cadence` judged at the collection's clock; the Signals folder read incrementally."""
    ops: dict[str, object] = {
        "signals_overdue": {"config": {"as_of": as_of}},
        CADENCE_CHECK_OP: {"config": {"as_of": as_of}},
    }
    ops.update({op: {"config": {"full": False}} for op in _FOLDER_CHECK_OPS})
    wanted = {f"{key.asset_key.to_python_identifier()}_{key.name}" for key in checks}
    return {"ops": {op: config for op, config in ops.items() if op in wanted}}


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    request_job=signal_checks_job,
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description="Runs the evidence checks on `signals` after each successful collection run.",
)
def signal_checks_after_collection(
    context: dg.RunStatusSensorContext,
) -> dg.RunRequest | dg.SkipReason:
    """After a successful collection run whose launcher does not run the checks itself, run
    the evidence checks once for it, at its clock."""
    return _checks_after(context)


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.FAILURE,
    request_job=signal_checks_job,
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description=(
        "Runs the evidence checks on `signals` after a collection run that failed because some "
        "of its Sources failed (the others' Signals were committed)."
    ),
)
def signal_checks_after_failed_collection(
    context: dg.RunStatusSensorContext,
) -> dg.RunRequest | dg.SkipReason:
    """After a collection run that failed only because Sources failed (its commit recorded
    them), run the evidence checks once for it (or for its launch), at its clock. A run that
    died before its commit changed nothing the checks judge."""
    return _checks_after(context)


def _checks_after(context: dg.RunStatusSensorContext) -> dg.RunRequest | dg.SkipReason:
    """The checks after a collection run, once per launch: the runs of one launch (one tick of
    the schedule, split into blocks) are followed by one `signal_checks` run, requested when
    the last of them ends (by end time, then run id, so exactly one of the two sensors asks),
    if any of them committed. A run without a launch (a UI materialization, a backfill) is
    followed on its own."""
    run = context.dagster_run
    collect = config_of(run.run_config)
    if collect is None and not _materialized_signals(context.instance, run.run_id):
        return dg.SkipReason(f"run {run.run_id} collected no Signals")
    if run.tags.get(tags.CHECKS) == tags.CHECKS_BY_LAUNCHER:
        return dg.SkipReason(f"run {run.run_id}: its launcher ran the checks")
    launch = run.tags.get(tags.LAUNCH)
    if not launch:
        if not _committed(context.instance, run):
            return dg.SkipReason(f"run {run.run_id} failed before its commit")
        return _checks_request(context, f"checks-after:{run.run_id}", run.run_id, collect)
    records = context.instance.get_run_records(
        dg.RunsFilter(job_name=run.job_name, tags={tags.LAUNCH: launch})
    )
    going = [r.dagster_run.run_id for r in records if not r.dagster_run.is_finished]
    if going:
        return dg.SkipReason(
            f"run {run.run_id}: {len(going)} more run(s) of launch {launch} still going; "
            "the checks follow the last"
        )
    # A canceled run wakes neither sensor: the last run is the last that ended so.
    ended = [r for r in records if r.dagster_run.status in _SENSED] or records
    last = max(ended, key=lambda r: (r.end_time or 0.0, r.dagster_run.run_id))
    if last.dagster_run.run_id != run.run_id:
        return dg.SkipReason(
            f"run {run.run_id}: the checks of launch {launch} follow its last run, "
            f"{last.dagster_run.run_id}"
        )
    if not any(_committed(context.instance, r.dagster_run) for r in records):
        return dg.SkipReason(f"no run of launch {launch} reached its commit")
    return _checks_request(context, f"checks-after:{launch}", run.run_id, collect)


_SENSED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE)


def _committed(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    """The run's commit went through: it succeeded, or it failed naming its failed Sources."""
    if run.status == dg.DagsterRunStatus.SUCCESS:
        return True
    return failed_sources_of(instance, run.run_id) is not None


def _checks_request(
    context: dg.RunStatusSensorContext, key: str, run_id: str, collect: CollectConfig | None
) -> dg.RunRequest | dg.SkipReason:
    """The checks run after a collection run: those it did not evaluate itself (all of them
    today: the collection job selects no check, and a launch from the asset's page selects
    them but skips them, as `signal_materialize` yields no output)."""
    missing = AFTER_COLLECTION_KEYS - _evaluated_checks(context.instance, run_id)
    if not missing:
        return dg.SkipReason(f"run {run_id} evaluated every check itself")
    return dg.RunRequest(
        run_key=key,
        run_config=checks_run_config(collect.as_of if collect else "", missing),
        asset_check_keys=sorted(missing, key=lambda k: k.to_user_string()),
        tags={tags.AFTER_RUN: run_id, tags.PRIORITY: str(tags.CHECKS_PRIORITY)},
    )


def _evaluated_checks(instance: dg.DagsterInstance, run_id: str) -> frozenset[dg.AssetCheckKey]:
    """The checks a run evaluated."""
    records = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    return frozenset(
        r.dagster_event.asset_check_evaluation_data.asset_check_key
        for r in records
        if r.dagster_event is not None
    )


def _materialized_signals(instance: dg.DagsterInstance, run_id: str) -> bool:
    # The asset selection of an ephemeral job's run is not always recorded; its events are.
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        if record.dagster_event is not None and record.dagster_event.asset_key == SIGNALS_KEY:
            return True
    return False
