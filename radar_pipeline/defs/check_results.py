"""Audits as Dagster check results: the verdict, its severity, its figures and its table.

ERROR marks a broken promise (a duplicate file, missing provenance, text that outlived a close,
an index row with no file); WARN a soft one (an overdue Source, a file not indexed yet).
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
        severity=_severity(audit),
        description=audit.headline,
        metadata=_metadata(audit),
    )


def _severity(audit: AuditResult) -> dg.AssetCheckSeverity:
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
