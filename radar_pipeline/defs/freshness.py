"""Freshness: when a Source, or the Radar as a whole, has fallen behind its cadence.

Two layers, because Dagster's FreshnessPolicy is evaluated per asset, not per partition (it
looks at the latest materialization of any partition):
- `signals` carries a time-window FreshnessPolicy: the whole Radar is late when no Source has
  succeeded for a day (warn after 7 h: the default 6 h cadence plus the 1 h overlap).
- The partitioned check `on_cadence` says, per Source partition, whether its cadence passed
  without a success. `source_freshness_sensor` records it without a run (runless check
  evaluations) whenever a Source's verdict or lastSuccessAt changes, so every partition shows
  late or on time in the UI and nothing has to be materialized to find out. Run in a
  collection, the same check judges the run's Sources at the collection's clock.
"""

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import dagster as dg

from radar_pipeline.core.plan import SourceTiming, source_timings
from radar_pipeline.core.registry import load_registry
from radar_pipeline.core.schedule import format_utc, parse_utc
from radar_pipeline.core.state import load_states
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME, sources_partitions
from radar_pipeline.defs.resources import RadarResource
from radar_pipeline.defs.sensors import TICK_SECONDS, evaluation_time

SIGNALS_KEY = dg.AssetKey("signals")
ON_CADENCE = "on_cadence"

SIGNALS_FRESHNESS = dg.FreshnessPolicy.time_window(
    fail_window=timedelta(hours=24), warn_window=timedelta(hours=7)
)


def with_freshness(assets: dg.AssetsDefinition) -> dg.AssetsDefinition:
    """`signals` with its FreshnessPolicy (`@graph_asset` does not take one directly)."""
    return assets.map_asset_specs(lambda spec: dg.apply_freshness_policy(spec, SIGNALS_FRESHNESS))


def _timing_row(t: SourceTiming) -> str:
    last = format_utc(t.last_success_at) if t.last_success_at else "never"
    late = format_utc(t.last_success_at + t.cadence) if t.last_success_at else "first check"
    backoff = format_utc(t.backoff_until) if t.backoff_until else "–"
    return f"| {t.source_id} | {t.cadence} | {last} | {late if t.overdue else '–'} | {backoff} |"


def cadence_table(timings: Sequence[SourceTiming]) -> str:
    """Markdown: each Source's cadence, last success, since when it is late, its backoff."""
    head = (
        "| source | cadence | lastSuccessAt | late since | backoff until |\n|---|---|---|---|---|"
    )
    return "\n".join([head, *(_timing_row(t) for t in timings)])


def _timings(radar: RadarResource, now: datetime) -> tuple[SourceTiming, ...]:
    snapshot = load_registry(radar.paths().vault)
    with radar.store().transaction() as con:
        states = load_states(con)
    return source_timings(snapshot, states, now)


def _run_clock(run_config: Mapping[str, Any]) -> datetime:
    """The clock of the collection this check runs in (its `as_of`), else the sensors' clock."""
    try:
        as_of = str(run_config["ops"]["signals"]["ops"]["fetch"]["config"]["as_of"])
    except (KeyError, TypeError):
        as_of = ""
    return parse_utc(as_of) if as_of else evaluation_time()


@dg.asset_check(
    asset=SIGNALS_KEY,
    name=ON_CADENCE,
    partitions_def=sources_partitions,
    blocking=False,
)
def on_cadence_check(
    context: dg.AssetCheckExecutionContext, radar: RadarResource
) -> dg.AssetCheckResult:
    """The checked Sources are within their cadence: each succeeded less than one cadence ago
    (`manual` and ineligible Sources never are late). WARN, not ERROR: a failing publisher
    keeps its Source late, which is recorded, not broken. In a range run Dagster keeps one
    result for all the run's Sources; the sensor records the per-partition verdicts."""
    now = _run_clock(context.run.run_config or {})
    keys = set(context.partition_keys)
    timings = [t for t in _timings(radar, now) if t.source_id in keys]
    late = [t for t in timings if t.overdue]
    return dg.AssetCheckResult(
        passed=not late,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "overdue": len(late),
            "as_of": format_utc(now),
            "sources": dg.MetadataValue.md(cadence_table(timings)),
        },
    )


def _evaluation(
    source_id: str, timing: SourceTiming | None, now: datetime
) -> dg.AssetCheckEvaluation:
    late = timing is not None and timing.overdue
    if timing is None:
        description = "not cadence-driven (manual, disabled, blocked or not approved)"
    elif late:
        description = f"late: no success within {timing.cadence}"
    else:
        description = f"on cadence ({timing.cadence})"
    return dg.AssetCheckEvaluation(
        asset_key=SIGNALS_KEY,
        check_name=ON_CADENCE,
        partition=source_id,
        passed=not late,
        severity=dg.AssetCheckSeverity.WARN,
        description=description,
        metadata={
            "as_of": format_utc(now),
            "last_success_at": format_utc(timing.last_success_at)
            if timing and timing.last_success_at
            else "never",
        },
    )


@dg.sensor(minimum_interval_seconds=TICK_SECONDS, default_status=dg.DefaultSensorStatus.RUNNING)
def source_freshness_sensor(
    context: dg.SensorEvaluationContext, radar: RadarResource
) -> dg.SensorResult:
    """Per Source partition, a runless `on_cadence` verdict whenever it changes (late or on
    time, or a new lastSuccessAt that supersedes the PLANNED record a range run leaves)."""
    now = evaluation_time()
    partitions = list(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    by_id = {t.source_id: t for t in _timings(radar, now)}
    try:
        previous: dict[str, Any] = json.loads(context.cursor) if context.cursor else {}
    except json.JSONDecodeError:
        previous = {}
    current: dict[str, Any] = {}
    events: list[dg.AssetCheckEvaluation] = []
    for source_id in partitions:
        timing = by_id.get(source_id)
        last = timing.last_success_at if timing else None
        state = [bool(timing and timing.overdue), format_utc(last) if last else None]
        current[source_id] = state
        if previous.get(source_id) != state:
            events.append(_evaluation(source_id, timing, now))
    cursor = json.dumps(current, sort_keys=True)
    if not events:
        return dg.SensorResult(skip_reason="no Source changed its cadence verdict", cursor=cursor)
    return dg.SensorResult(asset_events=events, cursor=cursor)
