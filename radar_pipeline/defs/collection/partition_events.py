"""What a collection run records on each Source partition of `signals`: the one place.

Dagster 1.13 derives a partition's state from runs, not from what an op says about it: it is
*materialized* by its latest materialization (a runtime `AssetMaterialization` needs no
planning), *failed* while the latest run that *planned* it (an event recorded per partition
when the run is created with that partition or range) failed without materializing it, and
a partition stays materialized through later runs that plan it, succeed and do not
materialize it (docs/operations.md, "What a partition shows"). Planning and materializing
2,000 partitions costs a minute and 30 MB of instance, so a partition gets an event only
when its state or its data changes. A partition's state must be its Source's last check:

- **Runs that plan no partition** (`radar collect` and the schedule: the Sources in the run
  config). Which partitions read materialized or failed now is Dagster's own status, read
  once per run (`get_status_by_partition`): it is what the page shows, whatever the store
  says (a wiped instance, a re-added partition, a pruned run).
  - A Source that passed: a materialization with its figures when the check changed
    something (new, updated or duplicate items) or its partition does not read materialized
    (its first check, a pass after a failure). Otherwise nothing on its partition: it is
    listed among the Sources checked unchanged, on the run's one observation of the whole
    collection (`unchanged`).
  - A Source that failed: an observation whose description is the failure's line (root
    cause, HTTP status, next attempt), and the run fails naming it. Its partition reads
    failed only if a failed run planned it: when it does not read failed already, the Source
    is to be re-stated (`restate`) by a follow-up run over its block that checks nothing
    (the Source is in its backoff now) and fails naming it (defs/collection/restate.py).
  - A Source skipped: nothing on its partition.
- **Runs that plan their partitions** (a backfill from the UI, the follow-up above):
  - A Source that passed: a materialization (the run may fail for another Source, and a
    planned partition of a failed run that got no materialization reads failed).
  - A Source that failed: the observation and the run's failure, as above.
  - A Source planned but not checked (minimum interval, a publisher's wait, a lock held by
    another run; the follow-up's Sources, in their backoff): the run re-states its last
    check: a materialization marked `outcome: skipped` when that check passed (the Signals
    are that check's), or the run fails naming it when it failed (it is still failing): with
    the failed check's own line when the run re-states a run's failures (`restating`), else
    with an observation saying it was not checked. Either way the partition keeps its state,
    and a backfill ends as soon as its runs do (an asset backfill waits for a state for
    every partition it requested, then calls the rest failed).
  - A Source the run did not plan (reported only): nothing on its partition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.contract.collection import SourceReport
from radar_pipeline.core.contract.outcomes import PASSING_OUTCOMES
from radar_pipeline.core.store.feed_state import FeedState
from radar_pipeline.defs.collection.config import SIGNALS_KEY
from radar_pipeline.defs.collection.metadata import (
    MetadataEntry,
    failure_line,
    source_metadata,
)

PartitionEvent = dg.AssetMaterialization | dg.AssetObservation


@dataclass(frozen=True)
class PartitionRecord:
    """What one run records per Source partition: its events, the line of each Source whose
    partition must read failed after the run (the run fails naming them), those of them a
    follow-up run must re-state (their partition does not read failed yet), and the Sources
    checked unchanged (no event of their own; listed on the run's collection observation)."""

    events: tuple[PartitionEvent, ...] = ()
    failing: Mapping[str, str] = field(default_factory=dict)  # Source id -> its line
    restate: Mapping[str, str] = field(default_factory=dict)  # Source id -> its line
    unchanged: tuple[str, ...] = ()


@dataclass(frozen=True)
class SourceContext:
    """What a Source's events say beyond its report: when it is next due, how many of its
    eligible items had no date, and its state before this run (for a skipped Source)."""

    next_due: str
    undated: int
    state: FeedState | None


@dataclass(frozen=True)
class PartitionsShown:
    """What the partitions of a run's Sources read in Dagster before the run records: which
    are materialized and which failed (a run that plans no partition reads them; a planned
    partition reads in progress during its run, so a planned run records without them)."""

    materialized: frozenset[str] = frozenset()
    failed: frozenset[str] = frozenset()


def partition_record(
    sources: tuple[SourceReport, ...],
    planned: frozenset[str],
    context: Mapping[str, SourceContext],
    shown: PartitionsShown | None = None,
    restating: Mapping[str, str] | None = None,
) -> PartitionRecord:
    """The events of one run on each Source partition, by the rules in the module docstring.
    `shown`: the partitions' states before the run (runs that plan no partition);
    `restating`: the lines of the failures this run re-states (a follow-up run)."""
    shown = shown or PartitionsShown()
    restating = restating or {}
    events: list[PartitionEvent] = []
    failing: dict[str, str] = {}
    restate: dict[str, str] = {}
    unchanged: list[str] = []
    for src in sources:
        ctx = context.get(src.id, SourceContext("", 0, None))
        if src.outcome in PASSING_OUTCOMES:
            if src.id in planned or changed(src) or src.id not in shown.materialized:
                metadata = source_metadata(src, ctx.next_due, ctx.undated)
                events.append(_materialization(src.id, metadata, f"checked: {src.outcome}"))
            else:
                unchanged.append(src.id)
        elif src.outcome == "failed":
            line = failure_line(src)
            metadata = source_metadata(src, ctx.next_due, ctx.undated)
            events.append(_observation(src.id, metadata, f"FAILED · {line}"))
            failing[src.id] = line
            if src.id not in planned and src.id not in shown.failed:
                restate[src.id] = line
        elif src.id in planned and src.id in restating and _still_failing(ctx.state):
            # The failed check recorded its observation; this run only plans and fails it.
            failing[src.id] = restating[src.id]
        elif src.id in planned:
            metadata = source_metadata(src, ctx.next_due, ctx.undated)
            event, still_failing = _restated(src, ctx, metadata)
            if event is not None:
                events.append(event)
            if still_failing:
                failing[src.id] = still_failing
    return PartitionRecord(
        events=tuple(events), failing=failing, restate=restate, unchanged=tuple(unchanged)
    )


def changed(src: SourceReport) -> bool:
    """A passing check that recorded something new about the Source's items: a new Signal,
    an update, or a duplicate (a re-publication). A 304, or a body whose items were all seen,
    changes nothing a materialization would show."""
    return (src.created + src.updated + src.duplicates) > 0


def unchanged_metadata(unchanged: tuple[str, ...]) -> dict[str, MetadataEntry]:
    """The run's record of the Sources it checked unchanged (no event on their partitions):
    on the collection's observation, which a person opens from the run or the asset's page."""
    listing = ", ".join(unchanged) if unchanged else "–"
    return {
        "checked_unchanged": len(unchanged),
        "unchanged_sources": dg.MetadataValue.md(
            f"{len(unchanged)} Source(s) checked unchanged (their partitions keep their last "
            f"materialization):\n\n{listing}"
        ),
    }


def _still_failing(state: FeedState | None) -> bool:
    return state is not None and state.consecutive_failures > 0


def _restated(
    src: SourceReport, ctx: SourceContext, metadata: dict[str, MetadataEntry]
) -> tuple[PartitionEvent | None, str]:
    """A planned Source this run did not check keeps the state of its last check."""
    reason = src.error or "not checked"
    state = ctx.state
    if state is not None and state.consecutive_failures > 0:
        since = format_utc(state.last_attempt_at) if state.last_attempt_at else "?"
        line = (
            f"not checked ({reason}); still failing since its last check at {since} "
            f"({state.error_state or 'error'}); next attempt {src.next_attempt_words()}"
        )
        return _observation(src.id, metadata, f"FAILED · {line}"), line
    if state is not None and state.last_success_at is not None:
        last = format_utc(state.last_success_at)
        restated = {**metadata, "last_success_at": last, "skip_reason": reason}
        note = f"not checked ({reason}); its last check passed at {last}"
        return _materialization(src.id, restated, note), ""
    # Never checked (another run holds its lock and is checking it now): nothing to re-state.
    return None, ""


def _materialization(
    source_id: str, metadata: Mapping[str, MetadataEntry], description: str
) -> dg.AssetMaterialization:
    return dg.AssetMaterialization(**_event_fields(source_id, metadata, description))


def _observation(
    source_id: str, metadata: Mapping[str, MetadataEntry], description: str
) -> dg.AssetObservation:
    return dg.AssetObservation(**_event_fields(source_id, metadata, description))


def _event_fields(
    source_id: str, metadata: Mapping[str, MetadataEntry], description: str
) -> dict[str, Any]:
    """What every event on a Source partition carries."""
    return {
        "asset_key": SIGNALS_KEY,
        "partition": source_id,
        "description": description,
        "metadata": dict(metadata),
    }
