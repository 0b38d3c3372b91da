"""The schedules of collection: `due_sources_schedule`, every minute one run per contiguous
block of due Sources, and `signal_audit_schedule`, the daily full read of the Signals folder.

One schedule for every Source, not one per Source: each Source's cadence is written in its
file (editable at any time) and its due-ness depends on DuckDB state (lastSuccessAt,
backoff), so a cron per Source would have to be rebuilt whenever a file changes and would
still have to read the same state. Instead the schedule ticks every minute and asks the
planner which Sources a `due` collection would check now (`preview_collection`: the due rule
of core/plan, each Source on its wave's grid, not in backoff, no publisher's wait pending).
The waves follow partition order (core/plan/waves), so the Sources due in one minute are
mostly one contiguous block: a day of 200 Sources is tens of runs, not thousands
(docs/operations.md, "The due rule").

A tick's due Sources become one run per contiguous block of them in partition order
(`partition_blocks`, the Sources in each run's config): a run costs a fresh interpreter and
its start-up, so a burst of 200 due Sources is a few runs, not 200. The runs plan no
partition: an unchanged check records nothing on its partition, and a Source that newly
failed is re-stated by a follow-up run that plans it (defs/collection/restate.py), so a
failing Source is exactly one failed partition, whichever block it rode in.

Exactly one run per Source per slot for a Source that passed (the slot: `due_slot`, the
Source's cadence-long window on its grid; the run's fetch op places the grids from the same
partition order), and one run per backoff step for a Source that failed. A Source is not
requested again while a collection run covering it is queued or running (its state changes
only at that run's commit, so it still looks due), nor again in a slot in which a run of this
schedule already covered it, unless its last check failed and that run was decided before its
backoff ended (`retry_from`, core/plan/collection.py, which also names the next attempt): a
failed Source is retried when its backoff ends, within its slot too, so a transient failure
costs its backoff (exponential from 5 minutes), not a cadence. The retry's own failure sets a
later backoff, so each step is one run, never one per tick; a publisher's wait and
`minIntervalSeconds` keep the Source out of the due set until they pass (the planner's wait
rules). Each run records the clock it was decided with (`radar/tick`), which is what says in
which slot (and which backoff step) each of its Sources was. When a Source's wave moves (a
Source before it was removed), its slot moves with it; its next check still waits for half a
cadence after its last success.

No replay: after any downtime the daemon evaluates only the latest tick of this schedule
(Dagster does not catch up missed ticks of a schedule without a partition set), and that tick
reads the state now: each overdue Source gets exactly one current check, whatever number of
its slots went by.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime

import dagster as dg

from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.plan.collection import (
    CollectionSpec,
    SourceTiming,
    preview_collection,
    retry_from,
    source_timings,
)
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.core.store.feed_state import read_states
from radar_pipeline.defs import tags
from radar_pipeline.defs.automation import schedule_status
from radar_pipeline.defs.collection.config import collect_run_config
from radar_pipeline.defs.collection.jobs import collect_job, signal_audit_job
from radar_pipeline.defs.collection.runs import run_sources
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME, partition_blocks
from radar_pipeline.defs.resources import ClockResource, RadarResource

COLLECT_CRON = "* * * * *"
# The daily full read of the Signals folder (UTC): what finds a Signal rewritten in place.
SIGNAL_AUDIT_CRON = "17 3 * * *"
TRIGGER = "schedule"
# A run that has not ended yet still owns its Sources.
IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]
# How many of this schedule's runs one page of the slot look-up reads (newest first).
RUNS_PAGE = 200


def queue_priority(timing: SourceTiming) -> int:
    """`dagster/priority` for the run queue (higher first): critical, then primary/discovery,
    then the rest; inside a group high > normal > low. Always 0 or more, above the checks'."""
    group, within = timing.rank
    return 10 * (2 - group) + (3 - within)


def block_run_key(tick: datetime, block: Sequence[str]) -> str:
    """`due:<tick clock>:<first>..<last>`: the same decision never launches twice."""
    return f"due:{format_utc(tick)}:{block[0]}..{block[-1]}"


def block_run_request(
    block: Sequence[str],
    timings: Mapping[str, SourceTiming],
    tick: datetime,
    as_of: str,
    launch: str,
) -> dg.RunRequest:
    """One run of `Collect_signals` in mode `due` over one contiguous block of Sources,
    ranked in the queue by its most urgent Source. It plans no partition (the Sources are in
    its config): partition_events.py records on a partition only what changed, and a
    follow-up run plans the Sources that newly failed (restate.py)."""
    clock = parse_utc(as_of) if as_of else None
    return dg.RunRequest(
        run_key=block_run_key(tick, block),
        run_config=collect_run_config("due", list(block), clock, TRIGGER, launch),
        tags={
            tags.PRIORITY: str(max(queue_priority(timings[s]) for s in block)),
            tags.TRIGGER: TRIGGER,
            tags.MODE: "due",
            tags.TICK: format_utc(tick),
            tags.LAUNCH: launch,
        },
    )


