"""The Signal note: the frontmatter of `Radar/Signals/<signalId>.md`, as one model.

`SignalNote` is the one definition of a Signal's keys (contract.md, "Signal file"): the
collection builds a new note's frontmatter through it (`collect/signal_files.build_document`),
`radar vault check` reads every note back through it (`vault/check.py`), and its JSON Schema
is published under docs/schema/ (signal-note.schema.json) for the programs that read a vault
(a Digest, Dataview or Bases users, Obsidian plugins). The index stays as tolerant as it has
been (it needs only the identity keys): validation is the check's business, never a reason
to drop a Signal.

What a note from an earlier layout lacks has a default of None here (no key is ever renamed):
`identityVersion`, `simhash` and `itemUrl` (the first notes of 3869e7d carried them, but the
index has always read a note without them), and the Obsidian properties added later
(`aliases`, `source`, `collectedOn`, `observedOn`); `duplicateCandidateOf` was a plain Signal
id before it was a link. Keys a person adds are kept (`extra="allow"`) and never checked.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, PlainSerializer, Strict
from pydantic.alias_generators import to_camel

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.contract.base import ContractModel, absent_when_none
from radar_pipeline.core.jsontypes import Frontmatter

SIGNAL_SCHEMA_VERSION = 1
SIGNAL_ID_PATTERN = r"^\d{8}T\d{6}Z-[0-9a-f]{16}$"
SIGNAL_ID_RE = re.compile(SIGNAL_ID_PATTERN)

# How a Source is read (the Source note's `collectionMethod`), and what kind of reading gave an
# item's observedAt (docs/architecture.md, invariant 9).
CollectionMethod = Literal["rss", "atom", "jsonfeed", "html", "json", "fixture"]
ObservationKind = Literal["rss-observation", "html-observation", "json-observation"]


def _aware_time(value: Any) -> Any:
    # A note's times are the strings the pipeline wrote (the vault's YAML loader keeps them as
    # text): ISO-8601 with a zone. Anything else (a number, a naive time) is a person's edit.
    if isinstance(value, datetime):
        parsed: datetime | None = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            parsed = None
    else:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise ValueError("is not an ISO-8601 time with a time zone (2026-11-30T01:02:03Z)")
    return parsed.astimezone(UTC)


def _day(value: Any) -> Any:
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError:
            pass
    raise ValueError("is not a day written YYYY-MM-DD")


# A time as a note holds it: `2026-11-30T01:02:03Z` (core/clock.format_utc).
NoteTime = Annotated[datetime, BeforeValidator(_aware_time), PlainSerializer(format_utc)]
# A UTC day, `YYYY-MM-DD` (Obsidian's date property).
NoteDay = Annotated[date, BeforeValidator(_day), PlainSerializer(date.isoformat)]
Text = Annotated[str, Strict()]
Hex = Annotated[str, Strict(), Field(pattern=r"^[0-9a-f]+$")]


_PROVENANCE = "x-provenance"


def provenance() -> Any:
    """A required key of the Signal's provenance (marked so in its JSON Schema)."""
    return Field(json_schema_extra={_PROVENANCE: True})


class SignalNote(ContractModel):
    """A Signal note's frontmatter, in the order a new note writes its keys (contract.md).

    `frontmatter()` is the mapping a new note's YAML header is written from;
    `model_validate` reads one back (by its camelCase keys)."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={"description": "The YAML frontmatter of a Radar Signal note."},
    )

    # identity
    entity_type: Literal["signal"]
    schema_version: Literal[1]
    id: Annotated[str, Strict(), Field(pattern=SIGNAL_ID_PATTERN)]  # = the file's stem
    title: Text
    aliases: tuple[Text, ...] | None = None  # the title, for Obsidian's link suggestions
    source: Text | None = None  # `[[<Source file name>]]`, a link to the Source note
    # provenance (docs/architecture.md, invariant 11)
    source_id: Annotated[Text, Field(min_length=1)] = provenance()
    source_item_id: Annotated[Text, Field(min_length=1)] = provenance()
    source_record: Annotated[Text, Field(min_length=1)] = provenance()  # the Source file's path
    requested_url: Annotated[Text, Field(min_length=1)] = provenance()
    item_url: Text | None = None  # the link as the publisher wrote it
    canonical_url: Annotated[Text, Field(min_length=1)] = provenance()
    collection_method: CollectionMethod = provenance()
    fetched_at: NoteTime = provenance()
    collected_on: NoteDay | None = None  # fetchedAt's UTC day
    http_status: Annotated[int, Strict(), Field(ge=100, le=599)] | None = provenance()
    validation_state: Literal["valid", "valid-with-warnings"] = provenance()
    validation_notes: tuple[Text, ...] = ()  # why `valid-with-warnings`
    # observation: the feed's own date, never guessed (invariants 9 and 15)
    observed_at: NoteTime | None = None
    observed_on: NoteDay | None = None  # observedAt's UTC day
    observed_field: Text | None = None  # which field of the item gave observedAt
    observation_kind: ObservationKind
    published_at: NoteTime | None = None  # only with a verified first-party date
    # dedupe
    content_hash: Annotated[str, Strict(), Field(pattern=r"^[0-9a-f]{64}$")]
    simhash: Annotated[Hex, Field(min_length=16, max_length=16)] | None = None
    identity_version: Annotated[int, Strict(), Field(ge=0)] | None = None  # None: version 1
    duplicate_candidate_of: Text | None = None  # `[[<signalId>]]` (a plain id before links)
    # for the layers after collection
    analysis_state: Text
    tags: tuple[Text, ...] = ()
    # Where a verified publishedAt was verified (absent until then).
    published_at_evidence: Text | None = absent_when_none()

    def frontmatter(self) -> Frontmatter:
        """The note's frontmatter as its YAML header holds it (times and days as text)."""
        return self.model_dump(mode="json")


# Every provenance key a Signal must carry (docs/architecture.md, invariant 11): the model's
# fields declared with `provenance()`; the evidence checks count them.
PROVENANCE_FIELDS: tuple[str, ...] = tuple(
    to_camel(name)
    for name, field in SignalNote.model_fields.items()
    if isinstance(field.json_schema_extra, dict) and field.json_schema_extra.get(_PROVENANCE)
)
