"""The collection report: what `radar collect --json` prints, what the `collections` table
stores, what the Dagster metadata and the evidence snapshot read.

Key order is part of the contract (the golden test holds it byte for byte). A collection's
report is recorded as JSON with sorted keys (store/collections.py) and printed as read back,
so a recorded report's keys, and every Source entry's, read in alphabetical order, followed
by what the launcher adds (`collectionIds` of a merge, the Dagster run fields, `checks`).
Only a command that ran no collection prints its report unrecorded, in the order the
contract lists its keys (the declaration order below). Built in core/collect/report.py after
the commit; merged per command with `CollectionReport.merge`.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from radar_pipeline.core.contract.base import ContractModel, SortedContractModel, absent_when_none
from radar_pipeline.core.contract.outcomes import PASSING_OUTCOMES, ItemOutcome, SourceOutcome

# What the launcher adds after a recorded report's sorted keys, in this order.
LAUNCHER_KEYS = ("collectionIds", "dagsterRunStatus", "dagsterRunId", "dagsterRunIds", "checks")


class PageFigures(SortedContractModel):
    """Page extraction's figures of one check (a page-extraction Source only)."""

    fetched: int = 0
    pending: int = 0
    disallowed: int = 0
    stopped: int = 0  # pages not fetched because the pass stopped
    failed: int = 0
    expired: int = 0  # pages dropped from the queue as older than the window
    requests: int = 0
    robots_fetched: int = 0
    blocked: str | None = None  # the error of the answer that stopped the pass


class ItemCounts(ContractModel):
    """The item outcomes of a check or a scope: they add up to what the feeds held."""

    # The accounting: items_parsed = created + reused + updated + duplicates + rejected +
    # deferred + outside_window + filtered (collect/accounting.py); late is part of created.
    created: int = 0
    reused: int = 0
    updated: int = 0
    duplicates: int = 0
    rejected: int = 0
    deferred: int = 0
    outside_window: int = 0
    filtered: int = 0  # dropped by the Source's include/exclude rules (collect/filtering.py)
    late: int = 0

    def count(self, outcome: ItemOutcome) -> int:
        """The number of items that ended in `outcome`."""
        value: int = getattr(self, outcome.field)
        return value


class SourceReport(ItemCounts, SortedContractModel):
    """One Source's entry: the contract's keys, then the extras the Dagster metadata and the
    `fetch_attempts` rows read (bytes, timing, validators, backoff). A stored entry's keys
    that did not exist when it was recorded read as their default."""

    id: str
    outcome: SourceOutcome
    http_status: int | None = None
    items_parsed: int = 0
    possible_gap: bool = False
    coverage_from: str | None = None  # ISO-8601 UTC, as printed
    error: str | None = None  # the failure, or why the Source was skipped
    error_class: str | None = None
    bytes: int = 0
    duration_ms: float = 0.0
    conditional: bool | None = None  # None: no request was sent
    temporary_bytes: int = 0
    notes: tuple[str, ...] = ()
    pages: PageFigures | None = None
    error_stage: str | None = None
    body_sha256: str | None = None
    validators_changed: bool | None = None
    items_new: int = 0
    consecutive_failures: int = 0
    backoff_until: str | None = None  # ISO-8601 UTC, as printed
    # The same time as the partition's line and the Source note's `nextAttemptAt`
    # (core/plan/collection.py, `next_attempts_of`).
    next_attempt_at: str | None = Field(
        default=None,
        description=(
            "When the schedule next checks the Source (ISO-8601 UTC): its next slot, or for a "
            "failed Source the end of its wait (backoff, a publisher's wait, "
            "minIntervalSeconds); null for a manual Source (checked when run by hand)."
        ),
    )
    # A manual Source's "when run by hand, not before ..." (core/plan/collection.py,
    # `by_hand_from`): absent while no such wait is pending, and for every cadence Source,
    # whose `nextAttemptAt` already waits for it.
    not_before: str | None = Field(
        default=None,
        exclude_if=lambda value: value is None,
        description=(
            "Only for a manual Source (nextAttemptAt null) while a wait holds back a run by "
            "hand: when that wait ends (ISO-8601 UTC), the latest of a publisher's wait "
            "(Retry-After of a 429/503, Cache-Control max-age or <ttl>) and minIntervalSeconds "
            "after its last answer; a run by hand before it skips the Source with the reason. "
            "Absent otherwise."
        ),
    )

    def next_attempt_words(self) -> str:
        """When the Source is next checked, as its partition's line and `radar report` say it:
        the time the schedule checks it, or for a `manual` Source "when run by hand" (with
        "not before <time>" while a wait holds such a run back)."""
        if self.next_attempt_at:
            return self.next_attempt_at
        if self.not_before:
            return f"when run by hand, not before {self.not_before}"
        return "when run by hand"


