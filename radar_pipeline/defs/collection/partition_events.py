"""What a collection run records on each Source partition of `signals`: the one place.

Dagster 1.13 derives a partition's state from runs, not from what an op says about it: it is
*materialized* by its latest materialization, *failed* while the latest run that planned it
failed without materializing it, and a partition planned by a run that succeeded without
materializing it reads *Missing* once its status cache is rebuilt (docs/operations.md, "What
a partition shows"). A partition's state must be its Source's last check, so:

- A Source checked and passed (or not modified): a materialization with its figures.
- A Source checked and failed: an observation whose description is the failure's line (root
  cause, HTTP status, next attempt), and the run fails naming it, so the partition is failed.
- A Source the run planned but did not check (minimum interval, a publisher's wait, a lock
  held by another run): the launchers in this project never plan such a Source (they foresee
  the skips), but a backfill from the UI plans every partition a person picked. The run then
  re-states the Source's last check: a materialization marked `outcome: skipped` when that
  check passed (the Signals are that check's), or the run fails naming it when it failed (it
  is still failing, in its backoff). Either way the partition keeps its state, and a
  backfill ends as soon as its runs do (an asset backfill waits for a state for every
  partition it requested, then calls the rest failed).
- A Source the run did not plan (reported only): nothing on its partition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.contract.collection import SourceReport
from radar_pipeline.core.store.feed_state import FeedState
from radar_pipeline.defs.collection.config import SIGNALS_KEY
from radar_pipeline.defs.collection.metadata import (
    MetadataEntry,
    failure_line,
    next_attempt,
    source_metadata,
)

PartitionEvent = dg.AssetMaterialization | dg.AssetObservation


@dataclass(frozen=True)
class PartitionRecord:
    """What one run records per Source partition: its events, and the line of each Source
    whose partition must read failed after the run (the run fails naming them)."""

    events: tuple[PartitionEvent, ...] = ()
    failing: Mapping[str, str] = field(default_factory=dict)  # Source id -> its line


@dataclass(frozen=True)
class SourceContext:
    """What a Source's events say beyond its report: when it is next due, how many of its
    eligible items had no date, and its state before this run (for a skipped Source)."""

    next_due: str
    undated: int
    state: FeedState | None


def partition_record(
    sources: tuple[SourceReport, ...],
    planned: frozenset[str],
    context: Mapping[str, SourceContext],
) -> PartitionRecord:
    """The events of one run on each Source partition, by the rules in the module docstring."""
    events: list[PartitionEvent] = []
    failing: dict[str, str] = {}
    for src in sources:
        ctx = context.get(src.id, SourceContext("", 0, None))
        metadata = source_metadata(src, ctx.next_due, ctx.undated)
        if src.outcome in ("passed", "not-modified"):
            events.append(_materialization(src.id, metadata, f"checked: {src.outcome}"))
        elif src.outcome == "failed":
            line = failure_line(src, ctx.next_due)
            events.append(_observation(src.id, metadata, f"FAILED · {line}"))
            failing[src.id] = line
        elif src.id in planned:
            event, still_failing = _restated(src, ctx, metadata)
            if event is not None:
                events.append(event)
            if still_failing:
                failing[src.id] = still_failing
    return PartitionRecord(events=tuple(events), failing=failing)


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
            f"({state.error_state or 'error'}); next attempt {next_attempt(ctx.next_due)}"
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
