"""Collection reports as Dagster metadata: Markdown tables and per-Source figures."""

from __future__ import annotations

import dagster as dg

from radar_pipeline.core.contract.collection import CollectionReport, PageFigures, SourceReport
from radar_pipeline.core.contract.outcomes import OUTCOME_KEYS, ItemOutcome

# The columns of the Sources table: each entry's keys as the report's JSON spells them.
COLUMNS = ("id", "outcome", "httpStatus", *OUTCOME_KEYS, "error")


# Values a Dagster metadata entry can hold as they are (the rest go through MetadataValue).
MetadataEntry = str | int | float | bool | dg.MetadataValue


def collection_headline(report: CollectionReport) -> str:
    """The collection in one line, what a person reads first in the run's events."""
    t = report.totals
    line = f"{t.passed} passed, {t.failed} failed, {t.skipped} skipped; {t.created} new Signals"
    return line + (f"; down since {report.downtime_from}" if report.downtime_from else "")


def collection_markdown(report: CollectionReport) -> str:
    t = report.totals
    head = (
        f"as of {report.as_of} · downtime from {report.downtime_from or '–'} · overdue "
        f"{report.overdue} · due {report.due} · passed {t.passed} · failed "
        f"{t.failed} · skipped {t.skipped} · created {t.created} · "
        f"reused {t.reused} · updated {t.updated} · duplicates "
        f"{t.duplicates} · rejected {t.rejected}\n\n"
    )
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for src in report.sources:
        entry = src.json_object()  # the table shows the entry as the JSON spells it
        cells = [
            str(entry[c] if entry[c] is not None else "–").replace("|", "\\|") for c in COLUMNS
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return head + "\n".join(lines)


def source_metadata(
    src: SourceReport, next_due: str = "", undated: int = 0
) -> dict[str, MetadataEntry]:
    """One Source at a glance on its partition page (figures the UI also plots over time):
    last outcome, HTTP status, counts, next due time, backoff and last error class (and, for
    a page-extraction Source, its page figures). `undated`: eligible items without a date
    read from the feed's text (always inside the window: counted, not silent)."""
    return {
        **_page_metadata(src.pages),
        "outcome": src.outcome,
        # No entry without an answer (a DNS or connect failure): -1 would plot as a status.
        **({"http_status": src.http_status} if src.http_status is not None else {}),
        # The accounting (invariant 14): items_parsed = the sum of the item outcomes, each under
        # its field's name (filtered: items the Source's include/exclude rules dropped; each
        # rule is in DuckDB's item_observations).
        **{o.field: src.count(o) for o in ItemOutcome},
        "late": src.late,
        "undated": undated,
        "possible_gap": src.possible_gap,
        "next_due_at": next_due,
        # A `manual` Source's "when run by hand, not before": the report's `notBefore`.
        **({"not_before": src.not_before} if src.not_before else {}),
        "backoff_until": src.backoff_until or "",
        "error_class": src.error_class or "",
        "error": src.error or "",
        "bytes": src.bytes,
        "duration_ms": dg.MetadataValue.float(float(src.duration_ms)),
        "coverage_from": src.coverage_from or "",
        # Metrics per attempt.
        "conditional": bool(src.conditional),
        "body_sha256": src.body_sha256 or "",
        "validators_changed": bool(src.validators_changed),
        "items_parsed": src.items_parsed,
        "items_new": src.items_new,
        "consecutive_failures": src.consecutive_failures,
    }


def failure_line(src: SourceReport) -> str:
    """A failed check in one line, root cause first: the error as the fetch or parse stage
    named it, the HTTP status where there was an answer, and when the next attempt is due
    (`SourceReport.next_attempt_words`: the report's `nextAttemptAt`, which already waits for
    the backoff; for a `manual` Source, when a person runs it, not before a wait that holds
    such a run back)."""
    status = f"HTTP {src.http_status}" if src.http_status is not None else "no HTTP answer"
    error = src.error or src.error_class or "failed"
    return f"{error}; {status}; next attempt {src.next_attempt_words()}"


def _page_metadata(pages: PageFigures | None) -> dict[str, MetadataEntry]:
    """Page extraction's figures of one check (none for a Source without the policy)."""
    if pages is None:
        return {}
    return {
        "pages_fetched": pages.fetched,
        "pages_pending": pages.pending,
        "pages_disallowed": pages.disallowed,
        "pages_stopped": pages.stopped,
        "pages_failed": pages.failed,
        "pages_requests": pages.requests,
        "pages_blocked": pages.blocked or "",
    }
