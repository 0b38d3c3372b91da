"""The evidence check on `weekly_cleanup`."""

import dagster as dg

from radar_pipeline.core.audit.run import run_audit
from radar_pipeline.defs.check_results import check_result
from radar_pipeline.defs.cleanup.assets import weekly_cleanup
from radar_pipeline.defs.resources import ClockResource, RadarResource


@dg.asset_check(asset=weekly_cleanup, name="retention", blocking=False)
def retention_check(radar: RadarResource, clock: ClockResource) -> dg.AssetCheckResult:
    """Nothing under Temporary Content predates the last weekly close (which retained 0), and
    no full text lives anywhere else: no Signal body longer than a summary, no temporary-content
    file outside the folder. Unpartitioned: the verdict is about the vault, not one week."""
    return check_result(run_audit("retention", radar.paths(), clock.now()))
