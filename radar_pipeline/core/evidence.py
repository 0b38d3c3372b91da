"""The evidence snapshot behind `radar report`: inventory, scope, recovery and retention."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from radar_pipeline.core.cleanup import temporary_inventory
from radar_pipeline.core.collect import last_report
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.registry import load_registry
from radar_pipeline.core.schedule import RECOVERY_CAP, is_overdue, parse_cadence
from radar_pipeline.core.signals import list_signal_ids
from radar_pipeline.core.state import load_states
from radar_pipeline.core.store import Store


def evidence_snapshot(paths: RadarPaths, now: datetime) -> dict[str, Any]:
    """What the Radar can show about itself right now (the contract's report keys and more)."""
    snapshot = load_registry(paths.vault)
    store = Store(paths.db)
    with store.transaction() as con:
        states = load_states(con)
        row = con.execute("SELECT count(*) FROM dead_letters WHERE status = 'open'").fetchone()
        open_dead = int(row[0]) if row else 0
        row = con.execute("SELECT count(*) FROM signals").fetchone()
        indexed = int(row[0]) if row else 0
    eligible = [r for r in snapshot.sources if r.source.is_eligible]
    overdue = 0
    for rec in eligible:
        cadence = parse_cadence(rec.source.cadence)
        state = states.get(rec.source.id)
        last = state.last_success_at if state and state.last_success_at else None
        if cadence is not None and is_overdue(cadence, last or rec.source.last_success_at, now):
            overdue += 1
    files, _ = temporary_inventory(paths.vault)
    return {
        "asOf": now.isoformat(),
        "sourceFiles": len(snapshot.sources) + len({i.path for i in snapshot.issues}),
        "registryIssues": len(snapshot.issues),
        "productionSources": sum(1 for r in eligible if not r.source.is_fixture),
        "fixtureSources": sum(1 for r in eligible if r.source.is_fixture),
        "signals": len(list_signal_ids(paths.vault)),
        "indexedSignals": indexed,
        "recoveryCapDays": RECOVERY_CAP.days,
        "overdue": overdue,
        "retainedTemporary": files,
        "openDeadLetters": open_dead,
        "lastCollection": last_report(store),
    }
