"""Assembles the Dagster definitions; nothing else lives here."""

from __future__ import annotations

import dagster as dg

from radar_pipeline.defs.cleanup.assets import (
    weekly_cleanup,
    weekly_cleanup_job,
    weekly_cleanup_schedule,
)
from radar_pipeline.defs.cleanup.checks import retention_check
from radar_pipeline.defs.collection.assets import MEM_IO, signals
from radar_pipeline.defs.collection.checks import (
    SIGNAL_CHECKS,
    signal_audit_job,
    signal_audit_schedule,
    signal_checks_after_collection,
    signal_checks_after_failed_collection,
    signal_checks_job,
)
from radar_pipeline.defs.collection.freshness import (
    cadence_check_job,
    on_cadence_check,
    source_freshness_sensor,
    with_freshness,
)
from radar_pipeline.defs.collection.jobs import collect_job
from radar_pipeline.defs.collection.schedules import due_sources_schedule
from radar_pipeline.defs.collection.sensors import run_failure_dead_letter_sensor
from radar_pipeline.defs.collection.stream_checks import STREAM_CHECKS
from radar_pipeline.defs.evidence.assets import evidence_snapshot, evidence_snapshot_job
from radar_pipeline.defs.evidence.sensors import evidence_after_checks
from radar_pipeline.defs.history.schedules import prune_run_history_job, run_history_schedule
from radar_pipeline.defs.registry.assets import source_registry
from radar_pipeline.defs.registry.checks import registry_check
from radar_pipeline.defs.registry.sensors import source_registry_sensor
from radar_pipeline.defs.resources import ClockResource, CollectionResource, RadarResource

defs = dg.Definitions(
    assets=[source_registry, with_freshness(signals), weekly_cleanup, evidence_snapshot],
    asset_checks=[
        on_cadence_check,
        *SIGNAL_CHECKS,
        *STREAM_CHECKS,
        registry_check,
        retention_check,
    ],
    jobs=[
        collect_job,
        cadence_check_job,
        weekly_cleanup_job,
        signal_checks_job,
        signal_audit_job,
        prune_run_history_job,
        evidence_snapshot_job,
    ],
    schedules=[
        due_sources_schedule,
        weekly_cleanup_schedule,
        signal_audit_schedule,
        run_history_schedule,
    ],
    sensors=[
        source_registry_sensor,
        source_freshness_sensor,
        run_failure_dead_letter_sensor,
        signal_checks_after_collection,
        signal_checks_after_failed_collection,
        evidence_after_checks,
    ],
    resources={
        "radar": RadarResource(),
        "clock": ClockResource(),
        "collection": CollectionResource(),
        MEM_IO: dg.mem_io_manager,
    },
    executor=dg.in_process_executor,
)
