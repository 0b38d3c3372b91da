"""The filter stage between parse and dedupe: a Source's `include` / `exclude` rules.

A candidate a rule drops never reaches dedupe; it is kept in `ParsedFeed.filtered` with the
rule, so the accounting counts it `filtered` and the commit records it (docs/architecture.md,
invariants 14 and 16). Items outside the recovery window are counted as such, never filtered:
their text is not read.
"""

from __future__ import annotations

from dataclasses import replace

from radar_pipeline.core.models import FilteredItem, ItemCandidate, ParsedFeed
from radar_pipeline.core.registry.filters import ItemFilter
from radar_pipeline.core.registry.sources import SourceRecord


def filter_parsed(parsed: ParsedFeed, rules: ItemFilter) -> ParsedFeed:
    """`parsed` with the candidates the rules drop moved to `filtered`, in feed order."""
    if not rules.active or not parsed.candidates:
        return parsed
    kept: list[ItemCandidate] = []
    dropped: list[FilteredItem] = []
    for cand in parsed.candidates:
        rule = rules.verdict((cand.title, cand.summary, *cand.categories))
        if rule is None:
            kept.append(cand)
        else:
            dropped.append(FilteredItem(cand, rule))
    return replace(parsed, candidates=tuple(kept), filtered=(*parsed.filtered, *dropped))


def filter_for(record: SourceRecord | None, parsed: ParsedFeed | None) -> ParsedFeed | None:
    """The filter stage of one check: its Source's rules applied to what its feed held."""
    if record is None or parsed is None:
        return parsed
    return filter_parsed(parsed, record.source.item_filter)
