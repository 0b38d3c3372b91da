"""Collection reports as Dagster metadata: Markdown tables and per-Source figures."""

from __future__ import annotations

from typing import Any

import dagster as dg


def _columns() -> tuple[str, ...]:
    # Imported here: the accounting module pulls in the commit and the fetcher (httpx), which
    # only a collection run needs, not every process that loads the definitions.
    from radar_pipeline.core.collect.accounting import OUTCOME_KEYS

    return ("id", "outcome", "httpStatus", *OUTCOME_KEYS, "error")


def collection_markdown(report: dict[str, Any]) -> str:
    columns = _columns()
    head = (
        f"as of {report['asOf']} · downtime from {report['downtimeFrom'] or '–'} · overdue "
        f"{report['overdue']} · due {report['due']} · passed {report['passed']} · failed "
        f"{report['failed']} · skipped {report['skipped']} · created {report['created']} · "
        f"reused {report['reused']} · updated {report['updated']} · duplicates "
        f"{report['duplicates']} · rejected {report['rejected']}\n\n"
    )
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for src in report["sources"]:
        cells = [
            str(src.get(c) if src.get(c) is not None else "–").replace("|", "\\|") for c in columns
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return head + "\n".join(lines)


def source_metadata(src: dict[str, Any], next_due: str = "") -> dict[str, Any]:
    """One Source at a glance on its partition page (figures the UI also plots over time):
    last outcome, HTTP status, counts, next due time, backoff and last error class (and, for
    a page-extraction Source, its page figures)."""
    return {
        **_page_metadata(src.get("pages")),
        "outcome": src["outcome"],
        "http_status": src["httpStatus"] if src["httpStatus"] is not None else -1,
        "created": src["created"],
        "reused": src["reused"],
        "updated": src["updated"],
        "duplicates": src["duplicates"],
        "rejected": src["rejected"],
        # The accounting (invariant 14): items_parsed = created + reused + updated +
        # duplicates + rejected + deferred + outside_window; .get for older reports.
        "deferred": int(src.get("deferred") or 0),
        "outside_window": int(src.get("outsideWindow") or 0),
        "late": int(src.get("late") or 0),
        "possible_gap": bool(src.get("possibleGap")),
        "next_due_at": next_due,
        "backoff_until": src.get("backoffUntil") or "",
        "error_class": src.get("errorClass") or "",
        "error": src["error"] or "",
        "bytes": src["bytes"],
        "duration_ms": dg.MetadataValue.float(float(src["durationMs"])),
        "coverage_from": src["coverageFrom"] or "",
        # Metrics per attempt; .get keeps reports recorded before they existed readable.
        "conditional": bool(src.get("conditional")),
        "body_sha256": src.get("bodySha256") or "",
        "validators_changed": bool(src.get("validatorsChanged")),
        "items_parsed": int(src.get("itemsParsed") or 0),
        "items_new": int(src.get("itemsNew") or 0),
        "consecutive_failures": int(src.get("consecutiveFailures") or 0),
    }


def _page_metadata(pages: dict[str, Any] | None) -> dict[str, Any]:
    """Page extraction's figures of one check (none for a Source without the policy)."""
    if not pages:
        return {}
    figures = ("fetched", "pending", "disallowed", "stopped", "failed", "requests")
    return {
        **{f"pages_{key}": int(pages.get(key) or 0) for key in figures},
        "pages_blocked": pages.get("blocked") or "",
    }
