"""The registry sensor: the `sources` partitions stay equal to the valid Sources, and the
registry is observed whenever what it decides changed."""

import dagster as dg

from radar_pipeline.core.plan.collection import new_partition_order
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.defs import tags
from radar_pipeline.defs.automation import TICK_SECONDS, sensor_status
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME, sync_partition_requests
from radar_pipeline.defs.registry.assets import (
    SOURCE_REGISTRY_KEY,
    registry_metadata,
    registry_version,
)
from radar_pipeline.defs.resources import RadarResource


@dg.sensor(
    minimum_interval_seconds=TICK_SECONDS,
    default_status=sensor_status(),
    description=(
        "Every minute: keeps the `sources` partitions of `signals` equal to the valid Sources "
        "(adds new ones, removes those whose file is gone or invalid) and records an "
        "observation of `source_registry` when what the registry decides changed."
    ),
)
def source_registry_sensor(
    context: dg.SensorEvaluationContext, radar: RadarResource
) -> dg.SensorResult:
    """Add a partition for each new valid Source (ordered by cadence, then id: the waves of the
    due rule, core/plan/waves); remove those whose file is gone or invalid (their history
    stays in DuckDB). The tick's message says what it changed."""
    snapshot = load_registry(radar.paths().vault)
    valid = new_partition_order(snapshot)
    existing = list(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    requests = sync_partition_requests(existing, valid)
    version = registry_version(snapshot)
    events = []
    if version != context.cursor:
        events.append(
            dg.AssetObservation(
                asset_key=SOURCE_REGISTRY_KEY,
                metadata=registry_metadata(snapshot),
                tags={tags.DATA_VERSION: version},
            )
        )
    return dg.SensorResult(
        dynamic_partitions_requests=requests,
        asset_events=events,
        cursor=version,
        skip_reason=tick_message(existing, valid, len(snapshot.issues), bool(events)),
    )


def tick_message(existing: list[str], valid: list[str], issues: int, observed: bool) -> str:
    """What one tick did, in one line: the partitions added and removed, and whether the
    registry was observed."""
    added = [s for s in valid if s not in set(existing)]
    removed = [s for s in existing if s not in set(valid)]
    parts = []
    if added:
        parts.append(f"added {len(added)} partition(s): {', '.join(added)}")
    if removed:
        parts.append(
            f"removed {len(removed)} partition(s) (file gone or invalid): " + ", ".join(removed)
        )
    if not parts:
        parts.append(f"{len(valid)} Sources, partitions in sync")
    if observed:
        parts.append(f"registry observed ({len(valid)} valid Sources, {issues} issues)")
    return "; ".join(parts)
