"""The collection area wired: `signals` with its checks, jobs, schedules and sensors, and the
resource only its ops use (how a collection's steps check their Sources). What the ops hand
each other is stored by the Definitions' default IO manager (pickles under the instance's
storage), so any executor can run them."""

import dagster as dg

from radar_pipeline.defs.collection.assets import signals, with_freshness
from radar_pipeline.defs.collection.checks import signal_evidence
from radar_pipeline.defs.collection.jobs import (
    cadence_check_job,
    collect_job,
    signal_audit_job,
    signal_checks_job,
)
from radar_pipeline.defs.collection.schedules import due_sources_schedule, signal_audit_schedule
from radar_pipeline.defs.collection.sensors import (
    failed_partitions_sensor,
    run_failure_dead_letter_sensor,
    signal_checks_after_collection,
    signal_checks_after_failed_collection,
    source_freshness_sensor,
)
from radar_pipeline.defs.resources import CollectionResource

defs = dg.Definitions(
    assets=[with_freshness(signals)],
    asset_checks=[signal_evidence],
    jobs=[collect_job, signal_checks_job, signal_audit_job, cadence_check_job],
    schedules=[due_sources_schedule, signal_audit_schedule],
    sensors=[
        failed_partitions_sensor,
        run_failure_dead_letter_sensor,
        signal_checks_after_collection,
        signal_checks_after_failed_collection,
        source_freshness_sensor,
    ],
    resources={"collection": CollectionResource()},
)
