"""Assets: the validated Source Registry and the Signals, one partition per Source."""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import dagster as dg
from pydantic import Field

from radar_pipeline.core.clock import parse_utc
from radar_pipeline.core.collect import headstart
from radar_pipeline.core.collect.collector import CheckResult, DedupedCheck
from radar_pipeline.core.models import FetchResult
from radar_pipeline.core.plan.collection import CollectionPlan, CollectionSpec, Mode
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.defs.partitions import sources_partitions
from radar_pipeline.defs.report import collection_markdown, source_metadata
from radar_pipeline.defs.resources import RadarResource

MEM_IO = "radar_mem_io"
SIGNALS_KEY = dg.AssetKey("signals")


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


class CollectConfig(dg.Config):
    """How a run collects. Runs launched from the UI check exactly their partitions."""

    mode: str = "explicit"  # due | all | explicit
    sources: list[str] = Field(
        default_factory=list
    )  # restrict the run's partitions to these ids (CLI selections)
    as_of: str = ""  # ISO-8601; empty means now
    trigger: str = "dagster"


@dg.asset(group_name="radar")
def source_registry(
    context: dg.AssetExecutionContext, radar: RadarResource
) -> dg.MaterializeResult:  # type: ignore[type-arg]
    """The validated Source Registry: which Source files are active Sources, and every issue."""
    snapshot = load_registry(radar.paths().vault)
    rows = (
        "\n".join(f"| `{i.path}` | {i.code} | {i.message} |" for i in snapshot.issues)
        or "| – | – | no issues |"
    )
    return dg.MaterializeResult(
        metadata={
            "sources": len(snapshot.sources),
            "active": sum(1 for r in snapshot.sources if r.source.is_eligible),
            "issues": len(snapshot.issues),
            "issue_table": dg.MetadataValue.md(f"| file | code | message |\n|---|---|---|\n{rows}"),
        }
    )


@dg.op(out=dg.Out(io_manager_key=MEM_IO))
def fetch(
    context: dg.OpExecutionContext, config: CollectConfig, radar: RadarResource
) -> FetchedBatch:
    """Plan the checks of this run's Sources (gates, cadence, locks), then fetch concurrently."""
    keys = list(context.partition_keys)
    if config.sources:
        keys = [k for k in keys if k in set(config.sources)]
    mode: Mode = config.mode if config.mode in ("due", "all", "explicit") else "explicit"  # type: ignore[assignment]
    spec = CollectionSpec(
        collection_id=context.run_id,
        mode=mode,
        as_of=parse_utc(config.as_of) if config.as_of else datetime.now(UTC),
        source_ids=tuple(keys),
        trigger=config.trigger,
        dagster_run_id=context.run_id,
    )
    head = headstart.take(context.run_id)
    if head is not None:
        # `radar collect` planned and fetched this run's Sources while Dagster was loading.
        if not head.matches(spec, radar.paths()):
            headstart.abandon(head)
            raise dg.Failure(
                f"the command's head start ({head.spec}) is not what this run asks for ({spec})"
            )
        plan, results = head.result()
        context.log.info(
            f"{len(plan.checks)} Source checks planned ({mode}), overdue {plan.overdue}; "
            "planned and fetched by `radar collect` while it was starting this run"
        )
        return FetchedBatch(plan, results)
    collector = radar.collector()
    plan = collector.plan(spec)
    context.log.info(f"{len(plan.checks)} Source checks planned ({mode}), overdue {plan.overdue}")
    return FetchedBatch(plan, collector.fetch(plan))


@dg.op(out=dg.Out(io_manager_key=MEM_IO))
def parse(
    context: dg.OpExecutionContext,
    radar: RadarResource,
    fetched: FetchedBatch,
) -> ParsedBatch:
    """Parse each fetched body into item candidates and rejections (feedparser)."""
    return ParsedBatch(fetched.plan, radar.collector().parse(fetched.plan, fetched.results))


@dg.op(out=dg.Out(io_manager_key=MEM_IO))
def dedupe(
    context: dg.OpExecutionContext,
    radar: RadarResource,
    parsed: ParsedBatch,
) -> DedupedBatch:
    """Classify every candidate: new, reused, updated or duplicate (layered keys)."""
    return DedupedBatch(parsed.plan, radar.collector().dedupe(parsed.results))


@dg.op(out=dg.Out(dg.Nothing, is_required=False))
def signal_materialize(
    context: dg.OpExecutionContext,
    radar: RadarResource,
    deduped: DedupedBatch,
) -> Iterator[Any]:
    """Write new Signal files, commit the index and feed state, and report per Source.

    Emits one materialization per Source that passed (its partition) and an observation per
    Source that failed, so one range run still shows each Source's own outcome.
    """
    # The evidence checks of `signals`, in this same run (defs/checks.py says why here).
    from radar_pipeline.defs.checks import (
        signal_check_evaluations,
        start_signal_audits,
        unjudged_check_evaluations,
    )

    as_of = deduped.plan.spec.as_of
    committed = radar.collector().commit(deduped.plan, deduped.items)
    try:
        # The Sources' health mirrors (Collector.commit) and the audits are done on the worker
        # processes, when the command has them, while each Source is reported to Dagster here.
        audits = start_signal_audits(radar.paths(), as_of)
        report = committed.report
        context.log.info("collection report\n" + collection_markdown(report))
        for src in report["sources"]:
            event_type = (
                dg.AssetMaterialization
                if src["outcome"] in ("passed", "not-modified")
                else dg.AssetObservation
            )
            if src["outcome"] == "skipped":
                continue
            yield event_type(
                asset_key="signals", partition=src["id"], metadata=source_metadata(src)
            )
        # The recovery report of the whole collection, on the asset without a partition: it
        # lands in the run whatever its Sources did (a failed or skipped Source has no
        # materialization).
        yield dg.AssetObservation(
            asset_key="signals",
            metadata={
                "collection_report": dg.MetadataValue.md(collection_markdown(report)),
                "downtime_from": report["downtimeFrom"] or "",
                **{
                    k: report[k]
                    for k in ("overdue", "due", "passed", "failed", "skipped", "created")
                },
            },
        )
    finally:
        committed.finish()
    try:
        evaluations = signal_check_evaluations(radar.paths(), as_of, audits)
    except Exception as exc:
        # The collection is committed; the checks could not judge it. Say so in each check's
        # record (an ERROR, never a silent gap or a pass); each can be re-run from the UI.
        context.log.error(f"evidence checks could not run: {exc!r}")
        evaluations = unjudged_check_evaluations(f"the audit could not run: {exc!r}")
    yield from evaluations


@dg.graph_asset(
    partitions_def=sources_partitions,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name="radar",
)
def signals() -> Any:
    """Signals: one Markdown note per feed item in `Radar/Signals/`, deduplicated, with
    provenance. Partitioned by Source; one run may cover many Sources (fetched concurrently)."""
    return signal_materialize(dedupe(parse(fetch())))
