"""The evidence snapshot: what `radar report --json` prints and the `evidence_snapshot` asset
shows. The contract's keys stay at the top level; everything else is grouped beneath them
(core/audit/evidence.py builds it)."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict

from radar_pipeline.core.contract.base import ContractModel
from radar_pipeline.core.contract.collection import CollectionReport
from radar_pipeline.core.contract.operations import CloseRecord
from radar_pipeline.core.contract.sources import RegistryIssue

# How bad a finding is: ERROR for a broken promise, WARN for a soft one (core/audit/findings.py).
Severity = Literal["ERROR", "WARN"]
# The asset checks' names: the keys of the report's `checks`, as the Dagster UI names them.
CheckName = Literal[
    "idempotency",
    "provenance",
    "registry_validity",
    "overdue",
    "retention",
    "agreement",
    "accounting",
    "possible_gaps",
    "silent_sources",
    "on_cadence",
]


class AuditVerdict(ContractModel):
    """One audit's verdict: passed, the severity of its worst finding (None when passed), how
    many findings, then the audit's own figures, each under its name."""

    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, int]  # the audit's figures, in the order it lists them

    passed: bool
    severity: Severity | None
    findings: int


class PossibleGap(ContractModel):
    """A Source whose latest check shared no item with the one before."""

    source: str
    checked_at: str  # ISO-8601 UTC
    suggestion: str


class Inventory(ContractModel):
    """What files exist (six Source files are six files), valid or not."""

    source_files: int
    valid_sources: int
    eligible_sources: int
    inactive_sources: tuple[str, ...]
    registry_issues: tuple[RegistryIssue, ...]
    signal_files: int
    indexed_signals: int
    indexed_by_source: dict[str, int]


class Production(ContractModel):
    """What the Radar collects: eligible, non-fixture Sources."""

    sources: tuple[str, ...]
    signals: int
    overdue_now: tuple[str, ...]


class Recovery(ContractModel):
    """The last collection's recovery: overdue before it, its outcome, overdue right after."""

    as_of: str
    mode: str
    downtime_from: str | None
    overdue_before: int
    due: int
    passed: int
    failed: int
    skipped: int
    post_recovery_overdue: int
    post_recovery_overdue_sources: tuple[str, ...]


class Temporary(ContractModel):
    """Full third-party text retained in Temporary Content, and the last weekly close."""

    retained_files: int
    retained_bytes: int
    error: str | None  # why Temporary Content could not be listed
    last_close: CloseRecord | None


class EvidenceSnapshot(ContractModel):
    """The `radar report --json` object."""

    # ---- the contract's keys
    as_of: str
    production_sources: int
    fixture_sources: int
    signals: int
    recovery_cap_days: int
    overdue: int
    retained_temporary: int
    last_collection: CollectionReport | None
    open_dead_letters: int
    silent_sources: tuple[str, ...]
    # ---- what else the evidence shows
    possible_gaps: tuple[PossibleGap, ...]
    registry_issues: int
    inventory: Inventory
    production: Production
    recovery: Recovery | None
    temporary: Temporary
    checks: dict[CheckName, AuditVerdict]  # each asset check's verdict, by its name
