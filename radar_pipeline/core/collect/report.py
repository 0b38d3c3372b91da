"""The collection report (core/contract/collection.py), built from the stages' results after
the commit, with the per-Source extras for the Dagster metadata and DuckDB."""

from __future__ import annotations

from datetime import datetime

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.collect.accounting import CheckAccount
from radar_pipeline.core.collect.commit import SourceWrite
from radar_pipeline.core.collect.results import DedupedCheck
from radar_pipeline.core.contract.collection import CollectionReport, Counts, Scopes, SourceReport
from radar_pipeline.core.contract.outcomes import Decision, SourceOutcome
from radar_pipeline.core.models import FetchResult
from radar_pipeline.core.plan.collection import (
    CollectionPlan,
    NextAttempt,
    SourcePlan,
    next_attempts,
)
from radar_pipeline.core.registry.sources import SCOPES
from radar_pipeline.core.store.feed_state import FeedState
from radar_pipeline.core.store.fetch_attempts import validators_changed


def build_report(
    plan: CollectionPlan,
    deduped: tuple[DedupedCheck, ...],
    writes: list[SourceWrite],
    states: dict[str, FeedState] | None = None,
    accounts: list[CheckAccount] | None = None,
) -> CollectionReport:
    """The contract's `radar collect --json` report, plus scopes and per-Source extras
    (`states`: the feed state after this collection's commit, for the backoff figures;
    `accounts`: each check's outcome counts, collect/accounting.py). With `states`, each
    Source's entry names when the schedule checks it next (`next_attempts`; a `manual` Source
    none, and the end of a wait that holds back a run by hand)."""
    after = states or {}
    accounts = accounts if accounts is not None else [CheckAccount() for _ in deduped]
    attempts = next_attempts(plan, after) if states is not None else {}
    ids = [d.result.plan.source_id for d in deduped]
    sources = [
        _source_report(d, w, a, after.get(sid), attempts.get(sid))
        for d, w, a, sid in zip(deduped, writes, accounts, ids, strict=True)
    ]
    scope_of = [
        rec.source.scope if (rec := item.result.plan.record) is not None else "production"
        for item in deduped
    ]
    by_scope: dict[str, Counts] = {
        scope: Counts.of([s for s, of in zip(sources, scope_of, strict=True) if of == scope])
        for scope in SCOPES
    }
    spec = plan.spec
    return CollectionReport.counted(
        Counts.of(sources),
        collection_id=spec.collection_id,
        launch_id=spec.launch_id or spec.collection_id,
        as_of=format_utc(spec.as_of),
        mode=spec.mode,
        downtime_from=format_utc(plan.downtime_from) if plan.downtime_from else None,
        overdue=plan.overdue,
        due=len(plan.source_plans),
        scopes=Scopes(**by_scope),
        sources=tuple(sources),
        clock_behind=format_utc(plan.clock_behind) if plan.clock_behind else None,
    )


def _source_report(
    item: DedupedCheck,
    write: SourceWrite,
    acc: CheckAccount,
    state: FeedState | None = None,
    next_attempt: NextAttempt | None = None,
) -> SourceReport:
    res, planned = item.result, item.result.plan
    outcome: SourceOutcome
    if planned.skip_reason is not None:
        outcome = "skipped"
    elif res.failed:
        outcome = "failed"
    elif res.fetch is not None and res.fetch.outcome == "not-modified":
        outcome = "not-modified"
    else:
        outcome = "passed"
    fetch = res.fetch
    return SourceReport(
        id=planned.source_id,
        outcome=outcome,
        http_status=fetch.status if fetch else None,
        # itemsParsed = the sum of the item outcomes (contract/outcomes.py); late; gap
        items_parsed=acc.items_parsed,
        created=acc.created,
        reused=acc.reused,
        updated=acc.updated,
        duplicates=acc.duplicates,
        rejected=acc.rejected,
        deferred=acc.deferred,
        outside_window=acc.outside_window,
        filtered=acc.filtered,
        late=acc.late,
        possible_gap=acc.possible_gap,
        coverage_from=format_utc(planned.coverage_from) if planned.coverage_from else None,
        error=planned.skip_reason or res.error_message,
        error_class=res.error_class,
        bytes=fetch.bytes_received if fetch else 0,
        duration_ms=round(fetch.duration_s * 1000, 1) if fetch else 0.0,
        conditional=fetch.conditional if fetch else None,
        temporary_bytes=write.temporary_bytes,
        notes=tuple(planned.notes),
        # Page extraction's figures are filled in by the page stage for the Sources it ran for.
        # Metrics per attempt (also in fetch_attempts): what came back and what it held.
        error_stage=res.error_stage,
        body_sha256=fetch.body_sha256 if fetch else None,
        validators_changed=_report_validators_changed(planned, fetch),
        items_new=sum(1 for d in item.decisions if d.decision == Decision.NEW),
        consecutive_failures=state.consecutive_failures if state else 0,
        backoff_until=format_utc(state.backoff_until) if state and state.backoff_until else None,
        next_attempt_at=_utc(next_attempt.at if next_attempt else None),
        not_before=_utc(next_attempt.not_before if next_attempt else None),
    )


def _utc(moment: datetime | None) -> str | None:
    return format_utc(moment) if moment else None


def _report_validators_changed(planned: SourcePlan, fetch: FetchResult | None) -> bool | None:
    if fetch is None or planned.request is None:
        return None
    return validators_changed(fetch, planned.request.etag, planned.request.last_modified)
