"""Freshness: when a Source, or the Radar as a whole, has fallen behind its cadence. The rule
and its table, shared by the `on_cadence` check (checks.py) and `source_freshness_sensor`
(sensors.py); the FreshnessPolicy of `signals` is in assets.py.

Two layers, because Dagster's FreshnessPolicy is evaluated per asset, not per partition (it
looks at the latest materialization of any partition):
- `signals` carries a time-window FreshnessPolicy: the whole Radar is late when no Source has
  succeeded for a day (warn after 7 h: the default 6 h cadence plus the 1 h overlap).
- The check `on_cadence` says which Sources are late: their cadence passed without a
  success, plus `LATE_GRACE` so a check one sensor tick late is not; its Markdown table lists
  every Source with its cadence, last success and since when it is overdue.
  `source_freshness_sensor` launches one check-only run in a tick in which any Source's
  verdict flipped (late, or on time again), never a run per Source.

Why one verdict over all Sources and not one per partition: Dagster records a partitioned
check's result per partition only in a run of that one partition (in a range run the
partitions stay PLANNED and one result is kept), and a runless evaluation of a partitioned
check cannot be repeated for the same partition (an IntegrityError in Dagster 1.13). A run per
Source is what a burst must not cost (a first start flips every Source at once), so the check
judges all Sources in one run, as the evidence checks do; the Source that fails stays a failed
partition of `signals` itself.
"""

from collections.abc import Sequence
from datetime import datetime

from radar_pipeline.core.audit.cadence import LATE_GRACE, is_late
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.plan.collection import SourceTiming, source_timings
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.core.store.feed_state import read_states
from radar_pipeline.defs.resources import RadarResource

# The rule itself (`is_late`, `LATE_GRACE`) is core/audit/cadence.py's: `radar report` judges by it.
__all__ = ["LATE_GRACE", "cadence_table", "is_late", "source_timings_now"]


def _timing_row(t: SourceTiming) -> str:
    last = format_utc(t.last_success_at) if t.last_success_at else "never"
    since = format_utc(t.last_success_at + t.cadence) if t.last_success_at else "first check"
    backoff = format_utc(t.backoff_until) if t.backoff_until else "–"
    return f"| {t.source_id} | {t.cadence} | {last} | {since if t.overdue else '–'} | {backoff} |"


def cadence_table(timings: Sequence[SourceTiming]) -> str:
    """Markdown: each Source's cadence, last success, since when it is overdue, its backoff."""
    head = "| source | cadence | lastSuccessAt | overdue since | backoff until |\n|" + "---|" * 5
    return "\n".join([head, *(_timing_row(t) for t in timings)])


def source_timings_now(radar: RadarResource, now: datetime) -> tuple[SourceTiming, ...]:
    """Every Source's cadence and last success, as the registry and DuckDB say at `now`."""
    snapshot = load_registry(radar.paths().vault)
    states = read_states(radar.store())
    return source_timings(snapshot, states, now)
