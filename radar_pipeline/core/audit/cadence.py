"""`on_cadence`: which Sources fell behind their cadence (a success missed by more than a grace).

The rule the `on_cadence` check (defs/collection/checks.py), `source_freshness_sensor` and
`radar report` share, so the Checks tab and the command line name the same late Sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from radar_pipeline.core.audit.findings import AuditResult, Finding
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.plan.collection import SourceTiming

# A Source is due at the latest at lastSuccessAt + cadence and its run starts within a tick or
# two; it is late only when that did not happen.
LATE_GRACE = timedelta(minutes=15)


def is_late(timing: SourceTiming, now: datetime) -> bool:
    """Overdue by more than `LATE_GRACE`; a Source that never succeeded is late."""
    if not timing.overdue:
        return False
    last = timing.last_success_at
    return last is None or now >= last + timing.cadence + LATE_GRACE


def audit_cadence(timings: Sequence[SourceTiming], now: datetime) -> AuditResult:
    """WARN for each late Source (a failing publisher keeps its Source late: recorded, not a
    broken promise); `manual` and ineligible Sources have no timing, so are never late."""
    findings = tuple(
        Finding(
            "WARN",
            (
                t.source_id,
                str(t.cadence),
                format_utc(t.last_success_at) if t.last_success_at else "never",
            ),
        )
        for t in timings
        if is_late(t, now)
    )
    return AuditResult(
        "on_cadence",
        f"every Source succeeded within its cadence (plus {LATE_GRACE}) at {format_utc(now)}",
        ("source", "cadence", "lastSuccessAt"),
        findings,
        {"sources": len(timings), "late": len(findings)},
    )
