"""The `signals` asset: one partition per Source, a graph of ops fetch -> parse -> dedupe ->
signal_materialize. One run may cover many Sources (a partition range); each op hands the next
the whole batch in memory. The ops orchestrate; the rules live in `core.collect.Collector`."""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg

from radar_pipeline.core.collect.results import CheckResult, DedupedCheck
from radar_pipeline.core.models import FetchResult
from radar_pipeline.core.plan.collection import CollectionPlan, CollectionSpec
from radar_pipeline.defs.collection.config import SIGNALS_KEY, CollectConfig
from radar_pipeline.defs.collection.metadata import collection_markdown, source_metadata
from radar_pipeline.defs.partitions import sources_partitions
from radar_pipeline.defs.resources import CollectionResource, RadarResource

MEM_IO = "radar_mem_io"


@dataclass(frozen=True)
class FetchedBatch:
    """Output of the fetch op: the plan and one fetch result per planned check."""

    plan: CollectionPlan
    results: tuple[FetchResult | None, ...]


@dataclass(frozen=True)
class ParsedBatch:
    plan: CollectionPlan
    results: tuple[CheckResult, ...]


@dataclass(frozen=True)
class DedupedBatch:
    plan: CollectionPlan
    items: tuple[DedupedCheck, ...]


@dg.op(out=dg.Out(io_manager_key=MEM_IO))
def fetch(
    context: dg.OpExecutionContext,
    config: CollectConfig,
    radar: RadarResource,
    collection: CollectionResource,
) -> FetchedBatch:
    """Plan the checks of this run's Sources (gates, cadence, locks), then fetch concurrently."""
    keys = list(context.partition_keys)
    if config.sources:
        keys = [k for k in keys if k in set(config.sources)]
    spec = CollectionSpec(
        collection_id=context.run_id,
        mode=config.mode,
        as_of=config.clock(),
        source_ids=tuple(keys),
        trigger=config.trigger,
        dagster_run_id=context.run_id,
    )
    collector = collection.collector(radar.paths())
    plan = collector.plan(spec)
    context.log.info(
        f"{len(plan.checks)} Source checks planned ({config.mode}), overdue {plan.overdue}"
    )
    return FetchedBatch(plan, collector.fetch(plan))


@dg.op(out=dg.Out(io_manager_key=MEM_IO))
def parse(
    radar: RadarResource, collection: CollectionResource, fetched: FetchedBatch
) -> ParsedBatch:
    """Parse each fetched body into item candidates and reasoned rejections (feedparser)."""
    collector = collection.collector(radar.paths())
    return ParsedBatch(fetched.plan, collector.parse(fetched.plan, fetched.results))


@dg.op(out=dg.Out(io_manager_key=MEM_IO))
def dedupe(
    radar: RadarResource, collection: CollectionResource, parsed: ParsedBatch
) -> DedupedBatch:
    """Classify every candidate: new, reused, updated or duplicate (layered keys)."""
    collector = collection.collector(radar.paths())
    return DedupedBatch(parsed.plan, collector.dedupe(parsed.results))


@dg.op(out=dg.Out(dg.Nothing, is_required=False))
def signal_materialize(
    context: dg.OpExecutionContext,
    radar: RadarResource,
    collection: CollectionResource,
    deduped: DedupedBatch,
) -> Iterator[Any]:
    """Write new Signal files, commit the index and feed state, and report per Source.

    Emits one materialization per Source that passed (its partition) and an observation per
    Source that failed, so one range run still shows each Source's own outcome.
    """
    report = collection.collector(radar.paths()).commit(deduped.plan, deduped.items)
    context.log.info("collection report\n" + collection_markdown(report))
    for src in report["sources"]:
        if src["outcome"] == "skipped":
            continue
        passed = src["outcome"] in ("passed", "not-modified")
        event_type = dg.AssetMaterialization if passed else dg.AssetObservation
        yield event_type(asset_key=SIGNALS_KEY, partition=src["id"], metadata=source_metadata(src))
    # The recovery report of the whole collection, on the asset without a partition: it lands
    # in the run whatever its Sources did (a failed or skipped Source has no materialization).
    yield dg.AssetObservation(
        asset_key=SIGNALS_KEY,
        metadata={
            "collection_report": dg.MetadataValue.md(collection_markdown(report)),
            "downtime_from": report["downtimeFrom"] or "",
            **{k: report[k] for k in ("overdue", "due", "passed", "failed", "skipped", "created")},
        },
    )


@dg.graph_asset(
    partitions_def=sources_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name="radar",
)
def signals() -> Any:
    """Signals: one Markdown note per feed item in `Radar/Signals/`, deduplicated, with
    provenance. Partitioned by Source; one run may cover many Sources (fetched concurrently)."""
    return signal_materialize(dedupe(parse(fetch())))
