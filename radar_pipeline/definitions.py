"""Assembles the Dagster definitions; nothing else lives here."""

from __future__ import annotations

import dagster as dg

from radar_pipeline.defs.assets import MEM_IO, signals, source_registry
from radar_pipeline.defs.jobs import collect_job
from radar_pipeline.defs.resources import RadarResource
from radar_pipeline.defs.sensors import source_registry_sensor

defs = dg.Definitions(
    assets=[source_registry, signals],
    jobs=[collect_job],
    sensors=[source_registry_sensor],
    resources={"radar": RadarResource(), MEM_IO: dg.mem_io_manager},
    executor=dg.in_process_executor,
)
