"""The collection report: the contract's `radar collect --json` object, built from the stages'
results after the commit (with per-Source extras for the Dagster metadata and DuckDB)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.collect.accounting import CheckAccount
from radar_pipeline.core.collect.commit import SourceWrite
from radar_pipeline.core.collect.results import DedupedCheck
from radar_pipeline.core.models import FetchResult
from radar_pipeline.core.plan.collection import CollectionPlan, PlannedCheck
from radar_pipeline.core.store.collections import COUNT_KEYS
from radar_pipeline.core.store.feed_state import FeedState
from radar_pipeline.core.store.fetch_attempts import validators_changed

# Summed over Sources at the top level: the collections table's counts, then the accounting's.
TOTAL_KEYS = (*COUNT_KEYS, "deferred", "outsideWindow", "filtered", "late")


def build_report(
    plan: CollectionPlan,
    deduped: tuple[DedupedCheck, ...],
    writes: list[SourceWrite],
    states: dict[str, FeedState] | None = None,
    accounts: list[CheckAccount] | None = None,
) -> dict[str, Any]:
    """The contract's `radar collect --json` object, plus scopes and per-Source extras
    (`states`: the feed state after this collection's commit, for the backoff figures;
    `accounts`: each check's outcome counts, collect/accounting.py)."""
    after = states or {}
    accounts = accounts if accounts is not None else [CheckAccount() for _ in deduped]
    sources = [
        _source_report(d, w, a, after.get(d.result.check.source_id))
        for d, w, a in zip(deduped, writes, accounts, strict=True)
    ]
    totals: Counter[str] = Counter()
    scopes: dict[str, Counter[str]] = {"production": Counter(), "fixture": Counter()}
    for src, item in zip(sources, deduped, strict=True):
        rec = item.result.check.record
        scope = scopes["fixture" if rec is not None and rec.source.is_fixture else "production"]
        outcome = src["outcome"]
        bucket = "passed" if outcome in ("passed", "not-modified") else outcome
        for counter in (totals, scope):
            counter[bucket] += 1
            for key in TOTAL_KEYS:
                counter[key] += src[key]
    spec = plan.spec
    report: dict[str, Any] = {
        "collectionId": spec.collection_id,
        "launchId": spec.launch_id or spec.collection_id,
        "asOf": format_utc(spec.as_of),
        "mode": spec.mode,
        "downtimeFrom": format_utc(plan.downtime_from) if plan.downtime_from else None,
        "overdue": plan.overdue,
        "due": len(plan.checks),
        "passed": totals["passed"],
        "failed": totals["failed"],
        "skipped": totals["skipped"],
        **{key: totals[key] for key in TOTAL_KEYS},
        "scopes": {
            name: {k: c[k] for k in ("passed", "failed", "skipped", *TOTAL_KEYS)}
            for name, c in scopes.items()
        },
        "sources": sources,
    }
    return report


def merge_reports(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """One command's report from the reports of its runs, in the order they ran: counts and
    Sources add up; `downtimeFrom` and `overdue` are the first run's (planned before any of
    this command's commits moved the state)."""
    first, *rest = reports
    if not rest:
        return first
    merged = dict(first) | {"collectionIds": [r["collectionId"] for r in reports]}
    for key in ("due", "passed", "failed", "skipped", *TOTAL_KEYS):
        merged[key] = sum(r[key] for r in reports)
    merged["scopes"] = {
        name: {k: sum(r["scopes"][name][k] for r in reports) for k in counts}
        for name, counts in first["scopes"].items()
    }
    merged["sources"] = [src for r in reports for src in r["sources"]]
    return merged


def _source_report(
    item: DedupedCheck, write: SourceWrite, acc: CheckAccount, state: FeedState | None = None
) -> dict[str, Any]:
    res, check = item.result, item.result.check
    if check.skip_reason is not None:
        outcome = "skipped"
    elif res.failed:
        outcome = "failed"
    elif res.fetch is not None and res.fetch.outcome == "not-modified":
        outcome = "not-modified"
    else:
        outcome = "passed"
    fetch = res.fetch
    return {
        "id": check.source_id,
        "outcome": outcome,
        "httpStatus": fetch.status if fetch else None,
        **acc.to_json(),  # itemsParsed = created + ... + outsideWindow + filtered; late; gap
        "coverageFrom": format_utc(check.coverage_from) if check.coverage_from else None,
        "error": check.skip_reason or res.error_message,
        "errorClass": res.error_class,
        "bytes": fetch.bytes_received if fetch else 0,
        "durationMs": round(fetch.duration_s * 1000, 1) if fetch else 0.0,
        "conditional": fetch.conditional if fetch else None,
        "temporaryBytes": write.temporary_bytes,
        "notes": list(check.notes),
        # Page extraction's figures, filled in by the page stage for the Sources it ran for.
        "pages": None,
        # Metrics per attempt (also in fetch_attempts): what came back and what it held.
        "errorStage": res.error_stage,
        "bodySha256": fetch.body_sha256 if fetch else None,
        "validatorsChanged": _report_validators_changed(check, fetch),
        "itemsNew": sum(1 for d in item.decisions if d.decision == "new"),
        "consecutiveFailures": state.consecutive_failures if state else 0,
        "backoffUntil": format_utc(state.backoff_until) if state and state.backoff_until else None,
    }


def _report_validators_changed(check: PlannedCheck, fetch: FetchResult | None) -> bool | None:
    if fetch is None or check.request is None:
        return None
    return validators_changed(fetch, check.request.etag, check.request.last_modified)
