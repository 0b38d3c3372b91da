"""What one Source check has become after each stage: the values the stages hand on."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from radar_pipeline.core.identity.dedupe import ItemDecision
from radar_pipeline.core.models import FetchResult, ParsedFeed
from radar_pipeline.core.plan.collection import SourcePlan

if TYPE_CHECKING:
    # For types only: the workers import the parsers, which loading the definitions (and so
    # this module, through the ops' signatures) must not.
    from radar_pipeline.core.collect.workers import ParseOutcome


@dataclass(frozen=True)
class FetchedChecks:
    """What the fetch stage hands the parse stage.

    `results`: one fetch result per Source plan, in plan order (None: not fetched).
    `parsing`: the parses the fetch stage started while other fetches were still in flight,
    by Source id: each body went to the parse workers as its fetch ended. The parse stage
    awaits these futures and never parses those bodies again; the Collector's `close` cancels
    any not awaited (its workers shut down)."""

    results: tuple[FetchResult | None, ...]
    parsing: Mapping[str, Future[ParseOutcome]] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckResult:
    """A Source check after fetch and parse, with its plan: either items to dedupe or a
    classified failure."""

    plan: SourcePlan
    fetch: FetchResult | None = None
    parsed: ParsedFeed | None = None
    error_stage: str | None = None
    error_class: str | None = None
    error_message: str | None = None

    @property
    def failed(self) -> bool:
        return self.error_class is not None


@dataclass(frozen=True)
class DedupedCheck:
    """A check's result with the dedupe decision of each of its candidates."""

    result: CheckResult
    decisions: tuple[ItemDecision, ...] = ()
