"""The evidence checks on `signals`: the vault's promises, the item stream, the cadence.

The checks are unpartitioned although `signals` is partitioned by Source: a collection is one
range run over many Source partitions, and in a range run Dagster keeps partitioned check
records PLANNED and accepts one result per check. So each check judges the whole vault and
DuckDB and is stored with `partition=None`: one verdict over all Sources. Logic in core/audit/.

When they run (jobs.py, sensors.py, schedules.py): after every collection, as the
`signal_checks` job, reading the Signals folder incrementally; daily, the checks that read the
folder, as the `signal_audit` job, with a stat of every file; from the UI, any check alone.

How far a check reads the Signals folder (`AuditScope.full`): a check's default is the full
read. The checks after a collection read it incrementally (`full = False`, set by
`checks_run_config`): they stat no file when the folder's directory mtime is as recorded
(core/vault/folder_state.py), so a Signal rewritten in place outside the pipeline is not seen
by them; it is seen by the next full read: the daily `signal_audit` run, `radar report`, or
any check run by hand. Each result's metadata says which read it judged (`folder_scan`,
`files_stat`, `names_listed`).

The item stream (docs/architecture.md, invariant 14): `accounting` (ERROR) a recorded check
whose outcomes do not add up to the items it parsed; `possible_gaps` (WARN) a Source whose
latest check shares no item with the previous one although its feed was as full;
`silent_sources` (WARN) a Source whose checks pass but whose newest item is older than three
times its own rhythm.

The cadence: `on_cadence` says which Sources are late (cadence.py has the rule and why it is
one verdict over all Sources, not one per partition).
"""

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from radar_pipeline.core.audit.run import run_audit
from radar_pipeline.core.clock import as_of_or_now, format_utc
from radar_pipeline.defs.check_results import check_result
from radar_pipeline.defs.collection.cadence import cadence_table, is_late, source_timings_now
from radar_pipeline.defs.collection.config import SIGNALS_KEY, config_of
from radar_pipeline.defs.resources import ClockResource, RadarResource

ON_CADENCE = "on_cadence"
CADENCE_CHECK_OP = f"{SIGNALS_KEY.path[-1]}_{ON_CADENCE}"  # the check's op: `<asset>_<check>`
INCREMENTAL_NOTE = (
    " After a collection it reads the Signals folder incrementally (a file rewritten in place is"
    " found by the daily full `signal_audit`); run by hand or by that schedule it stats every"
    " file. Metadata `folder_scan` says which."
)


class CheckClock(dg.Config):
    """The clock of the collection the checks follow (`as_of`); empty means now."""

    as_of: str = ""


class AuditScope(dg.Config):
    """`full`: stat every Signal file (the default); false: the incremental read the checks
    after a collection use (core/vault/folder_state.py says what it trusts)."""

    full: bool = True


class CadenceClock(dg.Config):
    """The clock the freshness sensor decided with (`as_of`: its `clock` resource); empty:
    the collection's clock when the check runs in one, else the `clock` resource's."""

    as_of: str = ""


# ---- the vault's promises ------------------------------------------------------------------


@dg.asset_check(
    asset=SIGNALS_KEY,
    name="idempotency",
    blocking=False,
    description="One Signal file and one index row per identity, over the whole vault."
    + INCREMENTAL_NOTE,
)
def idempotency_check(config: AuditScope, radar: RadarResource) -> dg.AssetCheckResult:
    """Every identity has exactly one Signal file and one index row; no two files share an
    identity. Judges the whole vault and DuckDB."""
    return check_result(run_audit("idempotency", radar.paths(), datetime.now(UTC), config.full))


@dg.asset_check(
    asset=SIGNALS_KEY,
    name="provenance",
    blocking=False,
    description="Every Signal carries its full provenance, over the whole vault."
    + INCREMENTAL_NOTE,
)
def provenance_check(config: AuditScope, radar: RadarResource) -> dg.AssetCheckResult:
    """Every Signal carries every provenance field of the contract, and `publishedAt` is empty
    unless verified evidence exists. Judges every Signal file."""
    return check_result(run_audit("provenance", radar.paths(), datetime.now(UTC), config.full))


@dg.asset_check(asset=SIGNALS_KEY, name="overdue", blocking=False)
def overdue_check(config: CheckClock, radar: RadarResource) -> dg.AssetCheckResult:
    """Eligible Sources past their cadence, at the collection's clock (0 after a recovery).
    WARN: a failing publisher keeps its Source overdue; that is recorded, not broken."""
    now = as_of_or_now(config.as_of)
    return check_result(run_audit("overdue", radar.paths(), now))


@dg.asset_check(
    asset=SIGNALS_KEY,
    name="agreement",
    blocking=False,
    description="The vault and the DuckDB index hold the same Signal ids." + INCREMENTAL_NOTE,
)
def agreement_check(config: AuditScope, radar: RadarResource) -> dg.AssetCheckResult:
    """The vault and the DuckDB index hold the same Signal ids (an index row without a file is
    an ERROR; a file not indexed yet a WARN)."""
    return check_result(run_audit("agreement", radar.paths(), datetime.now(UTC), config.full))


# The checks that read the Signals folder: what the daily full audit re-reads.
FOLDER_CHECKS = [idempotency_check, provenance_check, agreement_check]
SIGNAL_EVIDENCE_CHECKS = [idempotency_check, provenance_check, overdue_check, agreement_check]


# ---- the item stream ----------------------------------------------------------------------


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


STREAM_EVIDENCE_CHECKS = [accounting_check, possible_gaps_check, silent_sources_check]


# ---- the cadence --------------------------------------------------------------------------


def _run_clock(
    given: CadenceClock, run_config: Mapping[str, Any], clock: ClockResource
) -> datetime:
    """The tick's clock, else that of the collection this check runs in, else the resource's."""
    if given.as_of:
        return as_of_or_now(given.as_of)
    config = config_of(run_config)
    return config.clock() if config is not None and config.as_of else clock.now()


@dg.asset_check(asset=SIGNALS_KEY, name=ON_CADENCE, blocking=False)
def on_cadence_check(
    context: dg.AssetCheckExecutionContext,
    config: CadenceClock,
    radar: RadarResource,
    clock: ClockResource,
) -> dg.AssetCheckResult:
    """Every Source is on cadence: each succeeded less than one cadence (plus `LATE_GRACE`)
    ago; `manual` and ineligible Sources are never late. WARN, not ERROR: a failing publisher
    keeps its Source late, which is recorded, not broken. `overdue` counts the late ones; the
    table lists every Source."""
    now = _run_clock(config, context.run.run_config or {}, clock)
    timings = list(source_timings_now(radar, now))
    late = [t for t in timings if is_late(t, now)]
    return dg.AssetCheckResult(
        passed=not late,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "overdue": len(late),
            "late": ", ".join(t.source_id for t in late) or "none",
            "as_of": format_utc(now),
            "sources": dg.MetadataValue.md(cadence_table(timings)),
        },
    )
