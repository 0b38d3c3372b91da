"""The audits of the item stream (docs/architecture.md, invariant 14).

accounting    every recorded check's outcomes add up to the items it parsed, one observation each
gaps          a Source's latest check shares items with the one before (else items may be lost)
silence       a Source whose checks pass still publishes at its own rhythm
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from radar_pipeline.core.audit.findings import AuditResult, Finding
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.store import audits as queries
from radar_pipeline.core.store.connection import Connection

# A Source's rhythm is known once this many intervals between its items' dates are.
MIN_INTERVALS = 4
# Silent: the newest item is older than this many rhythms at the Source's last passing check.
SILENCE_FACTOR = 3


def audit_accounting(con: Connection) -> AuditResult:
    """ERROR for each recorded check whose outcomes do not add up to what it parsed, or whose
    item observations are not one per item parsed."""
    rows = queries.unbalanced_checks(con)
    checks = queries.check_count(con)
    findings = tuple(
        Finding(
            "ERROR",
            (
                str(source_id),
                format_utc(as_of),
                str(collection_id),
                str(parsed),
                str(outcomes),
                str(observed),
            ),
        )
        for collection_id, source_id, as_of, parsed, outcomes, observed in rows
    )
    return AuditResult(
        "accounting",
        "every item a check parsed is in exactly one recorded outcome",
        ("source", "checked at", "collection", "itemsParsed", "outcomes sum", "observations"),
        findings,
        {"checks": checks, "unbalanced": len(findings)},
    )


def audit_gaps(con: Connection) -> AuditResult:
    """WARN for each Source whose latest check shares no item with the previous one although
    its feed held as many items: items may have scrolled out unseen between the checks."""
    rows = queries.latest_checks(con)
    findings = tuple(
        Finding(
            "WARN",
            (
                str(source_id),
                format_utc(as_of),
                str(parsed),
                "items may have scrolled out of the feed between checks: shorten its cadence",
            ),
        )
        for source_id, as_of, gap, parsed in rows
        if gap
    )
    return AuditResult(
        "gaps",
        "each Source's latest check overlaps the one before",
        ("source", "checked at", "itemsParsed", "suggestion"),
        findings,
        {"sources": len(rows), "possibleGaps": len(findings)},
    )


@dataclass(frozen=True)
class Rhythm:
    """A Source's publishing rhythm and how long it has been quiet at its last passing check."""

    source_id: str
    intervals: int
    median: timedelta
    newest: datetime
    checked_at: datetime

    @property
    def quiet_for(self) -> timedelta:
        return self.checked_at - self.newest

    @property
    def silent(self) -> bool:
        return self.intervals >= MIN_INTERVALS and self.quiet_for > SILENCE_FACTOR * self.median


def rhythms(con: Connection) -> list[Rhythm]:
    """Every Source whose latest check passed and whose item dates give a rhythm
    (MIN_INTERVALS or more intervals between distinct observation dates)."""
    rows = queries.rhythm_rows(con, MIN_INTERVALS)
    return [
        Rhythm(str(r[0]), int(r[1]), timedelta(seconds=float(r[2])), r[3], r[4])
        for r in rows
        if r[2] is not None and float(r[2]) > 0
    ]


def silent_sources(con: Connection) -> list[str]:
    """Ids of the Sources whose checks pass but whose newest item is older than
    SILENCE_FACTOR times their median interval between items."""
    return [r.source_id for r in rhythms(con) if r.silent]


def audit_silence(con: Connection) -> AuditResult:
    """WARN for each silent Source ("lights on, nobody home")."""
    known = rhythms(con)
    findings = tuple(
        Finding(
            "WARN",
            (
                r.source_id,
                format_utc(r.newest),
                _days(r.median),
                _days(r.quiet_for),
                format_utc(r.checked_at),
            ),
        )
        for r in known
        if r.silent
    )
    return AuditResult(
        "silence",
        f"Sources whose checks pass publish within {SILENCE_FACTOR}x their own rhythm",
        ("source", "newest item", "median interval", "quiet for", "last passing check"),
        findings,
        {"sourcesWithRhythm": len(known), "silent": len(findings)},
    )


def _days(value: timedelta) -> str:
    return f"{value.total_seconds() / 86400:.1f} d"