class Counts(ItemCounts, SortedContractModel):
    """Sources by outcome and items by outcome, summed over Sources (a scope's figures)."""

    passed: int = 0  # passed and not-modified
    failed: int = 0
    skipped: int = 0

    @classmethod
    def of(cls, sources: list[SourceReport]) -> Counts:
        return cls(
            passed=sum(1 for s in sources if s.outcome in PASSING_OUTCOMES),
            failed=sum(1 for s in sources if s.outcome == "failed"),
            skipped=sum(1 for s in sources if s.outcome == "skipped"),
            **{o.field: sum(s.count(o) for s in sources) for o in ItemOutcome},
            late=sum(s.late for s in sources),
        )

    def __add__(self, other: Counts) -> Counts:
        return Counts(**{name: getattr(self, name) + getattr(other, name) for name in _COUNTS})


_COUNTS = tuple(Counts.model_fields)


class Scopes(SortedContractModel):
    """The counts of production and of fixture Sources, apart."""

    production: Counts = Counts()
    fixture: Counts = Counts()


class CollectionReport(ContractModel):
    """One collection's report (or one command's, merged over its runs).

    The ids, `scopes` and the launch fields are None where the report has none: a command
    that found nothing to collect ran no collection; `collection_ids` only on a merge of
    several runs; the Dagster fields only on what the launcher returns. Their keys are left
    out then, as the command always has. The counts sit at the top level of the JSON; in code
    they read as one `Counts` (`totals`)."""

    collection_id: str | None = absent_when_none()
    launch_id: str | None = absent_when_none()
    as_of: str  # ISO-8601 UTC, as printed
    mode: str = ""
    downtime_from: str | None = None
    overdue: int = 0
    due: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    created: int = 0
    reused: int = 0
    updated: int = 0
    duplicates: int = 0
    rejected: int = 0
    deferred: int = 0
    outside_window: int = 0
    filtered: int = 0
    late: int = 0
    # The latest attempt already recorded when that was after this collection's clock: the
    # clock was behind, and no health time moved back.
    clock_behind: str | None = absent_when_none()
    scopes: Scopes | None = absent_when_none()
    sources: tuple[SourceReport, ...] = ()
    collection_ids: tuple[str, ...] | None = absent_when_none()
    dagster_run_status: str | None = absent_when_none()
    dagster_run_id: str | None = absent_when_none()
    dagster_run_ids: tuple[str, ...] | None = absent_when_none()
    # Each evidence check's verdict after the collection, by name (the key is `checks`).
    evidence_checks: dict[str, bool] | None = absent_when_none(alias="checks")

    # No return annotation on purpose (see SortedContractModel): the schema stays the fields'.
    @model_serializer(mode="wrap")
    def _printed_order(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        """A recorded report reads back sorted, the launcher's keys after it."""
        data: dict[str, Any] = handler(self)
        if self.collection_id is None:
            return data
        added = {key: data.pop(key) for key in LAUNCHER_KEYS if key in data}
        return dict(sorted(data.items())) | added

    @classmethod
    def counted(cls, totals: Counts, **fields: Any) -> CollectionReport:
        """A report whose top-level counts are `totals`."""
        return cls.model_validate({**dict(totals), **fields})

    @property
    def totals(self) -> Counts:
        return Counts(**{name: getattr(self, name) for name in _COUNTS})

    @classmethod
    def merge(cls, reports: list[CollectionReport]) -> CollectionReport:
        """One command's report from the reports of its runs, in the order they ran: counts
        and Sources add up; `downtimeFrom` and `overdue` are the first run's (planned before
        any of this command's commits moved the state)."""
        first, *rest = reports
        if not rest:
            return first
        scopes = [r.scopes for r in reports]
        merged_scopes = (
            Scopes(
                production=sum((s.production for s in scopes if s), Counts()),
                fixture=sum((s.fixture for s in scopes if s), Counts()),
            )
            if first.scopes is not None
            else None
        )
        totals = sum((r.totals for r in rest), first.totals)
        return first.model_copy(
            update={
                **dict(totals),
                "due": sum(r.due for r in reports),
                "scopes": merged_scopes,
                "sources": tuple(src for r in reports for src in r.sources),
                "collection_ids": tuple(str(r.collection_id) for r in reports),
                "clock_behind": max(
                    (r.clock_behind for r in reports if r.clock_behind), default=None
                ),
            }
        )

    def source(self, source_id: str) -> SourceReport | None:
        """This report's entry for one Source, if it was part of the collection."""
        return next((s for s in self.sources if s.id == source_id), None)
