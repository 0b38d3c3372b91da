"""The cleanup area wired: the weekly close, its `retention` check, job and schedule."""

import dagster as dg

from radar_pipeline.defs.cleanup.assets import weekly_cleanup
from radar_pipeline.defs.cleanup.checks import retention_check
from radar_pipeline.defs.cleanup.jobs import weekly_cleanup_job
from radar_pipeline.defs.cleanup.schedules import weekly_cleanup_schedule

defs = dg.Definitions(
    assets=[weekly_cleanup],
    asset_checks=[retention_check],
    jobs=[weekly_cleanup_job],
    schedules=[weekly_cleanup_schedule],
)
