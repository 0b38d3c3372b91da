"""The registry sensor: the `sources` partitions stay equal to the valid Sources."""

import dagster as dg

from radar_pipeline.core.plan.collection import new_partition_order
from radar_pipeline.core.registry.sources import load_registry
from radar_pipeline.defs.partitions import SOURCES_PARTITIONS_NAME, sync_partition_requests
from radar_pipeline.defs.resources import RadarResource

TICK_SECONDS = 60


@dg.sensor(minimum_interval_seconds=TICK_SECONDS, default_status=dg.DefaultSensorStatus.RUNNING)
def source_registry_sensor(
    context: dg.SensorEvaluationContext, radar: RadarResource
) -> dg.SensorResult:
    """Add a partition for each new valid Source (ordered by cadence, then id: the waves of the
    due rule, core/plan/waves); remove those whose file is gone or invalid (their history
    stays in DuckDB)."""
    snapshot = load_registry(radar.paths().vault)
    valid = new_partition_order(snapshot)
    existing = list(context.instance.get_dynamic_partitions(SOURCES_PARTITIONS_NAME))
    requests = sync_partition_requests(existing, valid)
    if not requests:
        return dg.SensorResult(skip_reason=f"{len(valid)} Sources, partitions in sync")
    return dg.SensorResult(dynamic_partitions_requests=requests)
