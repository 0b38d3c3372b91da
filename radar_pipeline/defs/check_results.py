"""Audits as Dagster check results: the verdict, its severity, its figures and its table.

ERROR marks a broken promise (a duplicate file, missing provenance, text that outlived a close,
an index row with no file, an item unaccounted for); WARN a soft one (an overdue Source, a file
not indexed yet). A failing result carries the severity of its worst finding; a passing one
the severity its check is declared with (core/audit/run.py, `DECLARED_SEVERITY`). Dagster 1.13
records the severity of every evaluation (GraphQL `evaluation.severity`) but draws it only on a
failure: a failed WARN evaluation is a yellow warning, a failed ERROR one red; a passing one is
green "Passed" whatever its severity (docs/operations.md, "Severities").
"""

import dagster as dg

from radar_pipeline.core.audit.findings import AuditResult


def check_result(audit: AuditResult, key: dg.AssetCheckKey | None = None) -> dg.AssetCheckResult:
    """An audit as a check result, with its findings as a Markdown table; `key` names the
    check when one op evaluates several (a multi-asset check)."""
    return dg.AssetCheckResult(
        asset_key=key.asset_key if key else None,
        check_name=key.name if key else None,
        passed=audit.passed,
        severity=severity_of(audit),
        description=audit.headline,
        metadata=_metadata(audit),
    )


def severity_of(audit: AuditResult) -> dg.AssetCheckSeverity:
    """The audit's severity as Dagster's (see the module docstring)."""
    if audit.severity == "ERROR":
        return dg.AssetCheckSeverity.ERROR
    return dg.AssetCheckSeverity.WARN


def _metadata(audit: AuditResult) -> dict[str, dg.MetadataValue | int | str]:
    return {
        "report": dg.MetadataValue.md(audit.markdown()),
        "findings": len(audit.findings),
        **dict(audit.figures),
        **dict(audit.scan),
    }
