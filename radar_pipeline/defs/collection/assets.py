"""The `signals` asset: one partition per Source, a graph of ops plan -> check_sources (one
step per few slices of Sources, mapped) -> pages -> signal_materialize. One run may cover many
Sources (a partition range); the plan step cuts them into bounded slices (core/collect/slices.py)
and the slices into steps; a step checks each of its slices end to end in turn (locks, fetch,
parse as bodies arrive, dedupe, write, commit, release). The ops hand each other plain values
through the run's IO manager (the plan's outline, a few counts per slice): no live object
crosses a step, so the job runs under any executor, a process per step included. The ops
orchestrate; the rules live in core.collect."""

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import dagster as dg

from radar_pipeline.core.clock import parse_utc
from radar_pipeline.core.collect.outline import (
    SLICE_SOURCES,
    STEP_SLICES,
    CollectionOutline,
    SliceSummary,
    StepSummary,
    outline_collection,
)
from radar_pipeline.core.contract.collection import CollectionReport
from radar_pipeline.core.contract.outcomes import ItemOutcome
from radar_pipeline.core.errors import explain
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.store.accounting import read_undated_counts
from radar_pipeline.core.store.feed_state import read_states
from radar_pipeline.defs import tags
from radar_pipeline.defs.collection.config import FAILED_SOURCES, SIGNALS_KEY, CollectConfig
from radar_pipeline.defs.collection.failures import failures_as_line
from radar_pipeline.defs.collection.metadata import collection_headline, collection_markdown
from radar_pipeline.defs.collection.partition_events import (
    PartitionRecord,
    PartitionsShown,
    SourceContext,
    partition_record,
    unchanged_metadata,
)
from radar_pipeline.defs.collection.restate import restate_metadata, restated_by
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME, sources_partitions
from radar_pipeline.defs.resources import CollectionResource, RadarResource

# The whole Radar is late when no Source has succeeded for a day; warn after 7 h (the default 6 h
# cadence plus the 1 h overlap). Which Sources are late is the `on_cadence` check's (cadence.py).
SIGNALS_FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=timedelta(hours=24), warn_window=timedelta(hours=7)
)
# The most Sources one run of `signals` covers when a backfill splits a selection into runs.
MAX_SOURCES_PER_RUN = 1000


@dg.op(
    ins={"registry": dg.In(dg.Nothing)},
    out={"outline": dg.Out(), "steps": dg.DynamicOut(int)},
)
def plan(
    context: dg.OpExecutionContext,
    config: CollectConfig,
    radar: RadarResource,
    collection: CollectionResource,
) -> Iterator[dg.Output[CollectionOutline] | dg.DynamicOutput[int]]:
    """Which Sources this run checks (gates, cadence, backoff), in recovery priority order,
    cut into slices and the slices into steps: the outline, and one mapped step per few slices
    (its index). No lock is taken here; each slice takes its own."""
    with failures_as_line():
        # A run without a partition (nothing to check: launch.py) names no Source here.
        partitioned = context.has_partition_key or context.has_partition_key_range
        keys = config.sources or (list(context.partition_keys) if partitioned else [])
        spec = CollectionSpec(
            collection_id=context.run_id,
            mode=config.mode,
            as_of=config.clock(),
            source_ids=tuple(keys),
            trigger=config.trigger,
            dagster_run_id=context.run_id,
            launch_id=config.launch or None,
            # The waves the launcher decided with, read again: a key added since goes to the end
            # and moves no one's wave, but a Source that became eligible or left in between shifts
            # the waves after it, and a Source of the block may then not be due here (left open:
            # the run config could carry the tick's order).
            partition_order=tuple(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME)),
            # A run of the collection schedule: the tick that decided it (its slot is covered).
            tick=parse_utc(tick) if (tick := context.run.tags.get(tags.TICK)) else None,
        )
        size = SLICE_SOURCES if collection.slice_sources is None else collection.slice_sources
        per_step = STEP_SLICES if collection.step_slices is None else collection.step_slices
        outline = outline_collection(radar.store(), radar.settings(), spec, size, per_step)
        context.log.info(
            f"{len(outline.source_ids)} Sources ({config.mode}) in {len(outline.slices)} "
            f"slices, {len(outline.steps)} steps, overdue {outline.overdue}"
        )
        yield dg.Output(outline, "outline")
        for step in range(len(outline.steps)):
            yield dg.DynamicOutput(step, output_name="steps", mapping_key=outline.step_key(step))


