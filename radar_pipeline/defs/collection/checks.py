"""The evidence checks on `signals`: the vault's promises, the item stream, the cadence.

The checks are unpartitioned although `signals` is partitioned by Source: a collection is one
range run over many Source partitions, and in a range run Dagster keeps partitioned check
records PLANNED and accepts one result per check. So each check judges the whole vault and
DuckDB and is stored with `partition=None`: one verdict over all Sources. Logic in core/audit/.

One step for all eight (`signal_evidence`, a multi-asset check that can be subset): each check
keeps its own name, description, severity and result, but the checks selected in a run are
judged together by one `run_audits` call, so they share one read of the Signals folder, one
read of the registry and one DuckDB transaction, and the run pays one step's events instead of
eight (docs/architecture.md, "The evidence checks"). A run that selects some of them (the UI's
"execute" of one check, the daily `signal_audit`, `source_cadence_check`) evaluates exactly
those: `context.selected_asset_check_keys`.

When they run (jobs.py, sensors.py, schedules.py): after every collection, as the
`signal_checks` job, reading the Signals folder incrementally; daily, the checks that read the
folder, as the `signal_audit` job, with a stat of every file; from the UI, any check alone.

How far a check reads the Signals folder (`EvidenceConfig.full`): a check's default is the full
read. The checks after a collection read it incrementally (`full = False`, set by
`checks_run_config`): they stat no file when the folder's directory mtime is as recorded
(core/vault/folder_state.py), so a Signal rewritten in place outside the pipeline is not seen
by them; it is seen by the next full read: the daily `signal_audit` run, `radar report`, or
any check run by hand. Each result's metadata says which read it judged (`folder_scan`,
`files_stat`, `names_listed`): the folder's checks of one run share one read.

The item stream (docs/architecture.md, invariant 14): `accounting` (ERROR) a recorded check
whose outcomes do not add up to the items it parsed; `possible_gaps` (WARN) a Source whose
latest check shares no item with the previous one although its feed was as full;
`silent_sources` (WARN) a Source whose checks pass but whose newest item is older than three
times its own rhythm.

The cadence: `on_cadence` says which Sources are late (cadence.py has the rule and why it is
one verdict over all Sources, not one per partition).
"""

from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import dagster as dg

from radar_pipeline.core.audit.run import CHECK_NAMES, judge_cadence, run_audits
from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.defs.check_results import check_result, severity_of
from radar_pipeline.defs.collection.cadence import cadence_table, is_late, source_timings_now
from radar_pipeline.defs.collection.config import SIGNALS_KEY, config_of
from radar_pipeline.defs.resources import ClockResource, RadarResource

ON_CADENCE = "on_cadence"
INCREMENTAL_NOTE = (
    " After a collection it reads the Signals folder incrementally (a file rewritten in place is"
    " found by the daily full `signal_audit`); run by hand or by that schedule it stats every"
    " file. Metadata `folder_scan` says which."
)


class EvidenceConfig(dg.Config):
    """How the checks on `signals` judge.

    `as_of`: the clock of `overdue` and `on_cadence` (the collection's, or the freshness
    sensor's tick); empty: `overdue` judges at the `clock` resource's time, `on_cadence` at
    the clock of the collection it runs in, else the `clock` resource's. `full`: stat every
    Signal file (the default); false: the incremental read the checks after a collection use
    (core/vault/folder_state.py says what it trusts)."""

    as_of: str = ""
    full: bool = True


def _spec(name: str, description: str) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(name, asset=SIGNALS_KEY, description=description, blocking=False)


# ---- the checks: what each promises, and the audit of core/audit/run.py that judges it ----

# The vault's promises.
IDEMPOTENCY = _spec(
    "idempotency",
    "One Signal file and one index row per identity, over the whole vault." + INCREMENTAL_NOTE,
)
PROVENANCE = _spec(
    "provenance",
    "Every Signal carries its full provenance, over the whole vault." + INCREMENTAL_NOTE,
)
OVERDUE = _spec(
    "overdue",
    "Eligible Sources past their cadence, at the collection's clock (0 after a recovery). "
    "WARN: a failing publisher keeps its Source overdue; that is recorded, not broken.",
)
AGREEMENT = _spec(
    "agreement",
    "The vault and the DuckDB index hold the same Signal ids." + INCREMENTAL_NOTE,
)
# The item stream.
ACCOUNTING = _spec(
    "accounting",
    "Every item a recorded check parsed is in exactly one outcome: itemsParsed = created + "
    "reused + updated + duplicates + rejected + deferred + outsideWindow + filtered, one "
    "observation each.",
)
POSSIBLE_GAPS = _spec(
    "possible_gaps",
    "Sources whose latest check shares no item with the previous one although the feed held "
    "as many: items may have scrolled out unseen (WARN; shorten the Source's cadence).",
)
SILENT_SOURCES = _spec(
    "silent_sources",
    "Sources whose checks pass but whose newest item is older than 3x their own median "
    "interval between items (WARN, one row per silent Source).",
)
# The cadence (judged here, from cadence.py's rule, not by an audit).
ON_CADENCE_SPEC = _spec(
    ON_CADENCE,
    "Every Source is on cadence: each succeeded less than one cadence (plus `LATE_GRACE`) "
    "ago; `manual` and ineligible Sources are never late. WARN, not ERROR: a failing publisher "
    "keeps its Source late, which is recorded, not broken. `overdue` counts the late ones; the "
    "table lists every Source.",
)

