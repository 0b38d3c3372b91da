"""Assembles the Dagster definitions; nothing else lives here."""

from __future__ import annotations

import dagster as dg

from radar_pipeline.defs.assets import MEM_IO, signals, source_registry
from radar_pipeline.defs.freshness import (
    cadence_check_job,
    on_cadence_check,
    source_freshness_sensor,
    with_freshness,
)
from radar_pipeline.defs.jobs import collect_job
from radar_pipeline.defs.resources import RadarResource
from radar_pipeline.defs.sensors import (
    due_sources_sensor,
    run_failure_dead_letter_sensor,
    source_registry_sensor,
)

defs = dg.Definitions(
    assets=[source_registry, with_freshness(signals)],
    asset_checks=[on_cadence_check],
    jobs=[collect_job, cadence_check_job],
    sensors=[
        source_registry_sensor,
        due_sources_sensor,
        source_freshness_sensor,
        run_failure_dead_letter_sensor,
    ],
    resources={"radar": RadarResource(), MEM_IO: dg.mem_io_manager},
    executor=dg.in_process_executor,
)
