"""Assembles the Dagster definitions; nothing else lives here."""

from __future__ import annotations

import dagster as dg

from radar_pipeline.defs.assets import MEM_IO, signals, source_registry
from radar_pipeline.defs.checks import (
    EVIDENCE_CHECKS,
    signal_checks_after_collection,
    signal_checks_job,
)
from radar_pipeline.defs.cleanup import weekly_cleanup, weekly_cleanup_job, weekly_cleanup_schedule
from radar_pipeline.defs.evidence import evidence_snapshot
from radar_pipeline.defs.jobs import collect_job
from radar_pipeline.defs.resources import RadarResource
from radar_pipeline.defs.sensors import source_registry_sensor

defs = dg.Definitions(
    assets=[source_registry, signals, weekly_cleanup, evidence_snapshot],
    asset_checks=EVIDENCE_CHECKS,
    jobs=[collect_job, weekly_cleanup_job, signal_checks_job],
    schedules=[weekly_cleanup_schedule],
    sensors=[source_registry_sensor, signal_checks_after_collection],
    resources={"radar": RadarResource(), MEM_IO: dg.mem_io_manager},
    executor=dg.in_process_executor,
)
