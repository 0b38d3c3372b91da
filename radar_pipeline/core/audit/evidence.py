"""The evidence snapshot behind `radar report` and the `evidence_snapshot` asset.

Two scopes are kept apart on purpose: the *inventory* (what files exist: six Source files are
six files) and *production* (what the Radar actually collects: eligible Sources of scope
`production`, registry/sources.source_scope). The contract's keys stay at the top level;
everything else is grouped beneath them.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from radar_pipeline.core.audit.retention import list_temporary
from radar_pipeline.core.audit.run import AUDIT_NAMES, AuditInputs, run_audits
from radar_pipeline.core.audit.source_audits import audit_overdue, overdue_sources
from radar_pipeline.core.audit.stream_audits import silent_sources
from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.errors import CleanupRefused
from radar_pipeline.core.jsontypes import JsonObject
from radar_pipeline.core.plan.schedule import RECOVERY_CAP
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.core.reports import CollectionReport
from radar_pipeline.core.store.closes import last_close
from radar_pipeline.core.store.collections import last_launch_reports
from radar_pipeline.core.store.connection import Connection, Store
from radar_pipeline.core.store.dead_letters import count_open
from radar_pipeline.core.store.feed_state import FeedState, load_states
from radar_pipeline.core.store.signals import signals_by_source
from radar_pipeline.core.vault.cleanup import temporary_inventory
from radar_pipeline.core.vault.signals import list_signal_ids


def evidence_snapshot(paths: RadarPaths, now: datetime) -> JsonObject:
    """What the Radar can show about itself at `now` (the contract's report keys and more).

    The registry, the feed states, the last close and Temporary Content are read once here
    and handed to the audits."""
    snapshot = load_registry(paths.vault)
    store = Store.of(paths)

    def read(con: Connection) -> tuple[dict[str, FeedState], int, list[tuple[str, int]], list[str]]:
        return load_states(con), count_open(con), signals_by_source(con), silent_sources(con)

    states, open_dead, indexed, silent = store.atomically(read)
    eligible = [r for r in snapshot.sources if r.source.is_eligible]
    production = {r.source.id for r in eligible if r.source.scope == "production"}
    overdue = overdue_sources(snapshot, states, now)
    launch = last_launch_reports(store)
    last = CollectionReport.merge(launch) if launch else None
    temporary = list_temporary(paths.vault)
    try:
        retained, retained_bytes = temporary_inventory(paths.vault)
        temporary_error = None
    except CleanupRefused as exc:
        retained, retained_bytes = len(temporary), 0
        temporary_error = str(exc)
    close = last_close(store)
    audits = run_audits(paths, now, inputs=AuditInputs(snapshot, states, close, temporary))
    signal_ids = list_signal_ids(paths.vault)
    by_source = dict(indexed)
    return {
        # ---- the contract's keys
        "asOf": format_utc(now),
        "productionSources": len(production),
        "fixtureSources": sum(1 for r in eligible if r.source.scope == "fixture"),
        "signals": len(signal_ids),
        "recoveryCapDays": RECOVERY_CAP.days,
        "overdue": len(overdue),
        "retainedTemporary": retained,
        "lastCollection": last.to_json() if last is not None else None,
        "openDeadLetters": open_dead,
        "silentSources": silent,
        # ---- what else the evidence shows
        "possibleGaps": [
            {"source": f.cells[0], "checkedAt": f.cells[1], "suggestion": f.cells[3]}
            for f in audits["gaps"].findings
        ],
        "registryIssues": len(snapshot.issues),
        "inventory": {
            "sourceFiles": _source_files(paths),
            "validSources": len(snapshot.sources),
            "eligibleSources": len(eligible),
            "inactiveSources": sorted(
                r.source.id for r in snapshot.sources if not r.source.is_eligible
            ),
            "registryIssues": [
                {"path": i.path, "code": i.code, "message": i.message} for i in snapshot.issues
            ],
            "signalFiles": len(signal_ids),
            "indexedSignals": sum(by_source.values()),
            "indexedBySource": dict(sorted(by_source.items())),
        },
        "production": {
            "sources": sorted(production),
            "signals": sum(n for sid, n in by_source.items() if sid in production),
            "overdueNow": sorted(o.source_id for o in overdue if o.source_id in production),
        },
        "recovery": _recovery(paths, last, snapshot, states),
        "temporary": {
            "retainedFiles": retained,
            "retainedBytes": retained_bytes,
            "error": temporary_error,
            "lastClose": close.to_json() if close else None,
        },
        "checks": {name: audits[name].to_json() for name in AUDIT_NAMES},
    }


def _source_files(paths: RadarPaths) -> int:
    try:
        return sum(1 for e in os.scandir(paths.sources_dir) if e.name.endswith(".md"))
    except OSError:
        return 0


def _recovery(
    paths: RadarPaths, last: CollectionReport | None, snapshot: Any, states: Any
) -> JsonObject | None:
    """The last collection's recovery: overdue before it, outcome, and overdue right after it
    (evaluated at that collection's own clock with the state it left)."""
    if last is None:
        return None
    as_of = parse_utc(last.as_of)
    after = overdue_sources(snapshot, states, as_of)
    eligible = sum(1 for r in snapshot.sources if r.source.is_eligible)
    return {
        "asOf": last.as_of,
        "mode": last.mode,
        "downtimeFrom": last.downtime_from,
        "overdueBefore": last.overdue,
        "due": last.due,
        "passed": last.passed,
        "failed": last.failed,
        "skipped": last.skipped,
        "postRecoveryOverdue": audit_overdue(after, eligible, as_of).figures["overdue"],
        "postRecoveryOverdueSources": [o.source_id for o in after],
    }


def evidence_text(report: JsonObject) -> str:
    """The snapshot as a few readable lines for `radar report`."""
    inv, prod, tmp = report["inventory"], report["production"], report["temporary"]
    rec = report["recovery"]
    lines = [
        f"evidence as of {report['asOf']}",
        f"inventory: {inv['sourceFiles']} Source files, {inv['validSources']} valid, "
        f"{report['registryIssues']} registry issues; {inv['signalFiles']} Signal files, "
        f"{inv['indexedSignals']} indexed",
        f"production: {report['productionSources']} Sources, {prod['signals']} Signals; "
        f"fixtures: {report['fixtureSources']}",
        f"overdue now: {report['overdue']}; recovery cap: {report['recoveryCapDays']} days; "
        f"open dead letters: {report['openDeadLetters']}",
        "silent Sources: " + (", ".join(report["silentSources"]) or "none"),
    ]
    for gap in report["possibleGaps"]:
        lines.append(f"possible gap: {gap['source']} at {gap['checkedAt']}: {gap['suggestion']}")
    if rec is None:
        lines.append("last collection: none")
    else:
        lines.append(
            f"last collection {rec['asOf']} ({rec['mode']}): overdue before {rec['overdueBefore']}"
            f", passed {rec['passed']}, failed {rec['failed']}, skipped {rec['skipped']}; "
            f"overdue after {rec['postRecoveryOverdue']}"
        )
    close = tmp["lastClose"]
    lines.append(
        f"temporary text retained: {tmp['retainedFiles']} files ({tmp['retainedBytes']} bytes); "
        + (
            f"last close {close['closedAt']} (week {close['week']}): deleted {close['deleted']}, "
            f"retained {close['retained']}"
            if close
            else "no weekly close yet"
        )
    )
    for name, check in report["checks"].items():
        verdict = "passed" if check["passed"] else f"FAILED {check['severity']}"
        lines.append(f"check {name:<12} {verdict} ({check['findings']} findings)")
    return "\n".join(lines)
