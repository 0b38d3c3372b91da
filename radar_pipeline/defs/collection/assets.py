"""The `signals` asset: one partition per Source, a graph of ops fetch -> parse -> dedupe ->
signal_materialize. One run may cover many Sources (a partition range); each op hands the next
the whole batch in memory. The ops orchestrate; the rules live in `core.collect.Collector`."""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.collect.results import CheckResult, DedupedCheck
from radar_pipeline.core.models import FetchResult
from radar_pipeline.core.plan.collection import CollectionPlan, CollectionSpec, source_timings
from radar_pipeline.core.plan.schedule import next_due_at
from radar_pipeline.core.registry.sources import RegistrySnapshot
from radar_pipeline.core.reports import SourceReport
from radar_pipeline.core.store.accounting import undated_counts
from radar_pipeline.core.store.feed_state import load_states
from radar_pipeline.defs.collection.config import FAILED_SOURCES, SIGNALS_KEY, CollectConfig
from radar_pipeline.defs.collection.failures import failures_as_line
from radar_pipeline.defs.collection.metadata import collection_markdown, source_metadata
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME, sources_partitions
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
    with failures_as_line():
        keys = config.sources or list(context.partition_keys)
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
    with failures_as_line():
        collector = collection.collector(radar.paths())
        return ParsedBatch(fetched.plan, collector.parse(fetched.plan, fetched.results))


@dg.op(out=dg.Out(io_manager_key=MEM_IO))
def dedupe(
    radar: RadarResource, collection: CollectionResource, parsed: ParsedBatch
) -> DedupedBatch:
    """Classify every candidate: new, reused, updated or duplicate (layered keys)."""
    with failures_as_line():
        collector = collection.collector(radar.paths())
        return DedupedBatch(parsed.plan, collector.dedupe(parsed.results))


@dg.op(out=dg.Out(dg.Nothing, is_required=False))
def signal_materialize(
    context: dg.OpExecutionContext,
    radar: RadarResource,
    collection: CollectionResource,
    deduped: DedupedBatch,
) -> Iterator[Any]:
    """Write new Signal files, commit the index and feed state, run the page stage of the
    page-extraction Sources (their locks still held), and report per Source.

    Each Source that passed gets a materialization of its partition; each that failed an
    observation with the same figures. Then, if any Source failed, the step fails naming them
    (after the commit: DuckDB, the dead letters and the Source files already hold the failure).
    Dagster marks every partition the run planned but did not materialize as failed, so the
    failing Sources show *Failed* until they next succeed, whoever launched the run.
    """
    with failures_as_line():
        report = collection.collector(radar.paths()).commit(deduped.plan, deduped.items)
        context.log.info("collection report\n" + collection_markdown(report))
        # The recovery report of the whole collection, on the asset without a partition: it lands
        # in the run whatever its Sources did (a failed or skipped Source has no materialization).
        yield dg.AssetObservation(
            asset_key=SIGNALS_KEY,
            metadata={
                "collection_report": dg.MetadataValue.md(collection_markdown(report)),
                "downtime_from": report.downtime_from or "",
                "overdue": report.overdue,
                "due": report.due,
                "passed": report.totals.passed,
                "failed": report.totals.failed,
                "skipped": report.totals.skipped,
                "created": report.totals.created,
            },
        )
        next_due = next_due_times(radar, deduped.plan)
        ids = report.collection_ids or ((report.collection_id,) if report.collection_id else ())
        with radar.store().transaction() as con:
            undated = undated_counts(con, ids)
        for src in report.sources:
            if src.outcome == "skipped":
                continue  # not checked: neither materialized nor failed by this run
            passed = src.outcome in ("passed", "not-modified")
            event_type = dg.AssetMaterialization if passed else dg.AssetObservation
            metadata = source_metadata(src, next_due.get(src.id, "manual"), undated.get(src.id, 0))
            yield event_type(asset_key=SIGNALS_KEY, partition=src.id, metadata=metadata)
        failed = [s for s in report.sources if s.outcome == "failed"]
        if failed:
            raise sources_failed(failed)


def next_due_times(radar: RadarResource, plan: CollectionPlan) -> dict[str, str]:
    """When a `due` collection next checks each checked Source, after this commit (its next
    grid point, not before its backoff ends); `manual` Sources have none."""
    snapshot = RegistrySnapshot(
        sources=tuple(c.record for c in plan.checks if c.record is not None), issues=()
    )
    with radar.store().transaction() as con:
        states = load_states(con)
    now = plan.spec.as_of
    out: dict[str, str] = {}
    for t in source_timings(snapshot, states, now, plan.placement):
        offset = plan.placement.offset(t.source_id, t.cadence)
        due_at = next_due_at(
            t.source_id, t.cadence, t.last_success_at, t.backoff_until, now, offset
        )
        out[t.source_id] = format_utc(due_at) if due_at else "manual"
    return out


def sources_failed(failed: list[SourceReport]) -> dg.Failure:
    """The step failure of a run in which Sources failed: it names each with its error class.
    Its `failed_sources` metadata tells the sensors the commit recorded those failures."""
    names = ", ".join(f"{s.id} ({s.error_class or 'error'})" for s in failed)
    return dg.Failure(
        description=f"{len(failed)} Source(s) failed: {names}",
        metadata={FAILED_SOURCES: ",".join(s.id for s in failed)},
        # The same request would fail the same way; the Source's backoff decides when it is
        # checked again.
        allow_retries=False,
    )


@dg.graph_asset(
    partitions_def=sources_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name="signals",
)
def signals() -> Any:
    """Signals: one Markdown note per feed item in `Radar/Signals/`, deduplicated, with its
    provenance. One partition per Source: *materialized* when the Source's last check passed,
    *failed* when it failed (until it next succeeds). A partition's page shows the Source at a
    glance: last outcome, HTTP status, created/reused/duplicates, next due time, backoff and
    last error class. One run may cover many Sources (fetched concurrently)."""
    return signal_materialize(dedupe(parse(fetch())))
