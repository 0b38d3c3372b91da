"""A collection in bounded slices of Sources: what keeps its memory flat in the registry's size.

A collection run (one Dagster run over a range of Source partitions) is cut into slices of at
most `SLICE_SOURCES` Sources (core/collect/outline.py), in the order its plan lists them (recovery
priority first), and the slices into steps of at most `STEP_SLICES`. A step checks its slices one
after another with one Collector (its fetcher settings and parse workers); each slice end to end:
it takes its Sources' locks, fetches them concurrently, parses each body on the worker pool as
it arrives, dedupes, writes the new Signals, commits (watermarks, validators, health: invariant
6 holds per slice) and releases its locks before the next slice begins. What a slice hands on is
a `SliceSummary` (a few counts); its report lands in the store, a part of the collection's that
its commit adds (store/collections.merge_collection). So nothing outlives a slice but ids and
counts, and a collection of 2,000 Sources holds no more bodies, parses and rendered Signals at
once than one of 100 (docs/architecture.md, "A collection in slices").

After the slices, `extract_pages` runs the page pass of the slices' page-extraction Sources
(their locks taken again, for the pass only), and `finished_report` reads the collection's
report back from the store, in the plan's order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from radar_pipeline.core.acquire.fetch import FetchSettings
from radar_pipeline.core.collect import page_stage
from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.collect.outline import CollectionOutline, SliceSummary, StepSummary
from radar_pipeline.core.collect.report import build_report
from radar_pipeline.core.config import Settings
from radar_pipeline.core.contract.collection import CollectionReport
from radar_pipeline.core.extract.pages import PageSettings
from radar_pipeline.core.plan.collection import CollectionPlan, CollectionSpec
from radar_pipeline.core.plan.locks import LockBook
from radar_pipeline.core.registry.sources import load_registry, load_sources
from radar_pipeline.core.store.collections import record_collection, replace_report, report_for
from radar_pipeline.core.store.connection import Store


def check_step(
    collector: Collector,
    outline: CollectionOutline,
    step: int,
    done: Callable[[SliceSummary], None] | None = None,
    failed: Callable[[int, Exception], None] | None = None,
) -> StepSummary:
    """Check the slices of step `step` one after another with `collector` (the step's: its
    parse workers serve every slice of the step); their summaries, each also handed to `done`
    as its slice ends (the step's log says it then).

    A slice that fails as a whole has its failure recorded on each of its Sources (the
    Collector does it, run_failure.py) and handed to `failed` with the slice's index; the step
    goes on with its other slices, as separate steps would, and then raises the first such
    failure."""
    summaries: list[SliceSummary] = []
    failures: list[Exception] = []
    for index in outline.steps[step]:
        try:
            summary = check_slice(collector, outline, index)
        except Exception as exc:
            failures.append(exc)
            if failed is not None:
                failed(index, exc)
            continue
        summaries.append(summary)
        if done is not None:
            done(summary)
    if failures:
        raise failures[0]
    return StepSummary(tuple(summaries))


def check_slice(collector: Collector, outline: CollectionOutline, index: int) -> SliceSummary:
    """Check slice `index` end to end with `collector`: plan under the slice's locks, fetch
    with parses started as bodies arrive, dedupe, commit, release the locks; the slice's
    summary."""
    spec = outline.slice_spec(index)
    # The slice's own Source files: the registry was read whole by the plan step (a full
    # read is ~1.6 s of CPU at 2,000 Sources; per slice it would cost the run that again).
    snapshot = load_sources(collector.paths.vault, outline.files[index])
    plan = collector.plan(spec, snapshot, outline.figures)
    try:
        checks = collector.dedupe(collector.parse(plan, collector.fetch(plan)))
        report = collector.commit(plan, checks, pages=False)
    finally:
        collector.locks.release_all(spec.collection_id)
    checked = [s for s in report.sources if s.outcome != "skipped"]
    return SliceSummary(
        index=index,
        sources=len(report.sources),
        checked=len(checked),
        failed=report.totals.failed,
        created=report.totals.created,
        page_sources=tuple(r.source.id for r in page_stage.page_sources(checks)),
    )


def extract_pages(
    settings: Settings,
    store: Store,
    spec: CollectionSpec,
    summaries: Sequence[SliceSummary],
    page_settings: PageSettings,
) -> CollectionReport | None:
    """The page pass of the page-extraction Sources the slices checked, each under its
    Source lock, taken again for the pass (a Source another collection holds meanwhile keeps
    its pages pending for its next check); the collection's report with their `pages`
    figures. None when no slice recorded a report."""
    report = report_for(store, spec.collection_id)
    wanted = {sid for s in summaries for sid in s.page_sources}
    if report is None or not wanted:
        return report
    locks = LockBook(settings.paths.locks_dir, store.source_locks())
    try:
        records = [
            rec
            for rec in load_registry(settings.paths.vault).sources
            if rec.source.id in wanted and locks.try_acquire(spec.collection_id, rec.source.id)
        ]
        return page_stage.run_pages(
            store,
            settings.paths.vault,
            FetchSettings.of(settings),
            page_settings,
            spec,
            records,
            report,
        )
    finally:
        locks.release_all()


def finished_report(store: Store, outline: CollectionOutline) -> CollectionReport:
    """The collection's report as its slices recorded it, its Sources in plan order (slices
    that ran in parallel commit in any order). A collection with nothing to check records its
    empty report here, so every collection has one."""
    spec = outline.spec
    recorded = report_for(store, spec.collection_id)
    if recorded is None:
        empty = CollectionPlan(
            spec, (), outline.overdue, outline.downtime_from, clock_behind=outline.clock_behind
        )
        report = build_report(empty, (), [])
        store.atomically(
            lambda con: record_collection(
                con, spec.dagster_run_id, spec.trigger, spec.as_of, report
            )
        )
        return report
    position = {sid: i for i, sid in enumerate(outline.source_ids)}
    ordered = tuple(sorted(recorded.sources, key=lambda s: position.get(s.id, len(position))))
    report = recorded.model_copy(update={"sources": ordered})
    # Written whole, once: later reads (the CLI, `radar report`, the checks) parse one report
    # rather than merging the slices' parts each time.
    store.atomically(lambda con: replace_report(con, spec.collection_id, report))
    return report
