"""Asset checks: the evidence reports. Each wraps one audit of `core.audit` and shows its table.

Why the checks on `signals` are unpartitioned although `signals` is partitioned by Source: a
collection is one range run over many Source partitions, and in a range run Dagster keeps
partitioned check records PLANNED and accepts one result per check (dagster-notes.md). So each
check reads the whole vault and DuckDB and is stored with `partition=None`: one verdict over all
Sources, the same whether it runs after a collection or alone from the UI.

Why the collection run itself records them (one Dagster run per collection): `signal_materialize`
reports each Source with its own materialization event and never emits the asset's output (that
would mark every partition of the range), so Dagster would skip checks planned inside the
collection run. Instead the op, after its commit, runs the four `signals` audits and logs their
results as asset check evaluations of these same checks (`signal_check_evaluations`), whether
the CLI, a schedule, a backfill or the UI launched the run. The audits read only Signal files
that are new or changed since they were last read (core/audit.py), so this stays cheap as the
vault grows. The run status sensor `signal_checks_after_collection` runs the `signal_checks` job
for a run that materialized Signals but recorded no evaluations (an older run, or one whose
audits could not run); the job also runs the checks alone, as from the UI.

ERROR marks a broken promise (a duplicate file, missing provenance, text that outlived a close,
an index row with no file); WARN a soft one (an overdue Source, a file not indexed yet).
"""

import logging
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from radar_pipeline.core.audit.audits import AuditResult, run_audit, run_audits
from radar_pipeline.core.clock import parse_utc
from radar_pipeline.core.collect import pool as parallel
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.defs.assets import SIGNALS_KEY, signals, source_registry
from radar_pipeline.defs.cleanup import weekly_cleanup
from radar_pipeline.defs.resources import RadarResource

log = logging.getLogger(__name__)


def check_result(audit: AuditResult) -> dg.AssetCheckResult:
    """An audit as a check result: verdict, severity, figures and the Markdown table."""
    return dg.AssetCheckResult(
        passed=audit.passed, severity=_severity(audit), metadata=_metadata(audit)
    )


def check_evaluation(audit: AuditResult, asset_key: dg.AssetKey) -> dg.AssetCheckEvaluation:
    """The same result as an evaluation event an op logs (the check named like the audit)."""
    return dg.AssetCheckEvaluation(
        asset_key=asset_key,
        check_name=audit.name,
        passed=audit.passed,
        severity=_severity(audit),
        metadata=_metadata(audit),
    )


def start_signal_audits(
    paths: RadarPaths, as_of: datetime
) -> Future[dict[str, AuditResult]] | None:
    """Start the `signals` audits on the command's worker processes (None without them): a
    collection calls this once it has committed, then reports its Sources meanwhile."""
    return parallel.run_soon(run_audits, paths, as_of, SIGNAL_CHECK_NAMES)


def signal_check_evaluations(
    paths: RadarPaths, as_of: datetime, started: Future[dict[str, AuditResult]] | None = None
) -> list[dg.AssetCheckEvaluation]:
    """The `signals` checks over the vault and DuckDB as a collection left them; `overdue` at
    the collection's clock `as_of`. `started`: the same audits from `start_signal_audits`."""
    audits = None
    if started is not None:
        try:
            audits = started.result()
        except Exception as exc:  # a worker died, or the audit failed there: once more, here
            log.warning("the audits on a worker process failed (%r); running them here", exc)
            audits = None
    if audits is None:
        audits = run_audits(paths, as_of, SIGNAL_CHECK_NAMES)
    return [check_evaluation(audits[name], SIGNALS_KEY) for name in SIGNAL_CHECK_NAMES]


def unjudged_check_evaluations(error: str) -> list[dg.AssetCheckEvaluation]:
    """Each `signals` check failed (ERROR) with `error`: the audits could not run at all."""
    return [
        dg.AssetCheckEvaluation(
            asset_key=SIGNALS_KEY,
            check_name=name,
            passed=False,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"error": error},
        )
        for name in SIGNAL_CHECK_NAMES
    ]


def _severity(audit: AuditResult) -> dg.AssetCheckSeverity:
    if audit.severity == "ERROR":
        return dg.AssetCheckSeverity.ERROR
    return dg.AssetCheckSeverity.WARN


def _metadata(audit: AuditResult) -> dict[str, Any]:
    return {
        "report": dg.MetadataValue.md(audit.markdown()),
        "findings": len(audit.findings),
        **dict(audit.figures),
    }


class CheckClock(dg.Config):
    """The clock of the collection the checks follow (`as_of`); empty means now."""

    as_of: str = ""


@dg.asset_check(asset=signals, name="idempotency", blocking=False)
def idempotency_check(
    context: dg.AssetCheckExecutionContext, radar: RadarResource
) -> dg.AssetCheckResult:
    """Every identity has exactly one Signal file and one index row; no two files share an
    identity. Unpartitioned: reads the whole vault and DuckDB (see the module docstring)."""
    return check_result(run_audit("idempotency", radar.paths(), datetime.now(UTC)))


