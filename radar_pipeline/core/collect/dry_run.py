"""`radar sources try`: one fetch of a Source and every decision a check would take, writing
nothing (docs/operations.md, "Trying a Source").

It runs the collection's own stages, not a copy: the bounded fetch (`Fetcher.fetch`, without
recording the attempt), `Collector.parse` (the parse workers' job, then the filter stage),
`decide_checks` (the dedupe decisions, on a read-only DuckDB connection and one listing of the
Signals folder's names) and `account` (the accounting identity). What it leaves out is what
writes: no lock, no fetch attempt, no index repair, no Signal or Temporary Content file, no
DuckDB row, no health keys in the Source file, and no Dagster run (a dry run is no pipeline
work; nothing of it shows in the Dagster UI).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from radar_pipeline.core.acquire.fetch import Fetcher, FetchSettings
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.collect.accounting import CheckAccount, account
from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.collect.commit import SourceWrite
from radar_pipeline.core.collect.decisions import by_identity, decide_checks, signal_ids_on_disk
from radar_pipeline.core.collect.results import DedupedCheck, FetchedChecks
from radar_pipeline.core.config import Settings
from radar_pipeline.core.contract.outcomes import Decision, ItemOutcome
from radar_pipeline.core.contract.sources import FieldEvidence, TriedItem, TryAccounting, TryOutput
from radar_pipeline.core.errors import RegistryError
from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline.core.identity.dedupe import PENDING_PREFIX, ItemDecision, resolve_pending
from radar_pipeline.core.identity.keys import make_signal_id
from radar_pipeline.core.layout import SOURCES_DIR
from radar_pipeline.core.models import FetchRequest, ItemCandidate
from radar_pipeline.core.parse.items import UNTITLED
from radar_pipeline.core.plan.collection import CollectionPlan, CollectionSpec, SourcePlan
from radar_pipeline.core.plan.schedule import coverage_from, window_from
from radar_pipeline.core.registry.sources import (
    SourceRecord,
    load_registry,
    validate_source,
)
from radar_pipeline.core.store.accounting import PreviousCheck, previous_checks
from radar_pipeline.core.store.connection import Connection
from radar_pipeline.core.store.feed_state import load_states
from radar_pipeline.core.store.read_only import reading

DRY_RUN_ID = "dry-run"  # the collection id of the plan a dry run builds (never recorded)


def try_source(settings: Settings, record: SourceRecord, now: datetime) -> TryOutput:
    """One unconditional fetch of `record`'s Source, then the decisions of a check at `now`."""
    paths, fetch_settings = settings.paths, FetchSettings.of(settings)
    state = reading(paths.db, paths.store_url, load_states).get(record.source.id)
    planned = SourcePlan(
        record.source.id,
        record,
        coverage_from(state.last_success_at if state else None, now),
        _request(record, settings),
    )
    plan = CollectionPlan(CollectionSpec(DRY_RUN_ID, "explicit", now), (planned,), 0, None)
    assert planned.request is not None
    with Fetcher(fetch_settings, paths.vault) as fetcher:
        fetched = fetcher.fetch(planned.request, now)
    with Collector(settings, fetch_settings=fetch_settings, parse_workers=0) as collector:
        [result] = collector.parse(plan, FetchedChecks((fetched,)))
    if result.failed or result.parsed is None:
        return TryOutput(
            id=record.source.id,
            outcome="failed",
            http_status=fetched.status,
            items_parsed=0,
            error=result.error_message,
        )
    on_disk = by_identity(signal_ids_on_disk(paths.vault))

    def decide(con: Connection) -> tuple[DedupedCheck, PreviousCheck | None]:
        [deduped] = decide_checks(con, (result,), on_disk)
        return deduped, previous_checks(con, [record.source.id], DRY_RUN_ID).get(record.source.id)

    deduped, previous = reading(paths.db, paths.store_url, decide)
    acc = account(deduped, _would_write(deduped, now), previous)
    items = _items(deduped, record.source.collection_method, now)
    return TryOutput(
        id=record.source.id,
        outcome="passed",
        http_status=fetched.status,
        items_parsed=acc.items_parsed,
        items=items,
        accounting=_accounting(acc),
    )


def _accounting(acc: CheckAccount) -> TryAccounting:
    return TryAccounting(
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
    )


def _request(record: SourceRecord, settings: Settings) -> FetchRequest:
    """The check's request without validators: a dry run wants the body, not a 304."""
    src = record.source
    token = settings.token(src.auth_token_env)
    return FetchRequest(
        source_id=src.id,
        url=src.url,
        collection_method=src.collection_method,
        conditional=False,
        auth_token=token or None,
        from_vault=src.reads_vault,
    )


def _would_write(deduped: DedupedCheck, now: datetime) -> SourceWrite:
    """What the file stage would report: every `new` item created under its future id."""
    write = SourceWrite()
    for dec in deduped.decisions:
        if dec.decision == Decision.NEW:
            ident = dec.candidate.identity
            write.outcomes[ident] = (make_signal_id(now, ident), ItemOutcome.CREATED)
    return write


