"""Which Dagster runs a prune of the run history deletes: the rule, without the Dagster calls.

Run history grows by a run or more per Source check (each with its event log), and nothing in
Dagster prunes it. A prune deletes the runs that ended before `as_of - keep_days`, except:

- a run that has not ended (queued, starting, running, cancelling): its status is still news;
- a run holding what some partition shows (its latest materialization, or its latest
  attempt, which is how Dagster knows a partition failed) or the latest result of a check:
  deleting it would change what the UI says about that partition;
- a run an open dead letter names: a person has not yet decided on that failure.

A run's time is its clock: the `as_of` it decided with (a simulation or `--as-of`), else its
real start. So a simulated month is pruned by the same rule as a lived one.
`defs/history/prune.py` makes the Dagster calls; the CLI and the daily schedule call it.
"""

from __future__ import annotations

from collections.abc import Iterable, Set
from dataclasses import dataclass
from datetime import datetime, timedelta

from radar_pipeline.core.clock import require_aware


@dataclass(frozen=True)
class RunEntry:
    """One run of the history, as the rule needs it."""

    run_id: str
    started_at: datetime  # the run's clock: the as_of it decided with, else its real start
    ended: bool  # success, failure or canceled: only an ended run may be deleted


@dataclass(frozen=True)
class PrunePlan:
    """What a prune deletes and keeps, and why the old runs it keeps are kept."""

    cutoff: datetime  # runs that started before this may go
    delete: tuple[str, ...]  # oldest first
    keep: tuple[str, ...]
    protected: tuple[str, ...]  # old and ended, kept because something still shows them


def cutoff_of(as_of: datetime, keep_days: int) -> datetime:
    require_aware(as_of, "as_of")
    return as_of - timedelta(days=keep_days)


def old_ended(runs: Iterable[RunEntry], cutoff: datetime) -> list[RunEntry]:
    """The runs the rule would delete if nothing protected them, oldest first."""
    return sorted(
        (r for r in runs if r.ended and r.started_at < cutoff), key=lambda r: r.started_at
    )


def plan_prune(runs: Iterable[RunEntry], protected: Set[str], cutoff: datetime) -> PrunePlan:
    """Delete every old ended run that is not protected; keep the rest."""
    entries = list(runs)
    candidates = old_ended(entries, cutoff)
    delete = tuple(r.run_id for r in candidates if r.run_id not in protected)
    gone = set(delete)
    return PrunePlan(
        cutoff=cutoff,
        delete=delete,
        keep=tuple(r.run_id for r in entries if r.run_id not in gone),
        protected=tuple(r.run_id for r in candidates if r.run_id in protected),
    )