SIGNAL_CHECK_SPECS = (
    IDEMPOTENCY,
    PROVENANCE,
    OVERDUE,
    AGREEMENT,
    ACCOUNTING,
    POSSIBLE_GAPS,
    SILENT_SOURCES,
    ON_CADENCE_SPEC,
)
ON_CADENCE_CHECK = ON_CADENCE_SPEC.key
# Each check by the audit of core/audit/run.py that is its verdict (CHECK_NAMES: the audit
# `radar report` lists under the check's own name).
AUDIT_OF = {
    spec.key: audit
    for audit, check in CHECK_NAMES.items()
    for spec in SIGNAL_CHECK_SPECS
    if spec.key.name == check
}
# The checks that read the Signals folder: what the daily full audit re-reads.
FOLDER_CHECKS = (IDEMPOTENCY.key, PROVENANCE.key, AGREEMENT.key)
SIGNAL_EVIDENCE_CHECKS = (IDEMPOTENCY.key, PROVENANCE.key, OVERDUE.key, AGREEMENT.key)
STREAM_EVIDENCE_CHECKS = (ACCOUNTING.key, POSSIBLE_GAPS.key, SILENT_SOURCES.key)


@dg.multi_asset_check(
    specs=SIGNAL_CHECK_SPECS,
    can_subset=True,
    description=(
        "The evidence checks on `signals`, in one step: the selected checks share one read of "
        "the Signals folder and the registry and one DuckDB transaction; one result each."
    ),
)
def signal_evidence(
    context: dg.AssetCheckExecutionContext,
    config: EvidenceConfig,
    radar: RadarResource,
    clock: ClockResource,
) -> Iterator[dg.AssetCheckResult]:
    """One result per selected check on `signals`; the audits among them run together
    (`run_audits`: one pass over the folder, one transaction)."""
    # In name order: the order their own ops ran in, which `radar collect`'s report keeps.
    chosen = context.selected_asset_check_keys
    selected = sorted((s.key for s in SIGNAL_CHECK_SPECS if s.key in chosen), key=lambda k: k.name)
    audits = [AUDIT_OF[key] for key in selected if key != ON_CADENCE_CHECK]
    # `now` only dates `overdue`; the other audits judge the vault and DuckDB as they are.
    now = parse_utc(config.as_of) if config.as_of else clock.now()
    found = run_audits(radar.paths(), now, audits, config.full) if audits else {}
    for key in selected:
        if key == ON_CADENCE_CHECK:
            yield _on_cadence(_run_clock(config, context.run.run_config or {}, clock), radar)
        else:
            yield check_result(found[AUDIT_OF[key]], key)


# ---- the cadence --------------------------------------------------------------------------


def _run_clock(
    given: EvidenceConfig, run_config: Mapping[str, Any], clock: ClockResource
) -> datetime:
    """The tick's clock, else that of the collection this check runs in, else the resource's."""
    if given.as_of:
        return parse_utc(given.as_of)
    config = config_of(run_config)
    return config.clock() if config is not None and config.as_of else clock.now()


def _on_cadence(now: datetime, radar: RadarResource) -> dg.AssetCheckResult:
    """`on_cadence` at `now` (the audit `radar report` lists under the same name): WARN when
    some Source is late; `overdue` counts the late ones, the table lists every Source."""
    timings = source_timings_now(radar, now)
    verdict = judge_cadence(timings, now)
    late = [t for t in timings if is_late(t, now)]
    return dg.AssetCheckResult(
        asset_key=SIGNALS_KEY,
        check_name=ON_CADENCE,
        passed=verdict.passed,
        severity=severity_of(verdict),
        description=verdict.headline,
        metadata={
            "overdue": len(late),
            "late": ", ".join(t.source_id for t in late) or "none",
            "as_of": format_utc(now),
            "sources": dg.MetadataValue.md(cadence_table(timings)),
        },
    )
