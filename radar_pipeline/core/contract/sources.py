"""What the `radar sources ...` commands print: validate, import, add and try."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from radar_pipeline.core.contract.base import ContractModel, UtcTime, absent_when_none
from radar_pipeline.core.contract.outcomes import TryDecision

# What a discovered feed is (`radar sources add`): the parser that reads it.
FeedKind = Literal["rss", "atom", "jsonfeed", "json"]


class RegisteredSource(ContractModel):
    """A valid Source of the registry and whether it runs (`radar sources validate`)."""

    id: str
    path: str  # vault-relative POSIX path
    active: bool


class RegistryIssue(ContractModel):
    """Why one Source file is not (or not only) an active Source."""

    path: str  # vault-relative POSIX path
    code: str
    message: str


class ValidateOutput(ContractModel):
    """The `radar sources validate --json` object."""

    sources: tuple[RegisteredSource, ...]
    issues: tuple[RegistryIssue, ...]


class ImportedSource(ContractModel):
    """A Source note `radar sources import` wrote (`path` relative to the vault root)."""

    id: str
    path: str
    url: str


class SkippedFeed(ContractModel):
    """A feed outline `radar sources import` did not import, and why."""

    url: str
    reason: str


class ImportOutput(ContractModel):
    """The `radar sources import --json` object: every feed outline, imported or skipped."""

    imported: tuple[ImportedSource, ...] = ()
    skipped: tuple[SkippedFeed, ...] = ()


class FeedCandidate(ContractModel):
    """A feed a URL offers, verified: it was fetched and its Source's parser read it."""

    url: str
    kind: FeedKind
    title: str
    items: int


class AddedSource(ContractModel):
    """The Source note `radar sources add` wrote."""

    id: str
    path: str
    url: str
    kind: FeedKind


class AddOutput(ContractModel):
    """The `radar sources add --json` object; `problem` (not printed in the JSON: it goes to
    stderr) says why nothing was added."""

    added: AddedSource | None
    candidates: tuple[FeedCandidate, ...] = ()
    problem: str | None = Field(default=None, exclude=True)


class FieldEvidence(ContractModel):
    """Which selector, path or key produced one field of an item (`raw`: a date's text as
    written, where one was read)."""

    field: str
    expression: str
    origin: str
    raw: str | None = absent_when_none()


class TriedItem(ContractModel):
    """One item of the feed and what a check would do with it, with the evidence."""

    decision: TryDecision
    title: str | None
    canonical_url: str | None
    source_item_id: str | None
    observed_at: UtcTime | None
    reason: str | None
    evidence: tuple[FieldEvidence, ...] = ()


class TryAccounting(ContractModel):
    """The dry run's accounting: the same identity as a check's (invariant 14)."""

    items_parsed: int = 0
    created: int = 0
    reused: int = 0
    updated: int = 0
    duplicates: int = 0
    rejected: int = 0
    deferred: int = 0
    outside_window: int = 0
    filtered: int = 0
    late: int = 0
    possible_gap: bool = False


class TryOutput(ContractModel):
    """The `radar sources try --json` object."""

    id: str
    outcome: Literal["passed", "failed"]
    http_status: int | None
    items_parsed: int
    items: tuple[TriedItem, ...] = ()
    error: str | None = None
    accounting: TryAccounting = TryAccounting()
