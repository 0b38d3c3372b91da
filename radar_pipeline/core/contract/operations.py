"""What the operating commands print: `radar cleanup`, `radar history prune`, `radar dlq ...`,
`radar index rebuild` and `radar store migrate`."""

from __future__ import annotations

from radar_pipeline.core.contract.base import ContractModel, UtcTime
from radar_pipeline.core.contract.collection import SourceReport


class CleanupOutput(ContractModel):
    """The `radar cleanup --json` object: what the weekly close deleted and what is left."""

    deleted: int  # files
    bytes: int
    retained: int  # files left after it: 0
    week: str
    closed_at: str  # the run's clock, ISO-8601 UTC
    refused: tuple[str, ...] = ()  # entries the close kept, and why
    dagster_run_id: str


class CloseRecord(ContractModel):
    """One weekly close as DuckDB `cleanup_runs` holds it: when (the run's clock), which week,
    what it deleted, what was left (the evidence snapshot's `lastClose`)."""

    cleanup_id: str
    closed_at: UtcTime
    week: str | None
    deleted: int
    bytes: int
    retained: int


class PruneSummary(ContractModel):
    """The `radar history prune --json` object: the contract's counts plus the clock it
    judged by."""

    deleted_runs: int
    kept_runs: int
    bytes_freed: int
    protected_runs: int
    keep_days: int
    as_of: UtcTime
    cutoff: UtcTime


class DeadLetter(ContractModel):
    """One failed check and the decision taken on it (the contract's keys first)."""

    id: str
    source_id: str
    stage: str
    error_class: str
    message: str
    status: str  # open | replayed | dismissed
    created_at: UtcTime
    attempt: int
    collection_id: str | None
    decided_at: UtcTime | None = None
    decision: str | None = None
    replay_collection_id: str | None = None


class DeadLetterList(ContractModel):
    """The `radar dlq list --json` object."""

    dead_letters: tuple[DeadLetter, ...]


class DismissOutput(ContractModel):
    """The `radar dlq dismiss ID --json` object."""

    dead_letter: DeadLetter


class ReplayOutput(ContractModel):
    """The `radar dlq replay ID --json` object: the replayed dead letter, the Source's entry
    in the replay's collection report, and the dead letter the replay opened if its check
    failed again."""

    dead_letter: DeadLetter
    source: SourceReport
    new_dead_letter: DeadLetter | None


class IndexRebuildOutput(ContractModel):
    """The `radar index rebuild --json` object."""

    indexed: int
    unreadable: tuple[str, ...]
    moved_aside: str | None  # where an unreadable store file was kept
    moved_aside_reason: str | None
    not_restored: tuple[str, ...]
    identity_version: int | None
    rekeyed: int
    aliased: int
    rekey_conflicts: tuple[str, ...]
    at: UtcTime


class Transfer(ContractModel):
    """The `radar store migrate --json` object: rows moved per table, in the order copied."""

    to: str  # where to (without password)
    tables: dict[str, int]
    rows: int  # rows moved in all