def schedule_clock(
    context: dg.ScheduleEvaluationContext, clock: ClockResource
) -> tuple[datetime, str]:
    """The tick's clock and the `as_of` its runs get: the `clock` resource's when it is set
    (simulations and tests; the runs decide with the same clock), else the tick's scheduled
    time (runs use now)."""
    as_of = clock.given()
    if as_of:
        return parse_utc(as_of), as_of
    scheduled = context.scheduled_execution_time
    return (scheduled.astimezone(UTC) if scheduled else datetime.now(UTC)), ""


def _launch_id(context: dg.ScheduleEvaluationContext, tick: datetime) -> str:
    """The id the runs of one tick share (the checks follow the tick, not each run): the
    tick's own instant, and the clock it decided with (a simulation holds that one still)."""
    scheduled = context.scheduled_execution_time or datetime.now(UTC)
    return f"schedule:{scheduled.astimezone(UTC).isoformat()}:{format_utc(tick)}"


def taken_sources(
    instance: dg.DagsterInstance,
    candidates: Mapping[str, SourceTiming],
    partitions: Sequence[str],
) -> set[str]:
    """The candidates a run already owns: covered by a collection run that has not ended (of
    any launcher), or covered in their current slot by a run of this schedule."""
    taken: set[str] = set()
    for run in instance.get_runs(dg.RunsFilter(job_name=collect_job.name, statuses=IN_FLIGHT)):
        taken.update(run_sources(run.tags, run.run_config or {}, partitions))
    oldest_slot = min((t.slot for t in candidates.values()), default=None)
    if oldest_slot is None:
        return taken
    for run in _schedule_runs_since(instance, oldest_slot):
        tick = parse_utc(run.tags[tags.TICK])
        for sid in run_sources(run.tags, run.run_config or {}, partitions):
            timing = candidates.get(sid)
            if timing is not None and tick >= retry_from(timing):
                taken.add(sid)
    return taken


def _schedule_runs_since(instance: dg.DagsterInstance, since: datetime) -> Iterable[dg.DagsterRun]:
    """This schedule's runs decided at or after `since`, newest first, read page by page."""
    cursor: str | None = None
    while True:
        page = instance.get_runs(
            dg.RunsFilter(job_name=collect_job.name, tags={tags.TRIGGER: TRIGGER}),
            cursor=cursor,
            limit=RUNS_PAGE,
        )
        for run in page:
            tick = run.tags.get(tags.TICK)
            if tick is None:
                continue  # launched before runs recorded their tick: no slot to compare
            if parse_utc(tick) < since:
                return
            yield run
        if len(page) < RUNS_PAGE:
            return
        cursor = page[-1].run_id


@dg.schedule(
    job=collect_job,
    cron_schedule=COLLECT_CRON,
    execution_timezone="UTC",
    default_status=schedule_status(),
    description=(
        "Every minute: the due Sources (cadence passed on their own grid, not in backoff) as "
        "one run of `Collect_signals` per contiguous block of Source partitions, the block of "
        "the most urgent Source first; a Source's slot is collected once, and a Source that "
        "failed is retried once its backoff ends (one run per backoff step). Missed ticks are "
        "never replayed: after downtime, one current check per overdue Source."
    ),
)
def due_sources_schedule(
    context: dg.ScheduleEvaluationContext, radar: RadarResource, clock: ClockResource
) -> list[dg.RunRequest] | dg.SkipReason:
    """One run per contiguous block (in partition order) of the Sources a `due` collection
    would check now, leaving out those a run already owns (`taken_sources`); blocks in
    recovery priority order (critical, then primary/discovery, then the rest). A Source that
    is not yet a partition waits one tick for the registry sensor to add it."""
    now, as_of = schedule_clock(context, clock)
    paths = radar.paths()
    partitions = list(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    snapshot = load_registry(paths.vault)
    states = read_states(radar.store())
    spec = CollectionSpec("preview", "due", now, (), TRIGGER, partition_order=tuple(partitions))
    preview = preview_collection(spec, snapshot, states)
    timings = {t.source_id: t for t in source_timings(snapshot, states, now, preview.placement)}
    known = set(partitions)
    candidates = {s: timings[s] for s in preview.checked if s in known and s in timings}
    taken = taken_sources(context.instance, candidates, partitions) if candidates else set()
    due = tuple(s for s in candidates if s not in taken)
    if not due:
        return dg.SkipReason(f"no Source due at {format_utc(now)} without a run in its slot")
    launch = _launch_id(context, now)
    return [
        block_run_request(block, timings, now, as_of, launch)
        for block in partition_blocks(partitions, due)
    ]


signal_audit_schedule = dg.ScheduleDefinition(
    name="signal_audit_schedule",
    job=signal_audit_job,
    cron_schedule=SIGNAL_AUDIT_CRON,
    execution_timezone="UTC",
    default_status=schedule_status(),
    description="The daily full audit of the Signals folder (every file stat'ed).",
)
