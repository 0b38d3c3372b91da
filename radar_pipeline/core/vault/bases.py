"""The views Radar ships: `Radar/Signals.base` and `Radar/Sources.base` (Obsidian Bases).

Bases files are YAML (filters, formulas, properties, views; docs/obsidian.md), read by Obsidian
1.9 or later. They are vault set-up, not pipeline work: `radar collect` and `radar sources
import` create the ones that are missing before anything else runs, and never touch one that
exists, since a person may have edited it. Creation is a temp file linked to its name, so a
file is complete or absent.
"""

from __future__ import annotations

from pathlib import Path

from radar_pipeline.core.files import create_once
from radar_pipeline.core.layout import SIGNALS_VIEW, SOURCES_VIEW

SIGNALS_BASE = """\
# Radar's views of the Signals. Created once by `radar`; never overwritten: edit it freely
# (delete it to get the shipped version back). docs/obsidian.md describes the properties.
filters:
  and:
    - file.inFolder("Radar/Signals")
    - 'entityType == "signal"'
formulas:
  # No third argument: an absent day yields nothing (null), not an empty text.
  observed: 'if(observedOn, date(observedOn))'
  collected: 'if(collectedOn, date(collectedOn))'
properties:
  note.title:
    displayName: Title
  note.source:
    displayName: Source
  formula.collected:
    displayName: Collected
  formula.observed:
    displayName: Feed date
  note.duplicateCandidateOf:
    displayName: Duplicate of
  note.analysisState:
    displayName: Analysis
views:
  - type: table
    name: New Signals to review
    filters:
      and:
        - 'analysisState == "pending"'
    order:
      - file.name
      - note.title
      - note.source
      - formula.collected
      - formula.observed
      - note.validationState
    # Newest first by the item's own time, then by when it was collected (both ISO-8601 UTC
    # text of one width, so text order is time order); the file name is the run's time only.
    sort:
      - property: note.observedAt
        direction: DESC
      - property: note.fetchedAt
        direction: DESC
  - type: table
    name: Duplicate candidates
    filters:
      and:
        - duplicateCandidateOf.isTruthy()
    order:
      - file.name
      - note.title
      - note.duplicateCandidateOf
      - note.source
      - formula.collected
    sort:
      - property: file.name
        direction: DESC
  - type: table
    name: By Source
    groupBy:
      property: note.source
      direction: ASC
    order:
      - file.name
      - note.title
      - formula.collected
      - formula.observed
      - note.analysisState
    sort:
      - property: note.observedAt
        direction: DESC
      - property: note.fetchedAt
        direction: DESC
"""

SOURCES_BASE = """\
# Radar's views of the Sources. Created once by `radar`; never overwritten: edit it freely
# (delete it to get the shipped version back). docs/obsidian.md describes the properties.
filters:
  and:
    - file.inFolder("Radar/Sources")
    - 'entityType == "source"'
formulas:
  # Only the Signals among the notes linking here (a person's notes may link a Source too).
  signals: 'file.backlinks.filter(file(value).inFolder("Radar/Signals")).length'
properties:
  note.errorState:
    displayName: Error
  note.blockedReason:
    displayName: Blocked because
  note.lastSuccessAt:
    displayName: Last success
  note.httpStatus:
    displayName: HTTP status
  note.backoffUntil:
    displayName: Backoff until
  note.nextAttemptAt:
    displayName: Next attempt
  note.permanentRedirect:
    displayName: Moved to
  formula.signals:
    displayName: Signals
views:
  - type: table
    name: Source health
    order:
      - file.name
      - note.enabled
      - note.legalAssessment
      - note.errorState
      - note.blockedReason
      - note.lastSuccessAt
      - note.lastAttemptAt
      - note.httpStatus
      - note.backoffUntil
      - note.nextAttemptAt
      - note.permanentRedirect
    sort:
      - property: note.errorState
        direction: DESC
  - type: table
    name: Need a person
    filters:
      or:
        - errorState.isTruthy()
        - blockedReason.isTruthy()
        - permanentRedirect.isTruthy()
        - 'legalAssessment == "pending"'
    order:
      - file.name
      - note.legalAssessment
      - note.errorState
      - note.blockedReason
      - note.permanentRedirect
      - note.url
  - type: table
    name: All Sources
    order:
      - file.name
      - note.name
      - note.role
      - note.priority
      - note.cadence
      - note.url
      - formula.signals
"""

SHIPPED_BASES = {
    SIGNALS_VIEW: SIGNALS_BASE,
    SOURCES_VIEW: SOURCES_BASE,
}


def ensure_bases(vault: Path) -> list[Path]:
    """Create each shipped view that is missing; returns the vault paths created (an existing
    file, whatever it holds, is kept as it is)."""
    created: list[Path] = []
    for relative, text in SHIPPED_BASES.items():
        if create_once(vault / relative, text):
            created.append(relative)
    return created
