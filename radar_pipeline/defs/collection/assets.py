"""The `signals` asset: one partition per Source, a graph of ops fetch -> parse -> dedupe ->
signal_materialize. One run may cover many Sources (a partition range); each op hands the next
the whole batch as its output, kept in memory (`MEM_IO`): the plan, and what its stage made of
each check (the fetch op's output carries the parses it already started, which the parse op
awaits). The ops orchestrate; the rules live in `core.collect.Collector`."""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import dagster as dg

from radar_pipeline.core.collect.results import CheckResult, DedupedCheck, FetchedChecks
from radar_pipeline.core.contract.collection import CollectionReport
from radar_pipeline.core.contract.outcomes import ItemOutcome
from radar_pipeline.core.plan.collection import CollectionPlan, CollectionSpec
from radar_pipeline.core.store.accounting import read_undated_counts
from radar_pipeline.core.store.feed_state import read_states
from radar_pipeline.defs.collection.config import FAILED_SOURCES, SIGNALS_KEY, CollectConfig
from radar_pipeline.defs.collection.failures import failures_as_line
from radar_pipeline.defs.collection.metadata import collection_headline, collection_markdown
from radar_pipeline.defs.collection.partition_events import (
    PartitionRecord,
    SourceContext,
    partition_record,
)
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME, sources_partitions
from radar_pipeline.defs.resources import CollectionResource, RadarResource

MEM_IO = "radar_mem_io"
# The whole Radar is late when no Source has succeeded for a day; warn after 7 h (the default 6 h
# cadence plus the 1 h overlap). Which Sources are late is the `on_cadence` check's (cadence.py).
SIGNALS_FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=timedelta(hours=24), warn_window=timedelta(hours=7)
)
# The most Sources one run of `signals` covers when a backfill splits a selection into runs.
MAX_SOURCES_PER_RUN = 1000


@dataclass(frozen=True)
class FetchedBatch:
    """Output of the fetch op: the plan, one fetch result per planned check, and the parses
    the fetch already started (`FetchedChecks`)."""

    plan: CollectionPlan
    checks: FetchedChecks


@dataclass(frozen=True)
class ParsedBatch:
    """Output of the parse op: the plan and each check's items or classified failure."""

    plan: CollectionPlan
    results: tuple[CheckResult, ...]


@dataclass(frozen=True)
class DedupedBatch:
    """Output of the dedupe op: the plan and each check's dedupe decisions."""

    plan: CollectionPlan
    items: tuple[DedupedCheck, ...]


@dg.op(ins={"registry": dg.In(dg.Nothing)}, out=dg.Out(io_manager_key=MEM_IO))
def fetch(
    context: dg.OpExecutionContext,
    config: CollectConfig,
    radar: RadarResource,
    collection: CollectionResource,
) -> FetchedBatch:
    """Plan the checks of this run's Sources (gates, cadence, locks), then fetch concurrently."""
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
        )
        collector = collection.collector(radar.settings())
        plan = collector.plan(spec)
        planned = len(plan.source_plans)
        context.log.info(f"{planned} Source checks planned ({config.mode}), overdue {plan.overdue}")
        return FetchedBatch(plan, collector.fetch(plan))


@dg.op(out=dg.Out(io_manager_key=MEM_IO))
def parse(
    radar: RadarResource, collection: CollectionResource, fetched: FetchedBatch
) -> ParsedBatch:
    """Parse each fetched body into item candidates and reasoned rejections (feedparser),
    awaiting the parses the fetch op started."""
    with failures_as_line():
        collector = collection.collector(radar.settings())
        return ParsedBatch(fetched.plan, collector.parse(fetched.plan, fetched.checks))


@dg.op(out=dg.Out(io_manager_key=MEM_IO))
def dedupe(
    radar: RadarResource, collection: CollectionResource, parsed: ParsedBatch
) -> DedupedBatch:
    """Classify every candidate: new, reused, updated or duplicate (layered keys)."""
    with failures_as_line():
        collector = collection.collector(radar.settings())
        return DedupedBatch(parsed.plan, collector.dedupe(parsed.results))


@dg.op(out=dg.Out(dg.Nothing, is_required=False))
def signal_materialize(
    context: dg.OpExecutionContext,
    radar: RadarResource,
    collection: CollectionResource,
    deduped: DedupedBatch,
) -> Iterator[Any]:
    """Write new Signal files, commit the index and feed state, run the page stage of the
    page-extraction Sources (their locks still held), and record each Source's partition.

    What each partition gets is decided in defs/collection/partition_events.py: a Source that
    passed is materialized; one that failed gets an observation carrying its failure's line
    and the step then fails naming it (after the commit: DuckDB, the dead letters and the
    Source files already hold the failure), so its partition reads *Failed* until it next
    succeeds, whoever launched the run. A partition this run planned but did not check keeps
    its last state.

    The output is never yielded: Dagster would materialize every partition of the run's range
    with it, checked or not. So the checks a launch from an asset's page selects are skipped
    in that run, and the run status sensor runs them right after it (defs/collection/sensors.py).
    """
    with failures_as_line():
        report = collection.collector(radar.settings()).commit(deduped.plan, deduped.items)
        context.log.info("collection report\n" + collection_markdown(report))
        # The recovery report of the whole collection, on the asset without a partition: it lands
        # in the run whatever its Sources did (a Source reported only, or failed, has no
        # materialization of its own).
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
            },
        )
        record = partition_record(
            tuple(report.sources),
            planned_partitions(context),
            source_contexts(radar, report),
        )
        yield from record.events
        if record.failing:
            raise sources_failed(record)


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


def sources_failed(record: PartitionRecord) -> dg.Failure:
    """The step failure of a run in which Sources failed (or, planned but not checked, are
    still failing): one line per Source, root cause first. Its `failed_sources` metadata tells
    the sensors the commit recorded those failures."""
    count = len(record.failing)
    return dg.Failure(
        description=f"{count} Source{'s' * (count != 1)} failed\n"
        + "\n".join(f"{sid}: {line}" for sid, line in record.failing.items()),
        metadata={FAILED_SOURCES: ",".join(record.failing)},
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
    last error class. One run may cover many Sources (fetched concurrently)."""
    return signal_materialize(dedupe(parse(fetch(source_registry))))


def with_freshness(assets: dg.AssetsDefinition) -> dg.AssetsDefinition:
    """`signals` with its FreshnessPolicy (`@graph_asset` does not take one directly)."""
    return assets.map_asset_specs(lambda spec: dg.apply_freshness_policy(spec, SIGNALS_FRESHNESS))
