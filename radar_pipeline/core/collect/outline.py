"""The outline of a collection: the Sources it concerns, cut into bounded slices, and what one
slice hands on. Plain frozen values the Dagster steps store through their IO manager; this
module imports no fetcher and no parser (loading the definitions imports it).
core/collect/slices.py checks a slice; docs/architecture.md, "A collection in slices", says why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from radar_pipeline.core.collect.run_failure import record_run_failure, run_failure_of
from radar_pipeline.core.config import Settings
from radar_pipeline.core.errors import explain
from radar_pipeline.core.plan.collection import (
    CollectionFigures,
    CollectionSpec,
    collection_figures,
    preview_collection,
)
from radar_pipeline.core.plan.waves import Placement
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.store.fetch_attempts import planning_state

# Sources per slice. A cold check holds its body, its parse and its rendered Signals until the
# slice commits: about 0.5 MB a Source on feeds of 20 items of ~7 KB (issue 50: 1.38 GB for a
# one-batch run of 2,000), so 100 Sources are ~55 MB above the process's floor, whatever the
# registry's size. Fewer would pay the per-slice costs more often: reading its Source files, a
# plan and a commit (five store transactions, ~45 ms of CPU each to open the store). 100 is also
# the due rule's wave (core/plan/waves.WAVE_SIZE): a scheduled run of one wave is one slice.
SLICE_SOURCES = 100
# Slices per step. A step checks its slices one after another with one Collector: the parse
# workers boot once a step, not once a slice, and the step's own costs (its Dagster events, the
# outline loaded from the IO manager) are paid once for 500 Sources. Memory stays one
# slice's: each slice commits and drops its bodies, parses and rendered notes before the next
# begins. Several steps still let the multiprocess executor check a large run in parallel.
STEP_SLICES = 5


@dataclass(frozen=True)
class CollectionOutline:
    """What a collection's plan step hands on: the collection asked for, the Sources it
    concerns cut into slices (plan order), and the report's figures of the whole Radar, read
    before any slice commits (so each slice reports the same ones)."""

    spec: CollectionSpec
    slices: tuple[tuple[str, ...], ...]
    # Each slice's Source files (vault-relative): a slice reads its own, not the registry.
    files: tuple[tuple[str, ...], ...]
    # The due grids, placed on the whole registry (a slice's records alone would place
    # them otherwise).
    placement: Placement
    overdue: int
    downtime_from: datetime | None
    clock_behind: datetime | None
    # Slices per step: step k checks slices k * step_slices up to the next step's first.
    step_slices: int = STEP_SLICES

    def slice_spec(self, index: int) -> CollectionSpec:
        """The collection restricted to slice `index` (an explicit one names exactly it)."""
        return replace(self.spec, source_ids=self.slices[index], placement=self.placement)

    @property
    def figures(self) -> CollectionFigures:
        """The report's figures of the whole Radar, which every slice plans with."""
        return CollectionFigures(self.overdue, self.downtime_from, self.clock_behind)

    @property
    def source_ids(self) -> tuple[str, ...]:
        """Every Source of the collection, in plan order."""
        return tuple(sid for ids in self.slices for sid in ids)

    @property
    def steps(self) -> tuple[range, ...]:
        """Each step's slices (indexes), in plan order."""
        count, size = len(self.slices), self.step_slices
        return tuple(range(k, min(k + size, count)) for k in range(0, count, size))

    def step_key(self, step: int) -> str:
        """The step's mapping key, as the run's page shows it: the plan positions of its
        first and last Source (1-based), e.g. `sources_501_1000`."""
        indexes = self.steps[step]
        first = sum(len(ids) for ids in self.slices[: indexes.start])
        last = first + sum(len(self.slices[i]) for i in indexes)
        return f"sources_{first + 1}_{last}"


@dataclass(frozen=True)
class SliceSummary:
    """What one slice hands on: its counts, and the page-extraction Sources it checked."""

    index: int
    sources: int
    checked: int  # fetched, or failed before fetching: not skipped
    failed: int
    created: int
    page_sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class StepSummary:
    """What one step hands on: its slices' summaries, in plan order."""

    slices: tuple[SliceSummary, ...]


def outline_collection(
    store: Store,
    settings: Settings,
    spec: CollectionSpec,
    size: int = SLICE_SOURCES,
    step_slices: int = STEP_SLICES,
) -> CollectionOutline:
    """Which Sources `spec` concerns, in plan order, cut into slices of at most `size`, and
    those into steps of at most `step_slices`; taken without locks (each slice takes its
    own)."""
    snapshot = load_registry(settings.paths.vault)
    try:
        states, last = planning_state(store)
        preview = preview_collection(spec, snapshot, states)
        figures = collection_figures(spec, snapshot, states, last)
    except Exception as exc:
        # As a slice's failing plan would: recorded on each Source the run names, then raised.
        wanted = set(spec.source_ids)
        named = [r for r in snapshot.sources if r.source.id in wanted]
        if named:
            failure = run_failure_of(spec, named, explain(exc), store, snapshot)
            record_run_failure(store, settings.paths, failure)
        raise
    order = preview.concerned
    slices = tuple(order[i : i + size] for i in range(0, len(order), size))
    file_of = {r.source.id: r.record_path for r in snapshot.sources}
    files = tuple(tuple(file_of[sid] for sid in ids if sid in file_of) for ids in slices)
    return CollectionOutline(
        # The partition order has served: the placement stands for it in every later step (and
        # the outline, stored once a run, stays a few bytes a Source).
        replace(spec, partition_order=None, placement=preview.placement),
        slices,
        files,
        preview.placement,
        figures.overdue,
        figures.downtime_from,
        figures.clock_behind,
        step_slices,
    )