@dg.op
def check_sources(
    context: dg.OpExecutionContext,
    radar: RadarResource,
    collection: CollectionResource,
    outline: CollectionOutline,
    step: int,
) -> StepSummary:
    """Check the step's slices of Sources in turn, each end to end: take their locks, fetch
    concurrently, parse each body as it arrives, dedupe, write the new Signals, commit
    (watermarks, validators, health), release the locks. Their reports land in the store; the
    step hands on their counts."""
    # Imported here, as the resource imports the Collector: only a collection step needs the
    # fetcher and the parsers, not every process that loads the definitions.
    from radar_pipeline.core.collect.slices import check_step

    def done(summary: SliceSummary) -> None:  # as each slice ends: the run's page shows progress
        context.log.info(
            f"slice {summary.index}: {summary.checked} of {summary.sources} Sources checked, "
            f"{summary.failed} failed, {summary.created} Signals created"
        )

    def failed(index: int, exc: Exception) -> None:  # recorded on its Sources; the step goes on
        context.log.error(f"slice {index} failed as a whole: {explain(exc).line}")

    with failures_as_line(), collection.collector(radar.settings()) as collector:
        return check_step(collector, outline, step, done, failed)


@dg.op(out=dg.Out(dg.Nothing))
def pages(
    context: dg.OpExecutionContext,
    radar: RadarResource,
    collection: CollectionResource,
    outline: CollectionOutline,
    steps: list[StepSummary],
) -> None:
    """Page extraction for the checked `fullText: page-extraction` Sources (their policy and
    legal approval name the pages), each under its Source lock; its figures go into the
    collection's report."""
    from radar_pipeline.core.collect.slices import extract_pages

    slices = [summary for checked in steps for summary in checked.slices]
    wanted = sum(len(s.page_sources) for s in slices)
    with failures_as_line():
        extract_pages(
            radar.settings(), radar.store(), outline.spec, slices, collection.page_settings()
        )
    context.log.info(f"page extraction: {wanted} Sources")


@dg.op(ins={"paged": dg.In(dg.Nothing)}, out=dg.Out(dg.Nothing, is_required=False))
def signal_materialize(
    context: dg.OpExecutionContext,
    radar: RadarResource,
    outline: CollectionOutline,
) -> Iterator[Any]:
    """Record the collection: its report, and each Source's partition.

    What each partition gets is decided in defs/collection/partition_events.py: a Source that
    passed is materialized when its check changed something or its partition does not read
    materialized (in a run that plans no partition; one that plans its partitions materializes
    every Source that passed); one checked unchanged is listed on the collection's
    observation; one that failed gets an observation carrying its failure's line and the step
    then fails naming it (after the commit: DuckDB, the dead letters and the Source files
    already hold the failure), so its partition reads *Failed* until it next succeeds: a run
    that did not plan it names it for a follow-up run that does (restate.py). A partition this
    run planned but did not check keeps its last state.

    The output is never yielded: Dagster would materialize every partition of the run's range
    with it, checked or not. So the checks a launch from an asset's page selects are skipped
    in that run, and the run status sensor runs them right after it (defs/collection/sensors.py).
    """
    from radar_pipeline.core.collect.slices import finished_report

    with failures_as_line():
        report = finished_report(radar.store(), outline)
        context.log.info("collection report\n" + collection_markdown(report))
        planned = planned_partitions(context)
        record = partition_record(
            tuple(report.sources),
            planned,
            source_contexts(radar, report),
            shown=None if planned else partitions_shown(context, report),
            restating=restated_by(context.instance, context.run.tags),
        )
        # The recovery report of the whole collection, on the asset without a partition: it lands
        # in the run whatever its Sources did (a Source reported only, failed, or checked
        # unchanged has no materialization of its own; the unchanged ones are listed here).
        yield dg.AssetObservation(
            asset_key=SIGNALS_KEY,
            description=collection_headline(report),
            metadata={
                "collection_report": dg.MetadataValue.md(collection_markdown(report)),
                "downtime_from": report.downtime_from or "",
                "overdue": report.overdue,
                "due": report.due,
                "passed": report.totals.passed,
                "failed": report.totals.failed,
                "skipped": report.totals.skipped,
                ItemOutcome.CREATED.field: report.totals.created,
                **unchanged_metadata(record.unchanged),
            },
        )
        yield from record.events
        if record.failing:
            raise sources_failed(record, outline.spec.as_of)


