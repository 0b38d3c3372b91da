"""The audits of the Sources: the Registry's validity and the Sources past their cadence.

registry      every Source file is a valid, uniquely declared Source
overdue       eligible Sources past their cadence (0 after a successful recovery)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from radar_pipeline.core.audit.findings import AuditResult, Finding
from radar_pipeline.core.clock import format_utc, parse_cadence
from radar_pipeline.core.contract.evidence import Severity
from radar_pipeline.core.plan.schedule import is_overdue
from radar_pipeline.core.registry.sources import RegistrySnapshot
from radar_pipeline.core.store.feed_state import FeedState

_DECLARED_IN = re.compile(r"already declared in (\S+?);")


def audit_registry(snapshot: RegistrySnapshot) -> AuditResult:
    """Every Source file is valid and declares its own id; issues name the first declaration."""
    findings: list[Finding] = []
    for issue in snapshot.issues:
        first = "–"
        if issue.code == "duplicate-id":
            match = _DECLARED_IN.search(issue.message)
            first = match.group(1) if match else issue.path
        # A duplicate id silences every file that declares it; other issues silence one file.
        severity: Severity = "ERROR" if issue.code in ("duplicate-id", "unreadable") else "WARN"
        findings.append(Finding(severity, (issue.path, issue.code, first, issue.message)))
    return AuditResult(
        "registry",
        "every Source file is a valid, uniquely declared Source",
        ("file", "code", "first declaration", "message"),
        tuple(findings),
        {"sources": len(snapshot.sources), "issues": len(snapshot.issues)},
    )


@dataclass(frozen=True)
class OverdueSource:
    source_id: str
    priority: str
    cadence: str
    last_success_at: datetime | None
    due_since: datetime | None  # None: never succeeded


def overdue_sources(
    snapshot: RegistrySnapshot, states: Mapping[str, FeedState], now: datetime
) -> list[OverdueSource]:
    """Eligible Sources with a cadence whose last success is older than the cadence at `now`.

    DuckDB's feed state is the authority; the Source file's mirror covers a lost database.
    """
    out: list[OverdueSource] = []
    for rec in snapshot.sources:
        src = rec.source
        if not src.is_eligible:
            continue
        cadence = parse_cadence(src.cadence)
        state = states.get(src.id)
        last = state.last_success_at if state and state.last_success_at else src.last_success_at
        if cadence is not None and is_overdue(cadence, last, now):
            due = last + cadence if last is not None else None
            out.append(OverdueSource(src.id, src.priority, src.cadence, last, due))
    return out


def audit_overdue(overdue: Iterable[OverdueSource], eligible: int, now: datetime) -> AuditResult:
    """No eligible Source is past its cadence (soft: a failing publisher makes one overdue)."""
    findings = tuple(
        Finding(
            "WARN",
            (
                o.source_id,
                o.priority,
                o.cadence,
                format_utc(o.last_success_at) if o.last_success_at else "never",
                format_utc(o.due_since) if o.due_since else "first check",
            ),
        )
        for o in overdue
    )
    return AuditResult(
        "overdue",
        f"no eligible Source past its cadence at {format_utc(now)}",
        ("Source", "priority", "cadence", "last success", "due since"),
        findings,
        {"eligible": eligible, "overdue": len(findings)},
    )
