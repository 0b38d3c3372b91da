"""The collection report as frozen values: what `radar collect --json` prints, what the
`collections` table stores, what the Dagster metadata and the evidence snapshot read.

`to_json()` is the contract's object (docs: `radar collect --json`), key for key in the order
the command has always printed; `from_json()` reads a stored one back. That order comes from
the store: a collection's report is recorded as JSON with sorted keys
(store/connection.to_json_text) and printed as read back, so a recorded report's keys, and
every Source entry's, are in alphabetical order, followed by what the launcher adds
(`collectionIds` of a merge, the Dagster run fields, `checks`). Only a command that ran no
collection prints its report unrecorded, in the order the contract lists its keys. Built in
core/collect/report.py after the commit; merged per command with `CollectionReport.merge`.
The module sits beside core/models.py (not in collect/) because store/collections.py, below
the stages, records and reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Literal, cast

from radar_pipeline.core.jsontypes import JsonObject

Outcome = Literal["passed", "not-modified", "failed", "skipped"]


@dataclass(frozen=True)
class PageFigures:
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

    def to_json(self) -> JsonObject:
        return _sorted(
            {
                "fetched": self.fetched,
                "pending": self.pending,
                "disallowed": self.disallowed,
                "stopped": self.stopped,
                "failed": self.failed,
                "expired": self.expired,
                "requests": self.requests,
                "robotsFetched": self.robots_fetched,
                "blocked": self.blocked,
            }
        )

    @classmethod
    def from_json(cls, data: JsonObject) -> PageFigures:
        return cls(
            fetched=int(data.get("fetched") or 0),
            pending=int(data.get("pending") or 0),
            disallowed=int(data.get("disallowed") or 0),
            stopped=int(data.get("stopped") or 0),
            failed=int(data.get("failed") or 0),
            expired=int(data.get("expired") or 0),
            requests=int(data.get("requests") or 0),
            robots_fetched=int(data.get("robotsFetched") or 0),
            blocked=data.get("blocked"),
        )


@dataclass(frozen=True)
class SourceReport:
    """One Source's entry: the contract's keys, then the extras the Dagster metadata and the
    `fetch_attempts` rows read (bytes, timing, validators, backoff)."""

    id: str
    outcome: Outcome
    http_status: int | None = None
    # The accounting: items_parsed = created + reused + updated + duplicates + rejected +
    # deferred + outside_window + filtered (collect/accounting.py); late is part of created.
    # filtered: dropped by the Source's include/exclude rules (collect/filtering.py).
    items_parsed: int = 0
    created: int = 0
    reused: int = 0
    updated: int = 0
    duplicates: int = 0
    rejected: int = 0
    deferred: int = 0
    outside_window: int = 0
    filtered: int = 0
    late: int = 0
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

    def to_json(self) -> JsonObject:
        return _sorted(
            {
                "id": self.id,
                "outcome": self.outcome,
                "httpStatus": self.http_status,
                "itemsParsed": self.items_parsed,
                "created": self.created,
                "reused": self.reused,
                "updated": self.updated,
                "duplicates": self.duplicates,
                "rejected": self.rejected,
                "deferred": self.deferred,
                "outsideWindow": self.outside_window,
                "filtered": self.filtered,
                "late": self.late,
                "possibleGap": self.possible_gap,
                "coverageFrom": self.coverage_from,
                "error": self.error,
                "errorClass": self.error_class,
                "bytes": self.bytes,
                "durationMs": self.duration_ms,
                "conditional": self.conditional,
                "temporaryBytes": self.temporary_bytes,
                "notes": list(self.notes),
                "pages": self.pages.to_json() if self.pages is not None else None,
                "errorStage": self.error_stage,
                "bodySha256": self.body_sha256,
                "validatorsChanged": self.validators_changed,
                "itemsNew": self.items_new,
                "consecutiveFailures": self.consecutive_failures,
                "backoffUntil": self.backoff_until,
            }
        )

    @classmethod
    def from_json(cls, data: JsonObject) -> SourceReport:
        """A stored entry; keys a report recorded before they existed read as their default."""
        pages = data.get("pages")
        return cls(
            id=str(data["id"]),
            outcome=cast(Outcome, data["outcome"]),
            http_status=data.get("httpStatus"),
            items_parsed=int(data.get("itemsParsed") or 0),
            created=int(data.get("created") or 0),
            reused=int(data.get("reused") or 0),
            updated=int(data.get("updated") or 0),
            duplicates=int(data.get("duplicates") or 0),
            rejected=int(data.get("rejected") or 0),
            deferred=int(data.get("deferred") or 0),
            outside_window=int(data.get("outsideWindow") or 0),
            filtered=int(data.get("filtered") or 0),
            late=int(data.get("late") or 0),
            possible_gap=bool(data.get("possibleGap")),
            coverage_from=data.get("coverageFrom"),
            error=data.get("error"),
            error_class=data.get("errorClass"),
            bytes=int(data.get("bytes") or 0),
            duration_ms=float(data.get("durationMs") or 0.0),
            conditional=data.get("conditional"),
            temporary_bytes=int(data.get("temporaryBytes") or 0),
            notes=tuple(data.get("notes") or ()),
            pages=PageFigures.from_json(pages) if pages else None,
            error_stage=data.get("errorStage"),
            body_sha256=data.get("bodySha256"),
            validators_changed=data.get("validatorsChanged"),
            items_new=int(data.get("itemsNew") or 0),
            consecutive_failures=int(data.get("consecutiveFailures") or 0),
            backoff_until=data.get("backoffUntil"),
        )


@dataclass(frozen=True)
class Counts:
    """Sources by outcome and items by outcome, summed over Sources (a scope's figures)."""

    passed: int = 0  # passed and not-modified
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

    @classmethod
    def of(cls, sources: list[SourceReport]) -> Counts:
        return cls(
            passed=sum(1 for s in sources if s.outcome in ("passed", "not-modified")),
            failed=sum(1 for s in sources if s.outcome == "failed"),
            skipped=sum(1 for s in sources if s.outcome == "skipped"),
            created=sum(s.created for s in sources),
            reused=sum(s.reused for s in sources),
            updated=sum(s.updated for s in sources),
            duplicates=sum(s.duplicates for s in sources),
            rejected=sum(s.rejected for s in sources),
            deferred=sum(s.deferred for s in sources),
            outside_window=sum(s.outside_window for s in sources),
            filtered=sum(s.filtered for s in sources),
            late=sum(s.late for s in sources),
        )

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )

    def to_json(self) -> JsonObject:
        return _sorted(
            {
                "passed": self.passed,
                "failed": self.failed,
                "skipped": self.skipped,
                **self.items_json(),
            }
        )

    def items_json(self) -> JsonObject:
        """The item counts, as the report's top level spells them."""
        return {
            "created": self.created,
            "reused": self.reused,
            "updated": self.updated,
            "duplicates": self.duplicates,
            "rejected": self.rejected,
            "deferred": self.deferred,
            "outsideWindow": self.outside_window,
            "filtered": self.filtered,
            "late": self.late,
        }

    @classmethod
    def from_json(cls, data: JsonObject) -> Counts:
        return cls(
            passed=int(data.get("passed") or 0),
            failed=int(data.get("failed") or 0),
            skipped=int(data.get("skipped") or 0),
            created=int(data.get("created") or 0),
            reused=int(data.get("reused") or 0),
            updated=int(data.get("updated") or 0),
            duplicates=int(data.get("duplicates") or 0),
            rejected=int(data.get("rejected") or 0),
            deferred=int(data.get("deferred") or 0),
            outside_window=int(data.get("outsideWindow") or 0),
            filtered=int(data.get("filtered") or 0),
            late=int(data.get("late") or 0),
        )