def partitions_shown(context: dg.OpExecutionContext, report: CollectionReport) -> PartitionsShown:
    """What the partitions of the report's checked Sources read in Dagster now: one read of
    the asset's status cache (brought up to date by the read), the state a person sees."""
    keys = [s.id for s in report.sources if s.outcome != "skipped"]
    if not keys:
        return PartitionsShown()
    status = context.instance.get_status_by_partition(SIGNALS_KEY, keys, sources_partitions) or {}
    return PartitionsShown(
        materialized=frozenset(
            k for k, v in status.items() if v == dg.AssetPartitionStatus.MATERIALIZED
        ),
        failed=frozenset(k for k, v in status.items() if v == dg.AssetPartitionStatus.FAILED),
    )


def planned_partitions(context: dg.OpExecutionContext) -> frozenset[str]:
    """The Source partitions this run planned (Dagster recorded a planned materialization of
    each when the run was created): its partition or partition range, none for a run without."""
    if context.has_partition_key_range or context.has_partition_key:
        return frozenset(context.partition_keys)
    return frozenset()


def source_contexts(radar: RadarResource, report: CollectionReport) -> dict[str, SourceContext]:
    """Per Source of the report: when it is next due (the report's `nextAttemptAt`, the time
    the Source note names too; "manual" for a `manual` Source), its undated items, its state."""
    ids = report.collection_ids or ((report.collection_id,) if report.collection_id else ())
    store = radar.store()
    undated = read_undated_counts(store, ids)
    states = read_states(store)
    return {
        src.id: SourceContext(
            src.next_attempt_at or "manual", undated.get(src.id, 0), states.get(src.id)
        )
        for src in report.sources
    }


def sources_failed(record: PartitionRecord, as_of: datetime) -> dg.Failure:
    """The step failure of a run in which Sources failed (or, planned but not checked, are
    still failing): one line per Source, root cause first. Its `failed_sources` metadata tells
    the sensors the commit recorded those failures."""
    count = len(record.failing)
    return dg.Failure(
        description=f"{count} Source{'s' * (count != 1)} failed\n"
        + "\n".join(f"{sid}: {line}" for sid, line in record.failing.items()),
        metadata={
            FAILED_SOURCES: ",".join(record.failing),
            **restate_metadata(record.restate, as_of),
        },
        # The same request would fail the same way; the Source's backoff decides when it is
        # checked again.
        allow_retries=False,
    )


@dg.graph_asset(
    partitions_def=sources_partitions,
    # Runs over contiguous ranges of Sources: Dagster splits any partition selection into one
    # run per contiguous range (a non-contiguous pick from the UI is several runs). A
    # multi-run policy makes the launch dialog say so, where single_run() promises "a single
    # run"; the cap is far above any registry this profile serves, so a range is never split.
    backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=MAX_SOURCES_PER_RUN),
    group_name="signals",
    # The lineage edge from the registry (its partitions are the valid Sources); nothing is
    # loaded from it.
    ins={"source_registry": dg.AssetIn(dagster_type=dg.Nothing)},
)
def signals(source_registry: Any) -> Any:
    """Signals: one Markdown note per feed item in `Radar/Signals/`, deduplicated, with its
    provenance. One partition per Source: *materialized* when the Source's last check passed,
    *failed* when it failed (until it next succeeds). A partition's page shows the Source at a
    glance: last outcome, HTTP status, created/reused/duplicates, next due time, backoff and
    last error class. One run may cover many Sources, checked in bounded slices."""
    outline, steps = plan(source_registry)
    checked = steps.map(lambda step: check_sources(outline=outline, step=step))
    return signal_materialize(
        outline=outline, paged=pages(outline=outline, steps=checked.collect())
    )


def with_freshness(assets: dg.AssetsDefinition) -> dg.AssetsDefinition:
    """`signals` with its FreshnessPolicy (`@graph_asset` does not take one directly)."""
    return assets.map_asset_specs(lambda spec: dg.apply_freshness_policy(spec, SIGNALS_FRESHNESS))
