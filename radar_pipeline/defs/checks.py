"""Asset checks: the evidence reports. Each wraps one audit of `core.audit` and shows its table.

Why the checks on `signals` are unpartitioned although `signals` is partitioned by Source: a
collection is one range run over many Source partitions, and in a range run Dagster keeps
partitioned check records PLANNED and accepts one result per check (dagster-notes.md). So each
check reads the whole vault and DuckDB and is stored with `partition=None`: one verdict over all
Sources after every collection, and the same verdict when run alone from the UI.

ERROR marks a broken promise (a duplicate file, missing provenance, text that outlived a close,
an index row with no file); WARN a soft one (an overdue Source, a file not indexed yet).
"""

from datetime import UTC, datetime
from typing import Any

import dagster as dg

from radar_pipeline.core.audit import AuditResult, run_audit
from radar_pipeline.core.schedule import parse_utc
from radar_pipeline.defs.assets import signals, source_registry
from radar_pipeline.defs.cleanup import weekly_cleanup
from radar_pipeline.defs.resources import RadarResource


def check_result(audit: AuditResult) -> dg.AssetCheckResult:
    """An audit as a check result: verdict, severity, figures and the Markdown table."""
    severity = (
        dg.AssetCheckSeverity.ERROR if audit.severity == "ERROR" else dg.AssetCheckSeverity.WARN
    )
    metadata: dict[str, Any] = {
        "report": dg.MetadataValue.md(audit.markdown()),
        "findings": len(audit.findings),
        **dict(audit.figures),
    }
    return dg.AssetCheckResult(passed=audit.passed, severity=severity, metadata=metadata)


def run_clock(context: dg.AssetCheckExecutionContext) -> datetime:
    """The clock of the collection this check runs after (its `as_of`), else now.

    Inside a `radar collect --as-of` run the overdue verdict must use the same clock as the
    collection; run alone from the UI there is no such config and the check uses now.
    """
    config: Any = context.run.run_config or {}
    try:
        as_of = config["ops"]["signals"]["ops"]["fetch"]["config"]["as_of"]
    except (KeyError, TypeError):
        as_of = ""
    return parse_utc(str(as_of)) if as_of else datetime.now(UTC)


@dg.asset_check(asset=signals, name="idempotency", blocking=False)
def idempotency_check(
    context: dg.AssetCheckExecutionContext, radar: RadarResource
) -> dg.AssetCheckResult:
    """Every identity has exactly one Signal file and one index row; no two files share an
    identity. Unpartitioned: reads the whole vault and DuckDB (see the module docstring)."""
    return check_result(run_audit("idempotency", radar.paths(), run_clock(context)))


@dg.asset_check(asset=signals, name="provenance", blocking=False)
def provenance_check(
    context: dg.AssetCheckExecutionContext, radar: RadarResource
) -> dg.AssetCheckResult:
    """Every Signal carries every provenance field of the contract, and `publishedAt` is empty
    unless verified evidence exists. Unpartitioned: reads every Signal file."""
    return check_result(run_audit("provenance", radar.paths(), run_clock(context)))


@dg.asset_check(asset=signals, name="overdue", blocking=False)
def overdue_check(
    context: dg.AssetCheckExecutionContext, radar: RadarResource
) -> dg.AssetCheckResult:
    """Eligible Sources past their cadence, at the collection's clock (0 after a recovery).
    WARN: a failing publisher keeps its Source overdue; that is recorded, not broken.
    Unpartitioned: reads the registry and DuckDB feed state for every Source."""
    return check_result(run_audit("overdue", radar.paths(), run_clock(context)))


@dg.asset_check(asset=signals, name="agreement", blocking=False)
def agreement_check(
    context: dg.AssetCheckExecutionContext, radar: RadarResource
) -> dg.AssetCheckResult:
    """The vault and the DuckDB index hold the same Signal ids (an index row without a file is
    an ERROR; a file not indexed yet a WARN). Unpartitioned: reads the vault and DuckDB."""
    return check_result(run_audit("agreement", radar.paths(), run_clock(context)))


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
