"""The job of the weekly close: one week's `weekly_cleanup` partition (and its `retention`
check, in the same run)."""

import dagster as dg

from radar_pipeline.defs.cleanup.assets import weekly_cleanup

WEEKLY_CLEANUP_JOB_NAME = "weekly_cleanup_job"

weekly_cleanup_job = dg.define_asset_job(
    WEEKLY_CLEANUP_JOB_NAME,
    selection=dg.AssetSelection.assets(weekly_cleanup),
    description="The weekly close of Temporary Content for one week (a partition of `weeks`).",
)
