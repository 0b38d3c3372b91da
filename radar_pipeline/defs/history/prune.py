"""Pruning the Dagster run history: the instance calls behind `radar history prune` and the
daily `run_history_schedule`. The rule of what goes and what stays is core/run_history.py.

Only public DagsterInstance methods read and delete (`get_run_records`, `all_logs`,
`fetch_materializations`, `fetch_planned_materializations`,
`get_latest_asset_check_evaluation_record`, `delete_run`). On the default SQLite storage,
`delete_run` empties a run's event shard (`DAGSTER_HOME/history/runs/<run id>.db`) but leaves
the file on disk; nothing refers to it afterwards, so the prune measures it and removes it,
which is where the bytes come back. Storage elsewhere (PostgreSQL) has no shard files: the
rows go with `delete_run` and `bytesFreed` is 0.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg

from radar_pipeline.core.clock import parse_utc
from radar_pipeline.core.contract.operations import PruneSummary
from radar_pipeline.core.run_history import PrunePlan, RunEntry, cutoff_of, old_ended, plan_prune
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.store.dead_letters import open_dead_letter_runs

ENDED = frozenset(
    {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
)
PAGE = 500  # run records read per query
# The events by which a run holds what a partition or a check shows.
HOLDING_EVENTS = {
    dg.DagsterEventType.ASSET_MATERIALIZATION,
    dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
    dg.DagsterEventType.ASSET_CHECK_EVALUATION,
}
SHARD_SUFFIXES = (".db", ".db-wal", ".db-shm")


@dataclass(frozen=True)
class PruneResult:
    """What one prune did (`summary()`: what `radar history prune` prints of it)."""

    plan: PrunePlan
    bytes_freed: int
    keep_days: int
    as_of: datetime

    def summary(self) -> PruneSummary:
        """The contract's counts plus the clock it judged by."""
        return PruneSummary(
            deleted_runs=len(self.plan.delete),
            kept_runs=len(self.plan.keep),
            bytes_freed=self.bytes_freed,
            protected_runs=len(self.plan.protected),
            keep_days=self.keep_days,
            as_of=self.as_of,
            cutoff=self.plan.cutoff,
        )


def run_clock(run_config: Mapping[str, Any]) -> datetime | None:
    """The clock a run decided with: the `as_of` in its config. Every launcher passes its
    clock there (the collection's `fetch` op, the checks, the weekly close, the cadence
    check, the prune); empty or absent means the run used the real time."""
    for key, value in run_config.items():
        if key == "as_of" and isinstance(value, str) and value.strip():
            with contextlib.suppress(ValueError):
                return parse_utc(value)
        elif isinstance(value, Mapping):
            found = run_clock(value)
            if found is not None:
                return found
    return None


def run_entries(instance: dg.DagsterInstance) -> Iterator[RunEntry]:
    """Every run of the instance, newest first, with its clock and whether it ended."""
    cursor: str | None = None
    while True:
        records = instance.get_run_records(limit=PAGE, cursor=cursor)
        for record in records:
            run = record.dagster_run
            real = record.start_time or record.create_timestamp.timestamp()
            started = run_clock(run.run_config or {}) or datetime.fromtimestamp(real, UTC)
            yield RunEntry(run.run_id, started, run.status in ENDED)
        if len(records) < PAGE:
            return
        cursor = records[-1].dagster_run.run_id


class _Latest:
    """Which run holds the latest materialization, attempt and check result of each asset
    partition and check, asked of the instance once per key."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.instance = instance
        self.cache: dict[tuple[str, str, str | None], str | None] = {}

    def holder(self, kind: dg.DagsterEventType, key: Any, partition: str | None) -> str | None:
        slot = (kind.value, key.to_user_string(), partition)
        if slot not in self.cache:
            self.cache[slot] = self._ask(kind, key, partition)
        return self.cache[slot]

    def _ask(self, kind: dg.DagsterEventType, key: Any, partition: str | None) -> str | None:
        if kind == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            record = self.instance.get_latest_asset_check_evaluation_record(key)
            return record.run_id if record else None
        records_filter = dg.AssetRecordsFilter(
            asset_key=key, asset_partitions=[partition] if partition is not None else None
        )
        fetch = (
            self.instance.fetch_materializations
            if kind == dg.DagsterEventType.ASSET_MATERIALIZATION
            else self.instance.fetch_planned_materializations
        )
        found = fetch(records_filter, limit=1).records
        return found[0].run_id if found else None


def holds_latest(instance: dg.DagsterInstance, run_id: str, latest: _Latest) -> bool:
    """The run holds some partition's latest materialization or attempt (an attempt without a
    later materialization is how Dagster shows a partition failed), or a check's latest
    result."""
    for entry in instance.all_logs(run_id, of_type=HOLDING_EVENTS):
        event = entry.dagster_event
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.ASSET_CHECK_EVALUATION:
            key: Any = event.asset_check_evaluation_data.asset_check_key
        elif event.asset_key is not None:
            key = event.asset_key
        else:
            continue
        if latest.holder(event.event_type, key, event.partition) == run_id:
            return True
    return False


def shard_files(instance: dg.DagsterInstance, run_id: str) -> list[Path]:
    """The run's SQLite event shard and its journal files, where the default storage keeps
    them (none with another storage)."""
    folder = Path(instance.root_directory) / "history" / "runs"
    return [p for s in SHARD_SUFFIXES if (p := folder / f"{run_id}{s}").is_file()]


def prune_run_history(
    instance: dg.DagsterInstance, store: Store, keep_days: int, as_of: datetime
) -> PruneResult:
    """Delete the runs that ended before `as_of - keep_days` and hold nothing a partition,
    a check or an open dead letter still needs; returns what was deleted, kept and freed."""
    entries = list(run_entries(instance))
    cutoff = cutoff_of(as_of, keep_days)
    latest = _Latest(instance)
    protected = open_dead_letter_runs(store)
    protected |= {
        r.run_id
        for r in old_ended(entries, cutoff)
        if r.run_id not in protected and holds_latest(instance, r.run_id, latest)
    }
    plan = plan_prune(entries, protected, cutoff)
    freed = 0
    for run_id in plan.delete:
        freed += sum(p.stat().st_size for p in shard_files(instance, run_id))
        instance.delete_run(run_id)
        # Listed again: deleting opens the shard, which creates it for a run that had none.
        for path in shard_files(instance, run_id):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return PruneResult(plan, freed, keep_days, as_of)
