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
from radar_pipeline.core.audit.run import AUDIT_NAMES, CHECK_NAMES, AuditInputs, run_audits
from radar_pipeline.core.audit.source_audits import audit_overdue, overdue_sources
from radar_pipeline.core.audit.stream_audits import silent_sources
from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.contract.collection import CollectionReport
from radar_pipeline.core.contract.evidence import (
    EvidenceSnapshot,
    Inventory,
    PossibleGap,
    Production,
    Recovery,
    Temporary,
)
from radar_pipeline.core.errors import CleanupRefused
from radar_pipeline.core.plan.schedule import RECOVERY_CAP
from radar_pipeline.core.registry.sources import RegistrySnapshot, load_registry
from radar_pipeline.core.store.closes import last_close
from radar_pipeline.core.store.collections import last_launch_reports
from radar_pipeline.core.store.connection import Connection, Store
from radar_pipeline.core.store.dead_letters import count_open
from radar_pipeline.core.store.feed_state import FeedState, load_states
from radar_pipeline.core.store.signals import signals_by_source
from radar_pipeline.core.vault.cleanup import temporary_inventory
from radar_pipeline.core.vault.signals import list_signal_ids


def evidence_snapshot(paths: RadarPaths, now: datetime) -> EvidenceSnapshot:
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
    last = _next_attempts_now(CollectionReport.merge(launch), snapshot, states) if launch else None
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
    return EvidenceSnapshot(
        as_of=format_utc(now),
        production_sources=len(production),
        fixture_sources=sum(1 for r in eligible if r.source.scope == "fixture"),
        signals=len(signal_ids),
        recovery_cap_days=RECOVERY_CAP.days,
        overdue=len(overdue),
        retained_temporary=retained,
        last_collection=last,
        open_dead_letters=open_dead,
        silent_sources=tuple(silent),
        possible_gaps=tuple(
            PossibleGap(
                source=row["source"], checked_at=row["checked at"], suggestion=row["suggestion"]
            )
            for row in audits["gaps"].rows()
        ),
        registry_issues=len(snapshot.issues),
        inventory=Inventory(
            source_files=_source_files(paths),
            valid_sources=len(snapshot.sources),
            eligible_sources=len(eligible),
            inactive_sources=tuple(
                sorted(r.source.id for r in snapshot.sources if not r.source.is_eligible)
            ),
            registry_issues=snapshot.issues,
            signal_files=len(signal_ids),
            indexed_signals=sum(by_source.values()),
            indexed_by_source=dict(sorted(by_source.items())),
        ),
        production=Production(
            sources=tuple(sorted(production)),
            signals=sum(n for sid, n in by_source.items() if sid in production),
            overdue_now=tuple(sorted(o.source_id for o in overdue if o.source_id in production)),
        ),
        recovery=_recovery(last, snapshot, states),
        temporary=Temporary(
            retained_files=retained,
            retained_bytes=retained_bytes,
            error=temporary_error,
            last_close=close,
        ),
        checks={CHECK_NAMES[name]: audits[name].verdict() for name in AUDIT_NAMES},
    )


def _next_attempts_now(
    last: CollectionReport, snapshot: RegistrySnapshot, states: dict[str, FeedState]
) -> CollectionReport:
    """`last` with the `nextAttemptAt` of each of its cadence Sources attempted since (a
    collection that failed as a whole records the attempt and the Source note's next attempt,
    core/collect/run_failure.py, but no report) as that note names it: the time the schedule
    tries the Source now, not the one `last` named, which may be past."""
    as_of = parse_utc(last.as_of)
    notes = {r.source.id: r.source for r in snapshot.sources}
    sources = []
    for src in last.sources:
        state, note = states.get(src.id), notes.get(src.id)
        attempted = state.last_attempt_at if state is not None else None
        if (
            src.next_attempt_at is not None
            and attempted is not None
            and attempted > as_of
            and note is not None
            and note.next_attempt_at is not None
        ):
            src = src.model_copy(update={"next_attempt_at": format_utc(note.next_attempt_at)})
        sources.append(src)
    return last.model_copy(update={"sources": tuple(sources)})


def _source_files(paths: RadarPaths) -> int:
    try:
        return sum(1 for e in os.scandir(paths.sources_dir) if e.name.endswith(".md"))
    except OSError:
        return 0


def _recovery(last: CollectionReport | None, snapshot: Any, states: Any) -> Recovery | None:
    """The last collection's recovery: overdue before it, outcome, and overdue right after it
    (evaluated at that collection's own clock with the state it left)."""
    if last is None:
        return None
    as_of = parse_utc(last.as_of)
    after = overdue_sources(snapshot, states, as_of)
    eligible = sum(1 for r in snapshot.sources if r.source.is_eligible)
    return Recovery(
        as_of=last.as_of,
        mode=last.mode,
        downtime_from=last.downtime_from,
        overdue_before=last.overdue,
        due=last.due,
        passed=last.passed,
        failed=last.failed,
        skipped=last.skipped,
        post_recovery_overdue=audit_overdue(after, eligible, as_of).figures["overdue"],
        post_recovery_overdue_sources=tuple(o.source_id for o in after),
    )


def evidence_text(report: EvidenceSnapshot) -> str:
    """The snapshot as a few readable lines for `radar report`."""
    inv, prod, tmp, rec = report.inventory, report.production, report.temporary, report.recovery
    lines = [
        f"evidence as of {report.as_of}",
        f"inventory: {inv.source_files} Source files, {inv.valid_sources} valid, "
        f"{report.registry_issues} registry issues; {inv.signal_files} Signal files, "
        f"{inv.indexed_signals} indexed",
        f"production: {report.production_sources} Sources, {prod.signals} Signals; "
        f"fixtures: {report.fixture_sources}",
        f"overdue now: {report.overdue}; recovery cap: {report.recovery_cap_days} days; "
        f"open dead letters: {report.open_dead_letters}",
        "silent Sources: " + (", ".join(report.silent_sources) or "none"),
    ]
    for gap in report.possible_gaps:
        lines.append(f"possible gap: {gap.source} at {gap.checked_at}: {gap.suggestion}")
    if rec is None:
        lines.append("last collection: none")
    else:
        lines.append(
            f"last collection {rec.as_of} ({rec.mode}): overdue before {rec.overdue_before}"
            f", passed {rec.passed}, failed {rec.failed}, skipped {rec.skipped}; "
            f"overdue after {rec.post_recovery_overdue}"
        )
    if report.last_collection is not None:
        # The same time as the partition's line and the Source note's `nextAttemptAt`.
        for src in report.last_collection.sources:
            if src.outcome == "failed":
                lines.append(
                    f"failed Source {src.id}: {src.error or 'failed'}; "
                    f"next attempt {src.next_attempt_words()}"
                )
    close = tmp.last_close
    lines.append(
        f"temporary text retained: {tmp.retained_files} files ({tmp.retained_bytes} bytes); "
        + (
            f"last close {format_utc(close.closed_at)} (week {close.week}): deleted "
            f"{close.deleted}, retained {close.retained}"
            if close
            else "no weekly close yet"
        )
    )
    for name, check in report.checks.items():
        verdict = "passed" if check.passed else f"FAILED {check.severity}"
        lines.append(f"check {name:<17} {verdict} ({check.findings} findings)")
    return "\n".join(lines)
