"""Freshness: when a Source, or the Radar as a whole, has fallen behind its cadence.

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

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import dagster as dg

from radar_pipeline.core.clock import as_of_or_now, format_utc
from radar_pipeline.core.jsontypes import JsonObject
from radar_pipeline.core.plan.collection import SourceTiming, source_timings
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.core.store.feed_state import read_states
from radar_pipeline.defs import tags
from radar_pipeline.defs.automation import TICK_SECONDS, sensor_status
from radar_pipeline.defs.collection.config import SIGNALS_KEY, config_of
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME
from radar_pipeline.defs.resources import ClockResource, RadarResource

ON_CADENCE = "on_cadence"
CADENCE_CHECK_OP = f"{SIGNALS_KEY.path[-1]}_{ON_CADENCE}"  # the check's op: `<asset>_<check>`
# A Source is due at the latest at lastSuccessAt + cadence and its run starts within a tick or two;
# it is late only when that did not happen.
LATE_GRACE = timedelta(minutes=15)

SIGNALS_FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=timedelta(hours=24), warn_window=timedelta(hours=7)
)


def with_freshness(assets: dg.AssetsDefinition) -> dg.AssetsDefinition:
    """`signals` with its FreshnessPolicy (`@graph_asset` does not take one directly)."""
    return assets.map_asset_specs(lambda spec: dg.apply_freshness_policy(spec, SIGNALS_FRESHNESS))


def _timing_row(t: SourceTiming) -> str:
    last = format_utc(t.last_success_at) if t.last_success_at else "never"
    since = format_utc(t.last_success_at + t.cadence) if t.last_success_at else "first check"
    backoff = format_utc(t.backoff_until) if t.backoff_until else "–"
    return f"| {t.source_id} | {t.cadence} | {last} | {since if t.overdue else '–'} | {backoff} |"


def cadence_table(timings: Sequence[SourceTiming]) -> str:
    """Markdown: each Source's cadence, last success, since when it is overdue, its backoff."""
    head = "| source | cadence | lastSuccessAt | overdue since | backoff until |\n|" + "---|" * 5
    return "\n".join([head, *(_timing_row(t) for t in timings)])


def _timings(radar: RadarResource, now: datetime) -> tuple[SourceTiming, ...]:
    snapshot = load_registry(radar.paths().vault)
    states = read_states(radar.store())
    return source_timings(snapshot, states, now)


class CadenceClock(dg.Config):
    """The clock the freshness sensor decided with (`as_of`: its `clock` resource); empty:
    the collection's clock when the check runs in one, else the `clock` resource's."""

    as_of: str = ""


def cadence_run_config(as_of: str) -> dict[str, object]:
    """The check-only run's config: the sensor's tick clock, so the run judges (and a prune
    dates it) by the clock it was requested at, as the collection runs are."""
    return {"ops": {CADENCE_CHECK_OP: {"config": {"as_of": as_of}}}}


def _run_clock(
    given: CadenceClock, run_config: Mapping[str, Any], clock: ClockResource
) -> datetime:
    """The tick's clock, else that of the collection this check runs in, else the resource's."""
    if given.as_of:
        return as_of_or_now(given.as_of)
    config = config_of(run_config)
    return config.clock() if config is not None and config.as_of else clock.now()


@dg.asset_check(asset=SIGNALS_KEY, name=ON_CADENCE, blocking=False)
def on_cadence_check(
    context: dg.AssetCheckExecutionContext,
    config: CadenceClock,
    radar: RadarResource,
    clock: ClockResource,
) -> dg.AssetCheckResult:
    """Every Source is on cadence: each succeeded less than one cadence (plus `LATE_GRACE`)
    ago; `manual` and ineligible Sources are never late. WARN, not ERROR: a failing publisher
    keeps its Source late, which is recorded, not broken. `overdue` counts the late ones; the
    table lists every Source."""
    now = _run_clock(config, context.run.run_config or {}, clock)
    timings = list(_timings(radar, now))
    late = [t for t in timings if is_late(t, now)]
    return dg.AssetCheckResult(
        passed=not late,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "overdue": len(late),
            "late": ", ".join(t.source_id for t in late) or "none",
            "as_of": format_utc(now),
            "sources": dg.MetadataValue.md(cadence_table(timings)),
        },
    )


cadence_check_job = dg.define_asset_job(
    "source_cadence_check",
    selection=dg.AssetSelection.checks(on_cadence_check),
    executor_def=dg.in_process_executor,
    description=(
        "The `on_cadence` check alone: which Sources are late on their cadence. Requested by "
        "`source_freshness_sensor` when some Source's verdict flipped."
    ),
)


def is_late(timing: SourceTiming, now: datetime) -> bool:
    """Overdue by more than `LATE_GRACE`; a Source that never succeeded is late."""
    if not timing.overdue:
        return False
    last = timing.last_success_at
    return last is None or now >= last + timing.cadence + LATE_GRACE


@dg.sensor(
    job=cadence_check_job,
    minimum_interval_seconds=TICK_SECONDS,
    default_status=sensor_status(),
    description=(
        "Every minute: runs the `on_cadence` check (job `source_cadence_check`) once when some "
        "Source became late on its cadence or on time again; one run whatever the number."
    ),
)
def source_freshness_sensor(
    context: dg.SensorEvaluationContext, radar: RadarResource, clock: ClockResource
) -> dg.SensorResult:
    """One check-only `on_cadence` run in a tick in which some Source partition's verdict
    flipped since the last tick (the first tick: when some Source is late), whatever the
    number of Sources that flipped. The run key names the verdicts it is about, so the same
    state never runs twice."""
    now = clock.now()
    partitions = list(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    by_id = {t.source_id: t for t in _timings(radar, now)}
    try:
        previous: JsonObject = json.loads(context.cursor) if context.cursor else {}
    except json.JSONDecodeError:
        previous = {}
    current: dict[str, bool] = {}
    for source_id in partitions:
        timing = by_id.get(source_id)
        current[source_id] = timing is not None and is_late(timing, now)
    flipped = [s for s in partitions if previous.get(s, False) != current[s]]
    cursor = json.dumps(current, sort_keys=True)
    if not flipped:
        return dg.SensorResult(skip_reason="no Source changed its cadence verdict", cursor=cursor)
    late = sum(current.values())
    digest = hashlib.sha256(cursor.encode("utf-8")).hexdigest()[:16]
    request = dg.RunRequest(
        run_key=f"on_cadence:{format_utc(now)}:{digest}",
        run_config=cadence_run_config(clock.given()),
        tags={
            tags.TRIGGER: "freshness",
            tags.VERDICT: f"{late} late, {len(flipped)} changed",
            tags.PRIORITY: str(tags.CHECKS_PRIORITY),
        },
    )
    return dg.SensorResult(run_requests=[request], cursor=cursor)
