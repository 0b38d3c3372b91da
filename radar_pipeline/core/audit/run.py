"""The Radar's claims about itself, each measured against the vault and DuckDB (no Dagster here).

The one entry to the audits: `run_audits` reads what the named audits need (or takes what its
caller read already: `AuditInputs`), opens the Signal files' facts (core/vault/facts.py) and
runs them in one DuckDB transaction. The Dagster asset
checks and `radar report` both call it, so the UI and the command line can never disagree.

    idempotency   every identity has exactly one Signal file and one index row   signal_audits
    provenance    every Signal carries every provenance field                    signal_audits
    registry      every Source file is a valid, uniquely declared Source         source_audits
    overdue       eligible Sources past their cadence                            source_audits
    retention     nothing under Temporary Content survives a weekly close        retention
    agreement     the vault and the DuckDB index hold the same Signal ids        signal_audits
    accounting    every item a check parsed is in exactly one recorded outcome   stream_audits
    gaps          each Source's latest check overlaps the one before             stream_audits
    silence       Sources whose checks pass still publish at their own rhythm    stream_audits
    on_cadence    every Source succeeded within its cadence (plus a grace)      cadence

Each audit is the verdict of one Dagster asset check; `CHECK_NAMES` gives the check's name,
which `radar report --json` uses as the key of its `checks` (one name per verdict in the UI and
on the command line). `DECLARED_SEVERITY` is the severity each check is declared with: what a
passing evaluation records; a failing one records the severity of its worst finding, so a
check declared ERROR whose findings are all ERROR (`accounting`, `retention`, ...) records
ERROR when it fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from radar_pipeline.core.audit.cadence import audit_cadence
from radar_pipeline.core.audit.findings import AuditResult
from radar_pipeline.core.audit.retention import (
    SignalsFolderFacts,
    TemporaryEntry,
    audit_retention,
    list_temporary,
)
from radar_pipeline.core.audit.signal_audits import (
    audit_agreement,
    audit_idempotency,
    audit_provenance,
    oversized_bodies,
)
from radar_pipeline.core.audit.source_audits import audit_overdue, audit_registry, overdue_sources
from radar_pipeline.core.audit.stream_audits import audit_accounting, audit_gaps, audit_silence
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.contract.evidence import CheckName, Severity
from radar_pipeline.core.contract.operations import CloseRecord
from radar_pipeline.core.layout import SIGNALS_DIR
from radar_pipeline.core.plan.collection import SourceTiming, source_timings
from radar_pipeline.core.registry.sources import RegistrySnapshot, load_registry
from radar_pipeline.core.store.audits import temporary_text_files
from radar_pipeline.core.store.closes import last_close
from radar_pipeline.core.store.connection import Connection, Store
from radar_pipeline.core.store.feed_state import FeedState, load_states
from radar_pipeline.core.vault.facts import gather_facts, open_facts
from radar_pipeline.core.vault.folder_state import holds_no_temp_files

AUDIT_NAMES = (
    "idempotency",
    "provenance",
    "registry",
    "overdue",
    "retention",
    "agreement",
    "accounting",
    "gaps",
    "silence",
    "on_cadence",
)
# The asset check each audit is the verdict of (the same name unless listed).
CHECK_NAMES: dict[str, CheckName] = {
    "idempotency": "idempotency",
    "provenance": "provenance",
    "registry": "registry_validity",
    "overdue": "overdue",
    "retention": "retention",
    "agreement": "agreement",
    "accounting": "accounting",
    "gaps": "possible_gaps",
    "silence": "silent_sources",
    "on_cadence": "on_cadence",
}
# ERROR: a broken promise (a Signal twice, provenance missing, text kept past a close, an
# item unaccounted for, a registry that cannot be trusted). WARN: a state the next run or a
# person resolves (a late or silent Source, a possible gap).
DECLARED_SEVERITY: dict[str, Severity] = {
    "idempotency": "ERROR",
    "provenance": "ERROR",
    "registry": "ERROR",
    "overdue": "WARN",
    "retention": "ERROR",
    "agreement": "ERROR",
    "accounting": "ERROR",
    "gaps": "WARN",
    "silence": "WARN",
    "on_cadence": "WARN",
}


@dataclass(frozen=True)
class AuditInputs:
    """What the audits read besides the files' facts and the index, read once by a caller that
    needs it too (the evidence snapshot), so nothing is read twice."""

    snapshot: RegistrySnapshot
    states: Mapping[str, FeedState]
    close: CloseRecord | None  # the last weekly close
    temporary: tuple[TemporaryEntry, ...]  # Temporary Content as `list_temporary` lists it


# The audits that are one set query over the transaction's facts and index.
_QUERY_AUDITS: dict[str, Callable[[Connection], AuditResult]] = {
    "idempotency": audit_idempotency,
    "provenance": audit_provenance,
    "agreement": audit_agreement,
    "accounting": audit_accounting,
    "gaps": audit_gaps,
    "silence": audit_silence,
}


def judge_cadence(timings: Sequence[SourceTiming], now: datetime) -> AuditResult:
    """`on_cadence` from the Sources' timings a caller read already (the check that also
    shows them), as `run_audits` judges it."""
    return replace(audit_cadence(timings, now), declared=DECLARED_SEVERITY["on_cadence"])


def run_audit(name: str, paths: RadarPaths, now: datetime, full: bool = True) -> AuditResult:
    """One audit by name, reading what it needs (`full`: see `run_audits`)."""
    return run_audits(paths, now, (name,), full)[name]


def run_audits(
    paths: RadarPaths,
    now: datetime,
    names: Iterable[str] = AUDIT_NAMES,
    full: bool = True,
    inputs: AuditInputs | None = None,
) -> dict[str, AuditResult]:
    """The named audits over the vault and DuckDB as they are now.

    `full` (the default: `radar report`, the daily full audit, a check run by hand): every
    Signal file is stat'ed. Not `full` (the checks after a collection): the Signals folder is
    read incrementally (vault.facts.gather_facts), which misses a file rewritten in place
    until the next full audit; each verdict's `scan` says which read it judged.

    `inputs`: the registry, feed states, last close and Temporary Content as the caller read
    them (None: read here, the states in the audits' transaction).
    """
    wanted = tuple(names)
    unknown = set(wanted) - set(AUDIT_NAMES)
    if unknown:
        raise ValueError(f"unknown audits: {sorted(unknown)}")
    return _run_audits(paths, now, wanted, full, inputs)


def _run_audits(
    paths: RadarPaths,
    now: datetime,
    wanted: tuple[str, ...],
    full: bool,
    inputs: AuditInputs | None,
) -> dict[str, AuditResult]:
    store = Store.of(paths)
    # Everything read from the vault is read before the transaction, which holds the DuckDB
    # file only for the facts' update and the queries.
    judged = {"idempotency", "provenance", "retention", "agreement"} & set(wanted)
    update = gather_facts(paths.vault, store, full) if judged else None
    retention = "retention" in wanted
    if inputs is not None:
        snapshot: RegistrySnapshot | None = inputs.snapshot
        close, temporary = inputs.close, inputs.temporary
    else:
        needs_registry = {"registry", "overdue", "on_cadence"} & set(wanted)
        snapshot = load_registry(paths.vault) if needs_registry else None
        close = last_close(store) if retention else None
        temporary = list_temporary(paths.vault) if retention else ()
    out: dict[str, AuditResult] = {}
    oversized: list[tuple[str, int]] = []
    signals: SignalsFolderFacts | None = None

    # One transaction: the audits see the same facts and index (each collection commits its
    # files' facts with their index rows), whatever another process writes meanwhile.
    def run_queries(con: Connection) -> None:
        nonlocal oversized, signals
        if update is not None:
            open_facts(con, paths.vault, update)
        for name in wanted:
            if name in _QUERY_AUDITS:
                out[name] = _QUERY_AUDITS[name](con)
            elif name == "overdue":
                assert snapshot is not None
                eligible = sum(1 for r in snapshot.sources if r.source.is_eligible)
                states = inputs.states if inputs is not None else load_states(con)
                late = overdue_sources(snapshot, states, now)
                out[name] = audit_overdue(late, eligible, now)
            elif name == "on_cadence":
                assert snapshot is not None
                states = inputs.states if inputs is not None else load_states(con)
                out[name] = judge_cadence(source_timings(snapshot, states, now), now)
            elif name == "retention":
                oversized = oversized_bodies(con)
                signals = SignalsFolderFacts(
                    frozenset(temporary_text_files(con)),
                    holds_no_temp_files(con, paths.vault / SIGNALS_DIR),
                )

    store.atomically(run_queries)
    if snapshot is not None and "registry" in wanted:
        out["registry"] = audit_registry(snapshot)
    if retention:
        out["retention"] = audit_retention(paths.vault, oversized, close, temporary, signals)
    if update is not None:
        scan = update.scan.metadata()
        for name in judged & out.keys():
            out[name] = replace(out[name], scan=scan)
    return {name: replace(out[name], declared=DECLARED_SEVERITY[name]) for name in wanted}