@dg.asset_check(asset=signals, name="provenance", blocking=False)
def provenance_check(
    context: dg.AssetCheckExecutionContext, radar: RadarResource
) -> dg.AssetCheckResult:
    """Every Signal carries every provenance field of the contract, and `publishedAt` is empty
    unless verified evidence exists. Unpartitioned: reads every Signal file."""
    return check_result(run_audit("provenance", radar.paths(), datetime.now(UTC)))


@dg.asset_check(asset=signals, name="overdue", blocking=False)
def overdue_check(
    context: dg.AssetCheckExecutionContext, config: CheckClock, radar: RadarResource
) -> dg.AssetCheckResult:
    """Eligible Sources past their cadence, at the collection's clock (0 after a recovery).
    WARN: a failing publisher keeps its Source overdue; that is recorded, not broken.
    Unpartitioned: reads the registry and DuckDB feed state for every Source."""
    now = parse_utc(config.as_of) if config.as_of else datetime.now(UTC)
    return check_result(run_audit("overdue", radar.paths(), now))


@dg.asset_check(asset=signals, name="agreement", blocking=False)
def agreement_check(
    context: dg.AssetCheckExecutionContext, radar: RadarResource
) -> dg.AssetCheckResult:
    """The vault and the DuckDB index hold the same Signal ids (an index row without a file is
    an ERROR; a file not indexed yet a WARN). Unpartitioned: reads the vault and DuckDB."""
    return check_result(run_audit("agreement", radar.paths(), datetime.now(UTC)))


@dg.asset_check(asset=source_registry, name="registry_validity", blocking=False)
def registry_check(
    context: dg.AssetCheckExecutionContext, radar: RadarResource
) -> dg.AssetCheckResult:
    """Every Source file is a valid Source with its own id; each issue is listed with its file
    and, for a duplicate id, the first declaration."""
    return check_result(run_audit("registry", radar.paths(), datetime.now(UTC)))


@dg.asset_check(asset=weekly_cleanup, name="retention", blocking=False)
def retention_check(
    context: dg.AssetCheckExecutionContext, radar: RadarResource
) -> dg.AssetCheckResult:
    """Nothing under Temporary Content predates the last weekly close (which retained 0), and
    no full text lives anywhere else: no Signal body longer than a summary, no temporary-content
    file outside the folder. Unpartitioned: the verdict is about the vault, not one week."""
    return check_result(run_audit("retention", radar.paths(), datetime.now(UTC)))


EVIDENCE_CHECKS = [
    idempotency_check,
    provenance_check,
    overdue_check,
    agreement_check,
    registry_check,
    retention_check,
]

SIGNAL_CHECKS_JOB_NAME = "signal_checks"
SIGNAL_CHECKS = [idempotency_check, provenance_check, overdue_check, agreement_check]
SIGNAL_CHECK_NAMES = ("idempotency", "provenance", "overdue", "agreement")
INLINE_CHECKS_TAG = "radar/checks"  # "inline": runs of earlier versions ran them afterwards

signal_checks_job = dg.define_asset_job(
    SIGNAL_CHECKS_JOB_NAME,
    selection=dg.AssetSelection.checks(*SIGNAL_CHECKS),
    executor_def=dg.in_process_executor,
    description="The evidence checks on `signals`, run after each collection.",
)


def checks_run_config(as_of: str) -> dict[str, Any]:
    return {"ops": {"signals_overdue": {"config": {"as_of": as_of}}}}


def collection_as_of(run_config: Any) -> str:
    """The `as_of` a collection run was configured with, or empty."""
    try:
        return str(run_config["ops"]["signals"]["ops"]["fetch"]["config"]["as_of"] or "")
    except (KeyError, TypeError):
        return ""


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    request_job=signal_checks_job,
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
)
def signal_checks_after_collection(
    context: dg.RunStatusSensorContext,
) -> dg.RunRequest | dg.SkipReason:
    """After any successful run that materialized `signals` (schedule, sensor, backfill, UI),
    that recorded no check evaluations, run the evidence checks once for it, at its clock."""
    run = context.dagster_run
    if not _materialized_signals(context.instance, run.run_id):
        return dg.SkipReason(f"run {run.run_id} materialized no Signals")
    if run.tags.get(INLINE_CHECKS_TAG) == "inline" or _evaluated_checks(
        context.instance, run.run_id
    ):
        return dg.SkipReason(f"run {run.run_id} recorded its checks itself")
    return dg.RunRequest(
        run_key=f"checks-after:{run.run_id}",
        run_config=checks_run_config(collection_as_of(run.run_config)),
        tags={"radar/after_run": run.run_id},
    )


def _materialized_signals(instance: dg.DagsterInstance, run_id: str) -> bool:
    # The run's asset selection is not always recorded (ephemeral jobs); its events are.
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        if record.dagster_event is not None and record.dagster_event.asset_key == SIGNALS_KEY:
            return True
    return False


def _evaluated_checks(instance: dg.DagsterInstance, run_id: str) -> bool:
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        data = record.dagster_event.event_specific_data if record.dagster_event else None
        if isinstance(data, dg.AssetCheckEvaluation) and data.asset_key == SIGNALS_KEY:
            return True
    return False