def _items(deduped: DedupedCheck, method: str, now: datetime) -> tuple[TriedItem, ...]:
    """Every item of the feed in one decision, in feed order."""
    parsed = deduped.result.parsed
    assert parsed is not None
    floor = format_utc(window_from(now))
    tried: list[tuple[int, TriedItem]] = []
    for dec in deduped.decisions:
        item = _tried(dec.candidate, dec.decision.outcome, _reason(dec, now), method)
        tried.append((dec.candidate.position, item))
    for dropped in parsed.filtered:
        cand = dropped.candidate
        tried.append((cand.position, _tried(cand, ItemOutcome.FILTERED, dropped.rule, method)))
    for cand in parsed.outside_window:
        seen = format_utc(cand.observed_at) if cand.observed_at else "?"
        reason = f"observed {seen} before the recovery cap {floor}"
        tried.append((cand.position, _tried(cand, ItemOutcome.OUTSIDE_WINDOW, reason, method)))
    for rej in parsed.rejections:
        reason = f"{rej.reason}: {rej.detail}"
        item = TriedItem(
            decision=ItemOutcome.REJECTED.decision,
            title=None,
            canonical_url=None,
            source_item_id=rej.source_item_id,
            observed_at=None,
            reason=reason,
        )
        tried.append((rej.position if rej.position is not None else -1, item))
    return tuple(item for _, item in sorted(tried, key=lambda pair: pair[0]))


def _reason(dec: ItemDecision, now: datetime) -> str | None:
    """Why the dedupe decided so: the Signal it matched, or the review flag a new one gets."""
    target = dec.signal_id
    if target is not None and target.startswith(PENDING_PREFIX):
        target = f"an earlier item of this feed ({target[len(PENDING_PREFIX) :]})"
    if dec.decision == Decision.REUSED:
        return f"known: Signal {target}"
    if dec.decision == Decision.UPDATED:
        return f"known, content changed: a revision of Signal {target}"
    if dec.decision == Decision.DUPLICATE:
        return f"a re-publication of {target}"
    if dec.decision == Decision.DEFERRED:
        return "beyond this check's cap of unknown items; the next check takes it"
    flag = resolve_pending(dec.duplicate_candidate_of, now)
    created = make_signal_id(now, dec.candidate.identity)
    return f"new Signal {created}" + (f", flagged duplicateCandidateOf {flag}" if flag else "")


def _tried(cand: ItemCandidate, outcome: ItemOutcome, reason: str | None, method: str) -> TriedItem:
    return TriedItem(
        decision=outcome.decision,
        title=cand.title or None,
        canonical_url=cand.canonical_url,
        source_item_id=cand.source_item_id,
        observed_at=cand.observed_at,
        reason=reason,
        evidence=_evidence(cand, method),
    )


def _evidence(cand: ItemCandidate, method: str) -> tuple[FieldEvidence, ...]:
    """Which selector, path or key produced each field (feeds: feedparser's entry keys, and
    how a feed's date text was read, with the text as written)."""
    recorded = tuple(
        FieldEvidence(field=e.field, expression=e.expression, origin=e.origin, raw=e.raw)
        for e in cand.evidence
    )
    if method == "html" or method == "json" or method == "jsonfeed":
        return recorded
    fields = [("link", "link"), ("id", "id")]
    if cand.title and cand.title != UNTITLED:
        fields.insert(0, ("title", "title"))
    if cand.summary:
        fields.append(("summary", "summary"))
    dated = any(e.field == "date" for e in cand.evidence)
    if cand.observed_field and not dated:
        fields.append(("date", cand.observed_field))
    entry = tuple(FieldEvidence(field=f, expression=key, origin="feed entry") for f, key in fields)
    return entry + recorded


def source_to_try(vault: Path, argument: str) -> SourceRecord:
    """The Source `argument` names: a registered id, or a Source file (in the registry or not
    yet). RegistryError says why it cannot be tried: not found, the file's issues, or a
    `legalAssessment: rejected` (a pending Source may be tried; a rejected one is never
    fetched)."""
    record = _source_named(vault, argument)
    if record.source.legal_assessment == "rejected":
        raise RegistryError(
            f"sources try: {record.source.id} has legalAssessment: rejected and is never "
            "fetched; set it to pending to try it"
        )
    return record


def _source_named(vault: Path, argument: str) -> SourceRecord:
    path = Path(argument)
    if not (argument.endswith(".md") or path.is_file()):
        record = load_registry(vault).by_id(argument)
        if record is None:
            raise RegistryError(
                f"sources try: no valid Source with id {argument!r} in "
                f"{(vault / SOURCES_DIR).as_posix()} (`radar sources validate` lists them), "
                "and no file of that name"
            )
        return record
    try:
        text = path.read_bytes().decode("utf-8")
        data, _body = split_frontmatter(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(f"sources try: cannot read {argument}: {exc}") from exc
    source, problems = validate_source(data)
    if source is None:
        listed = "; ".join(f"{code}: {message}" for code, message in problems)
        raise RegistryError(f"sources try: {argument} is not a valid Source: {listed}")
    real = path.resolve()
    shown = real.relative_to(vault.resolve()) if real.is_relative_to(vault.resolve()) else real
    return SourceRecord(source, real, shown.as_posix())
