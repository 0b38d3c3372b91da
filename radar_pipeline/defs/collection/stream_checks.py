"""The evidence checks on the item stream of `signals` (docs/architecture.md, invariant 14).

`accounting` (ERROR): a recorded check whose outcomes do not add up to the items it parsed.
`possible_gaps` (WARN): a Source whose latest check shares no item with the previous one
although its feed was as full. `silent_sources` (WARN): a Source whose checks pass but whose
newest item is older than three times its own rhythm; its table names each such Source.
Like the other `signals` checks they judge the whole of DuckDB (logic in core/audit/).
"""

from datetime import UTC, datetime

import dagster as dg

from radar_pipeline.core.audit.run import run_audit
from radar_pipeline.defs.check_results import check_result
from radar_pipeline.defs.collection.config import SIGNALS_KEY
from radar_pipeline.defs.resources import RadarResource


@dg.asset_check(asset=SIGNALS_KEY, name="accounting", blocking=False)
def accounting_check(radar: RadarResource) -> dg.AssetCheckResult:
    """Every item a recorded check parsed is in exactly one outcome: itemsParsed = created +
    reused + updated + duplicates + rejected + deferred + outsideWindow + filtered, one
    observation each."""
    return check_result(run_audit("accounting", radar.paths(), datetime.now(UTC)))


@dg.asset_check(asset=SIGNALS_KEY, name="possible_gaps", blocking=False)
def possible_gaps_check(radar: RadarResource) -> dg.AssetCheckResult:
    """Sources whose latest check shares no item with the previous one although the feed held
    as many: items may have scrolled out unseen (WARN; shorten the Source's cadence)."""
    return check_result(run_audit("gaps", radar.paths(), datetime.now(UTC)))


@dg.asset_check(asset=SIGNALS_KEY, name="silent_sources", blocking=False)
def silent_sources_check(radar: RadarResource) -> dg.AssetCheckResult:
    """Sources whose checks pass but whose newest item is older than 3x their own median
    interval between items (WARN, one row per silent Source)."""
    return check_result(run_audit("silence", radar.paths(), datetime.now(UTC)))


STREAM_CHECKS = [accounting_check, possible_gaps_check, silent_sources_check]
