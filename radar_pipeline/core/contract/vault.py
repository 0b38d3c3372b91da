"""What `radar vault check` prints: every note of a vault against its model."""

from __future__ import annotations

from typing import Literal

from radar_pipeline.core.contract.base import ContractModel

# Which model a note is checked against: the Source note (`registry.sources.Source`) or the
# Signal note (`contract.notes.SignalNote`).
NoteKind = Literal["source", "signal"]


class InvalidNote(ContractModel):
    """One key of one note that does not hold what its model says (`key` as the note spells
    it; `(frontmatter)` when the note has none that can be read)."""

    path: str  # vault-relative POSIX path
    kind: NoteKind
    key: str
    reason: str


class VaultValidation(ContractModel):
    """The `radar vault check --json` object: how many notes were read, and each problem of
    the invalid ones (a note with three bad keys is three entries). Nothing is rewritten."""

    sources: int
    signals: int
    invalid: tuple[InvalidNote, ...] = ()
