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
    assets=[source_registry, with_freshness(signals), weekly_cleanup, evidence_snapshot],
    asset_checks=[on_cadence_check, *EVIDENCE_CHECKS],
    jobs=[collect_job, cadence_check_job, weekly_cleanup_job, signal_checks_job],
    schedules=[weekly_cleanup_schedule],
    sensors=[
        source_registry_sensor,
        due_sources_sensor,
        source_freshness_sensor,
        run_failure_dead_letter_sensor,
        signal_checks_after_collection,
    ],
    resources={"radar": RadarResource(), MEM_IO: dg.mem_io_manager},
    executor=dg.in_process_executor,
)
