"""The evidence area wired: the snapshot of what the Radar can show, its job, and the sensor
that follows every run that evaluated checks."""

import dagster as dg

from radar_pipeline.defs.evidence.assets import evidence_snapshot
from radar_pipeline.defs.evidence.jobs import evidence_snapshot_job
from radar_pipeline.defs.evidence.sensors import evidence_after_checks

defs = dg.Definitions(
    assets=[evidence_snapshot],
    jobs=[evidence_snapshot_job],
    sensors=[evidence_after_checks],
)
