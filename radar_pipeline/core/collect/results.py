"""What one Source check has become after each stage: the values the stages hand on."""

from __future__ import annotations

from dataclasses import dataclass

from radar_pipeline.core.identity.dedupe import ItemDecision
from radar_pipeline.core.models import FetchResult, ParsedFeed
from radar_pipeline.core.plan.collection import SourcePlan


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
