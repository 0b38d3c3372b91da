"""Every item a fetched feed held, in exactly one outcome (docs/architecture.md, invariant 14).

    itemsParsed = created + reused + updated + duplicates + rejected + deferred + outsideWindow
                  + filtered

`late` (part of `created`) counts new items dated before the check's coverageFrom; a possible
gap is a check that shares no item with the Source's previous parsing check although the feed
held at least as many items (items may have scrolled out between the two).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from radar_pipeline.core.collect.commit import SourceWrite, item_outcome
from radar_pipeline.core.collect.results import DedupedCheck
from radar_pipeline.core.contract.outcomes import ItemOutcome
from radar_pipeline.core.models import ItemCandidate, ParsedFeed
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.plan.schedule import window_from
from radar_pipeline.core.store.accounting import PreviousCheck


@dataclass(frozen=True)
class CheckAccount:
    """One Source check's outcome counts, late items and gap flag."""

    items_parsed: int = 0
    created: int = 0
    reused: int = 0
    updated: int = 0
    duplicates: int = 0
    rejected: int = 0
    deferred: int = 0
    outside_window: int = 0
    filtered: int = 0  # dropped by the Source's include/exclude rules (collect/filtering.py)
    late: int = 0
    # Eligible items without a date the feed's text states (always inside the window, so
    # counted: recorded in check_accounting and the partition metadata, not the report keys).
    undated: int = 0
    possible_gap: bool = False
    newest_observed_at: datetime | None = None

    def count(self, outcome: ItemOutcome) -> int:
        """The number of items that ended in `outcome`."""
        value: int = getattr(self, outcome.field)
        return value

    @property
    def balanced(self) -> bool:
        return self.items_parsed == sum(self.count(o) for o in ItemOutcome)


def account(item: DedupedCheck, write: SourceWrite, previous: PreviousCheck | None) -> CheckAccount:
    """The accounting of one check after its files were written (zeros without a parsed body)."""
    res = item.result
    parsed = res.parsed
    if parsed is None or res.failed:
        return CheckAccount()
    counts = Counter(item_outcome(d, write) for d in item.decisions)
    coverage_from = res.plan.coverage_from
    late = sum(
        1
        for d in item.decisions
        if item_outcome(d, write) is ItemOutcome.CREATED
        and coverage_from is not None
        and d.candidate.observed_at is not None
        and d.candidate.observed_at < coverage_from
    )
    parsed_count = items_parsed(parsed)
    return CheckAccount(
        items_parsed=parsed_count,
        created=counts[ItemOutcome.CREATED],
        reused=counts[ItemOutcome.REUSED],
        updated=counts[ItemOutcome.UPDATED],
        duplicates=counts[ItemOutcome.DUPLICATES],
        rejected=len(parsed.rejections),
        deferred=counts[ItemOutcome.DEFERRED],
        outside_window=len(parsed.outside_window),
        filtered=len(parsed.filtered),
        late=late,
        undated=sum(1 for c in parsed.candidates if c.observed_at is None),
        possible_gap=_possible_gap(parsed, parsed_count, previous),
        newest_observed_at=max(
            (
                c.observed_at
                for c in (*parsed.candidates, *parsed.outside_window, *_dropped(parsed))
                if c.observed_at is not None and not c.future_dated
            ),
            default=None,
        ),
    )


def items_parsed(parsed: ParsedFeed) -> int:
    """Every entry of the feed the parser saw, whatever became of it."""
    return (
        len(parsed.candidates)
        + len(parsed.outside_window)
        + len(parsed.rejections)
        + len(parsed.filtered)
    )


def item_ids(parsed: ParsedFeed) -> frozenset[str]:
    """The Source item ids of every entry of the feed that has one (and the id the rule before
    ids were read as written gave it, so the first check after that change still shares its
    items with the check before)."""
    entries = (*parsed.candidates, *parsed.outside_window, *_dropped(parsed))
    ids = {c.source_item_id for c in entries}
    ids.update(c.earlier_item_id for c in entries if c.earlier_item_id)
    ids.update(r.source_item_id for r in parsed.rejections if r.source_item_id)
    return frozenset(ids)


def _dropped(parsed: ParsedFeed) -> tuple[ItemCandidate, ...]:
    """The candidates the Source's rules filtered out (they were in the feed all the same)."""
    return tuple(f.candidate for f in parsed.filtered)


def _possible_gap(parsed: ParsedFeed, count: int, previous: PreviousCheck | None) -> bool:
    """No item in common with the previous parsing check although the feed is as full."""
    if previous is None or count == 0 or count < previous.items_parsed:
        return False
    return not (item_ids(parsed) & previous.item_ids)


def accounting_row(
    spec: CollectionSpec, item: DedupedCheck, acc: CheckAccount, outcome: str
) -> tuple[Any, ...]:
    """The `check_accounting` row of one check (store/accounting.py, its column order)."""
    return (
        spec.collection_id,
        item.result.plan.source_id,
        spec.as_of,
        outcome,
        acc.items_parsed,
        acc.created,
        acc.reused,
        acc.updated,
        acc.duplicates,
        acc.rejected,
        acc.deferred,
        acc.outside_window,
        acc.late,
        acc.possible_gap,
        item.result.plan.coverage_from,
        window_from(spec.as_of),
        acc.newest_observed_at,
        sorted(item_ids(item.result.parsed)) if item.result.parsed is not None else [],
        acc.filtered,  # migration 12 added it
        acc.undated,  # migration 13 added it (the last column)
    )