@dataclass(frozen=True)
class Scopes:
    """The counts of production and of fixture Sources, apart."""

    production: Counts = Counts()
    fixture: Counts = Counts()

    def to_json(self) -> JsonObject:
        return _sorted({"production": self.production.to_json(), "fixture": self.fixture.to_json()})

    @classmethod
    def from_json(cls, data: JsonObject) -> Scopes:
        return cls(Counts.from_json(data["production"]), Counts.from_json(data["fixture"]))


@dataclass(frozen=True)
class CollectionReport:
    """One collection's report (or one command's, merged over its runs).

    The ids, `scopes` and the launch fields are None where the report has none: a command
    that found nothing to collect ran no collection; `collection_ids` only on a merge of
    several runs; the Dagster fields only on what the launcher returns. `to_json` leaves them
    out then, as the command always has."""

    as_of: str  # ISO-8601 UTC, as printed
    mode: str
    downtime_from: str | None
    overdue: int
    due: int
    totals: Counts
    sources: tuple[SourceReport, ...] = ()
    collection_id: str | None = None
    launch_id: str | None = None
    scopes: Scopes | None = None
    collection_ids: tuple[str, ...] | None = None
    dagster_run_status: str | None = None
    dagster_run_id: str | None = None
    dagster_run_ids: tuple[str, ...] | None = None
    # Each evidence check's verdict after the collection, by name (JSON key `checks`).
    evidence_checks: dict[str, bool] | None = None
    # The latest attempt already recorded when that was after this collection's clock: the
    # clock was behind, and no health time moved back (left out of the JSON when None).
    clock_behind: str | None = None

    @property
    def passed(self) -> int:
        return self.totals.passed

    @property
    def failed(self) -> int:
        return self.totals.failed

    @property
    def skipped(self) -> int:
        return self.totals.skipped

    def to_json(self) -> JsonObject:
        out: JsonObject = {}
        if self.collection_id is not None:
            out["collectionId"] = self.collection_id
        if self.launch_id is not None:
            out["launchId"] = self.launch_id
        out |= {
            "asOf": self.as_of,
            "mode": self.mode,
            "downtimeFrom": self.downtime_from,
            "overdue": self.overdue,
            "due": self.due,
            "passed": self.totals.passed,
            "failed": self.totals.failed,
            "skipped": self.totals.skipped,
            **self.totals.items_json(),
        }
        if self.clock_behind is not None:
            out["clockBehind"] = self.clock_behind
        if self.scopes is not None:
            out["scopes"] = self.scopes.to_json()
        out["sources"] = [s.to_json() for s in self.sources]
        if self.collection_id is not None:  # recorded: as read back from the store
            out = _sorted(out)
        if self.collection_ids is not None:
            out["collectionIds"] = list(self.collection_ids)
        if self.dagster_run_status is not None:
            out["dagsterRunStatus"] = self.dagster_run_status
        if self.dagster_run_id is not None:
            out["dagsterRunId"] = self.dagster_run_id
        if self.dagster_run_ids is not None:
            out["dagsterRunIds"] = list(self.dagster_run_ids)
        if self.evidence_checks is not None:
            out["checks"] = dict(self.evidence_checks)
        return out

    @classmethod
    def from_json(cls, data: JsonObject) -> CollectionReport:
        scopes = data.get("scopes")
        ids = data.get("collectionIds")
        run_ids = data.get("dagsterRunIds")
        return cls(
            as_of=str(data["asOf"]),
            mode=str(data.get("mode") or ""),
            downtime_from=data.get("downtimeFrom"),
            overdue=int(data.get("overdue") or 0),
            due=int(data.get("due") or 0),
            totals=Counts.from_json(data),
            sources=tuple(SourceReport.from_json(s) for s in data.get("sources") or ()),
            collection_id=data.get("collectionId"),
            launch_id=data.get("launchId"),
            scopes=Scopes.from_json(scopes) if scopes else None,
            collection_ids=tuple(ids) if ids is not None else None,
            dagster_run_status=data.get("dagsterRunStatus"),
            dagster_run_id=data.get("dagsterRunId"),
            dagster_run_ids=tuple(run_ids) if run_ids is not None else None,
            evidence_checks=data.get("checks"),
            clock_behind=data.get("clockBehind"),
        )

    @classmethod
    def merge(cls, reports: list[CollectionReport]) -> CollectionReport:
        """One command's report from the reports of its runs, in the order they ran: counts
        and Sources add up; `downtimeFrom` and `overdue` are the first run's (planned before
        any of this command's commits moved the state)."""
        first, *rest = reports
        if not rest:
            return first
        scopes = [r.scopes for r in reports]
        return replace(
            first,
            due=sum(r.due for r in reports),
            totals=sum((r.totals for r in rest), first.totals),
            scopes=(
                Scopes(
                    sum((s.production for s in scopes if s), Counts()),
                    sum((s.fixture for s in scopes if s), Counts()),
                )
                if first.scopes is not None
                else None
            ),
            sources=tuple(src for r in reports for src in r.sources),
            collection_ids=tuple(str(r.collection_id) for r in reports),
            clock_behind=max((r.clock_behind for r in reports if r.clock_behind), default=None),
        )

    def source(self, source_id: str) -> SourceReport | None:
        """This report's entry for one Source, if it was part of the collection."""
        return next((s for s in self.sources if s.id == source_id), None)


def _sorted(data: JsonObject) -> JsonObject:
    """The keys in the order a stored report reads back (sorted, like to_json_text writes)."""
    return dict(sorted(data.items()))
