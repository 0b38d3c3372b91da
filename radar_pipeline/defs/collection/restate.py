"""The follow-up run that makes a newly failed Source a *failed* partition.

Collections launched by `radar collect` and the schedule plan no partition (planning 2,000
partitions costs more than checking them: docs/operations.md, "What a partition shows"). A
runtime materialization needs no planning, but Dagster 1.13 has no public event that marks a
partition failed: a partition reads failed only while the latest run that *planned* it failed
without materializing it. So when such a collection fails Sources whose partitions do not
read failed yet, their lines ride in its step failure (`RESTATE_SOURCES`), and a follow-up run
of `Collect_signals` plans each contiguous block of them, in mode `all` at the collection's
clock (not `due`: a Source that passed before is not due on its cadence, and would not even be
reported): they are in their backoff, so it checks nothing, records no new observation
(`partition_events.py`, `restating`) and fails naming them with the failed check's own line.
A Source already failed needs none: its partition stays failed.

`radar collect` launches the follow-ups right after its run (launch.py); for a scheduled run,
`failed_partitions_sensor` requests them (run key `restate:<run id>:<first>..<last>`). A
follow-up shares its collection's launch (one checks run follows both) and carries the trigger
`restate`: `radar report` reads it as part of no collection (its Sources were checked by the
run it re-states).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

import dagster as dg

from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.jsontypes import JsonObject
from radar_pipeline.core.store.collections import RESTATE_TRIGGER
from radar_pipeline.defs import tags
from radar_pipeline.defs.collection.config import collect_run_config
from radar_pipeline.defs.partitions import partition_blocks

# Metadata keys of a collection's step failure: {Source id: line} of the failed Sources a
# follow-up run must re-state, and the collection's clock (their backoff runs from it).
RESTATE_SOURCES = "restate_sources"
RESTATE_AS_OF = "restate_as_of"


@dataclass(frozen=True)
class RestateRun:
    """One follow-up run: the block of partitions it plans, its run config and tags."""

    block: tuple[str, ...]
    run_key: str
    run_config: JsonObject
    tags: dict[str, str]


@dataclass(frozen=True)
class Restatement:
    """What a collection run asks to be re-stated: each Source's line, and its clock."""

    lines: Mapping[str, str]
    as_of: datetime | None = None


def restatement_of(instance: dg.DagsterInstance, run_id: str) -> Restatement:
    """The Sources a collection run asks to be re-stated, with their lines (none: it asks
    for nothing, or it did not fail because Sources failed)."""
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE):
        event = entry.dagster_event
        user = event.step_failure_data.user_failure_data if event is not None else None
        if user is not None and RESTATE_SOURCES in user.metadata:
            value = user.metadata[RESTATE_SOURCES].value
            clock = user.metadata.get(RESTATE_AS_OF)
            as_of = parse_utc(str(clock.value)) if clock is not None and clock.value else None
            if isinstance(value, dict):
                return Restatement({str(k): str(v) for k, v in value.items()}, as_of)
    return Restatement({})


def restate_metadata(lines: Mapping[str, str], as_of: datetime) -> dict[str, dg.MetadataValue]:
    """The step failure's metadata naming the Sources to re-state (none when empty)."""
    if not lines:
        return {}
    return {
        RESTATE_SOURCES: dg.MetadataValue.json(dict(lines)),
        RESTATE_AS_OF: dg.MetadataValue.text(format_utc(as_of)),
    }


def restate_runs(
    run_id: str,
    run_tags: Mapping[str, str],
    restatement: Restatement,
    partitions: Sequence[str],
) -> list[RestateRun]:
    """The follow-up runs of one collection run: one per contiguous block (in partition order)
    of the Sources to re-state that are still partitions, at the collection's clock (so their
    backoff, at least a minute from it, has not ended: the run checks nothing)."""
    launch = run_tags.get(tags.LAUNCH, "")
    known = set(partitions)
    blocks = partition_blocks(partitions, [s for s in restatement.lines if s in known])
    out: list[RestateRun] = []
    for block in blocks:
        run_tags_out = {
            **tags.partition_range(block[0], block[-1]),
            tags.TRIGGER: RESTATE_TRIGGER,
            tags.MODE: "all",
            tags.RESTATES: run_id,
            **({tags.LAUNCH: launch} if launch else {}),
            **{k: v for k, v in run_tags.items() if k in (tags.EVIDENCE_CHECKS, tags.PRIORITY)},
        }
        config = collect_run_config("all", list(block), restatement.as_of, RESTATE_TRIGGER, launch)
        out.append(
            RestateRun(
                block=tuple(block),
                run_key=f"restate:{run_id}:{block[0]}..{block[-1]}",
                run_config=config,
                tags=run_tags_out,
            )
        )
    return out


def restated_by(instance: dg.DagsterInstance, run_tags: Mapping[str, str]) -> dict[str, str]:
    """In a follow-up run: the lines of the failures it re-states (read from the collection
    run it follows); none in any other run."""
    original = run_tags.get(tags.RESTATES)
    return dict(restatement_of(instance, original).lines) if original else {}
