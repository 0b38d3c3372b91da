"""The evidence check on `source_registry`."""

import dagster as dg

from radar_pipeline.core.audit.run import run_audit
from radar_pipeline.defs.check_results import check_result
from radar_pipeline.defs.registry.assets import SOURCE_REGISTRY_KEY
from radar_pipeline.defs.resources import ClockResource, RadarResource


@dg.asset_check(asset=SOURCE_REGISTRY_KEY, name="registry_validity", blocking=False)
def registry_check(radar: RadarResource, clock: ClockResource) -> dg.AssetCheckResult:
    """Every Source file is a valid Source with its own id; each issue is listed with its file
    and, for a duplicate id, the first declaration."""
    return check_result(run_audit("registry", radar.paths(), clock.now()))
