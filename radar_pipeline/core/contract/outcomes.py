"""The outcome vocabulary, spelled once: what became of a Source check and of each item.

Every item a fetched feed held ends in exactly one `ItemOutcome` (docs/architecture.md,
invariant 14). The same outcome has three spellings the outside already reads, kept as they
are: the report's count key (`radar collect --json`), the decision `radar sources try`
prints, and the `outcome` column of DuckDB's `item_observations` (rows written long ago must
keep meaning the same). The dedupe stage decides a `Decision` per eligible item; the file
stage turns a `new` one into `created` (or `reused`, when its file appeared meanwhile). Code
names these members; only this module spells them (test_layout.py holds it).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

# A Source check's outcome in the report: `passed` and `not-modified` both count as passed.
SourceOutcome = Literal["passed", "not-modified", "failed", "skipped"]
PASSING_OUTCOMES: frozenset[str] = frozenset({"passed", "not-modified"})

# What `radar sources try` decides per item (the `decision` of each item it prints).
TryDecision = Literal[
    "create", "reuse", "update", "duplicate", "reject", "filtered", "deferred", "outsideWindow"
]


class ItemOutcome(StrEnum):
    """Where one item of a fetched feed ended; the value is the report's count key."""

    CREATED = "created"
    REUSED = "reused"
    UPDATED = "updated"
    DUPLICATES = "duplicates"
    REJECTED = "rejected"
    DEFERRED = "deferred"
    OUTSIDE_WINDOW = "outsideWindow"  # dated before the recovery cap
    FILTERED = "filtered"  # dropped by the Source's include/exclude rules

    @property
    def field(self) -> str:
        """The snake_case name of the count field on the report models."""
        return _FIELDS[self]

    @property
    def decision(self) -> TryDecision:
        """The decision `radar sources try` prints for an item with this outcome."""
        return _DECISIONS[self]

    @property
    def observation(self) -> str:
        """The `item_observations.outcome` value DuckDB records for it (a plain str: a
        database driver may write an Enum member by its name)."""
        return _OBSERVATIONS[self]


class Decision(StrEnum):
    """What the dedupe stage decides for one eligible item (core/identity/dedupe.py)."""

    NEW = "new"  # not known: the file stage creates its Signal
    REUSED = "reused"
    UPDATED = "updated"  # known, its content changed: a revision
    DUPLICATE = "duplicate"  # a re-publication of a known Signal
    DEFERRED = "deferred"  # beyond one check's cap: the next check takes it

    @property
    def outcome(self) -> ItemOutcome:
        """The item's outcome, as decided (a `new` item's file may still turn out reused)."""
        return _DECIDED[self]


# What the file stage reports for a `new` item's Signal file.
FileOutcome = Literal[ItemOutcome.CREATED, ItemOutcome.REUSED]

_FIELDS = {o: "outside_window" if o is ItemOutcome.OUTSIDE_WINDOW else o.value for o in ItemOutcome}
_DECISIONS: dict[ItemOutcome, TryDecision] = {
    ItemOutcome.CREATED: "create",
    ItemOutcome.REUSED: "reuse",
    ItemOutcome.UPDATED: "update",
    ItemOutcome.DUPLICATES: "duplicate",
    ItemOutcome.REJECTED: "reject",
    ItemOutcome.DEFERRED: "deferred",
    ItemOutcome.OUTSIDE_WINDOW: "outsideWindow",
    ItemOutcome.FILTERED: "filtered",
}
_OBSERVATIONS: dict[ItemOutcome, str] = {
    **{o: o.value for o in ItemOutcome},
    ItemOutcome.DUPLICATES: "duplicate",
    ItemOutcome.OUTSIDE_WINDOW: "outside-window",
}
_DECIDED = {
    Decision.NEW: ItemOutcome.CREATED,
    Decision.REUSED: ItemOutcome.REUSED,
    Decision.UPDATED: ItemOutcome.UPDATED,
    Decision.DUPLICATE: ItemOutcome.DUPLICATES,
    Decision.DEFERRED: ItemOutcome.DEFERRED,
}

# The counts that add up to itemsParsed, in the order the report and the tables list them.
OUTCOME_KEYS: tuple[str, ...] = tuple(o.value for o in ItemOutcome)
