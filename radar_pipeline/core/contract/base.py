"""The base of every contract model: frozen, camelCase JSON keys, UTC times as the CLI prints
them.

Why pydantic v2 (docs/architecture.md, "The contract models"): the JSON shape, the reading of
a stored report and the JSON Schema come from one declaration, so they cannot drift apart; a
field's key is generated from its name, never spelled twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    model_serializer,
)
from pydantic.alias_generators import to_camel

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.jsontypes import JsonObject

# An aware time, printed as `2026-11-30T01:02:03Z` (core/clock.format_utc: seconds, UTC).
UtcTime = Annotated[datetime, PlainSerializer(format_utc, return_type=str)]


def absent_when_none(alias: str | None = None) -> Any:
    """A field (default None) whose key is left out of the JSON while it is None, where the
    contract has always left it out rather than printing null (`alias`: its key, where the
    code's name is not the key's camel case)."""
    return Field(default=None, exclude_if=_is_none, alias=alias, title=alias)


def _is_none(value: object) -> bool:
    return value is None


class ContractModel(BaseModel):
    """A JSON object of the contract: keys in declaration order, camelCase, frozen values.

    `json_object()` is what a command prints (through `json.dumps`, so floats and escapes
    read as they always have); `model_validate` reads one back (by key or by field name)."""

    model_config = ConfigDict(
        frozen=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="ignore",
        # The schema of an output: a key the JSON always holds is required, defaults or not.
        json_schema_serialization_defaults_required=True,
        field_title_generator=lambda name, _field: to_camel(name),
    )

    def json_object(self) -> JsonObject:
        """The model as the JSON object the contract shows (Python values, JSON types)."""
        return self.model_dump(mode="json")


class SortedContractModel(ContractModel):
    """A contract object whose keys read in alphabetical order: the order the store writes a
    report in (JSON with sorted keys) and reads it back, which the printed report has always
    kept. Fields are declared in the order that reads best; only the output is sorted."""

    # No return annotation on purpose: pydantic takes a serializer's annotation as the
    # output's JSON Schema; without one the schema stays the model's own fields.
    @model_serializer(mode="wrap")
    def _sorted_keys(self, handler: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        return dict(sorted(handler(self).items()))
