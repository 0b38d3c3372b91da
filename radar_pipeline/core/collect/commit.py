"""The commit of one collection: what its Signal files became, recorded in one DuckDB transaction.

The commit rule (docs/architecture.md, invariant 6): Signal files are written first, then one
transaction records the index rows, observations, revisions, dead letters and the new feed
state (validators, watermark) together. A crash in between leaves files without rows, which the
next dedupe stage indexes (invariant 5).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from radar_pipeline.core.acquire.fetch import polite_delay_s
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.collect.results import CheckResult, DedupedCheck
from radar_pipeline.core.collect.signal_files import WrittenSignal
from radar_pipeline.core.contract.outcomes import Decision, FileOutcome, ItemOutcome
from radar_pipeline.core.identity.dedupe import PENDING_PREFIX, ItemDecision, resolve_pending
from radar_pipeline.core.identity.keys import IDENTITY_VERSION, distinguishing_fragment
from radar_pipeline.core.layout import SIGNALS_DIR
from radar_pipeline.core.models import ItemCandidate
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.plan.schedule import next_backoff, window_from
from radar_pipeline.core.store.accounting import record_duplicates, record_source_items
from radar_pipeline.core.store.connection import Connection
from radar_pipeline.core.store.dead_letters import record_failure
from radar_pipeline.core.store.feed_state import FeedState, save_states
from radar_pipeline.core.store.observations import (
    record_evidence,
    record_observations,
    rejection_row,
)
from radar_pipeline.core.store.signals import insert_signals, record_aliases, record_revisions
from radar_pipeline.core.vault.facts import FactsKey, SignalFile, record_facts
from radar_pipeline.core.vault.health import NEXT_ATTEMPT_KEY, manners_fields


@dataclass
class SourceWrite:
    """What the file stage did for one Source: identity -> (Signal id, created | reused)."""

    outcomes: dict[str, tuple[str, FileOutcome]] = field(default_factory=dict)
    temporary_bytes: int = 0
    facts: list[tuple[str, FactsKey, SignalFile]] = field(default_factory=list)

    @classmethod
    def of(cls, written: Sequence[WrittenSignal]) -> SourceWrite:
        write = cls()
        for signal in written:
            write.outcomes[signal.identity] = (signal.signal_id, signal.outcome)
            if signal.facts is not None:
                write.facts.append(signal.facts)
            write.temporary_bytes += signal.temporary_bytes
        return write


@dataclass
class PendingRows:
    """Index and observation rows of a whole collection, inserted in a few statements at the
    end of the commit transaction (per-row INSERTs cost DuckDB milliseconds each)."""

    signals: list[tuple[Any, ...]] = field(default_factory=list)
    observations: list[tuple[Any, ...]] = field(default_factory=list)
    states: list[FeedState] = field(default_factory=list)
    facts: list[tuple[str, FactsKey, SignalFile]] = field(default_factory=list)
    duplicates: list[tuple[Any, ...]] = field(default_factory=list)
    source_items: list[tuple[str, str, datetime | None, datetime]] = field(default_factory=list)
    evidence: list[tuple[Any, ...]] = field(default_factory=list)
    aliases: list[tuple[str, str, str, str, datetime]] = field(default_factory=list)
    revisions: list[tuple[Any, ...]] = field(default_factory=list)

    def flush(self, con: Connection) -> None:
        insert_signals(con, self.signals)
        record_revisions(con, self.revisions)
        record_observations(con, self.observations)
        record_evidence(con, self.evidence)
        save_states(con, self.states)
        record_facts(con, self.facts)
        record_duplicates(con, self.duplicates)
        record_source_items(con, self.source_items)
        record_aliases(con, IDENTITY_VERSION, self.aliases)
        self.signals, self.observations, self.states, self.facts = [], [], [], []
        self.duplicates, self.source_items, self.evidence, self.aliases = [], [], [], []
        self.revisions = []


def commit_source(
    con: Connection,
    spec: CollectionSpec,
    item: DedupedCheck,
    write: SourceWrite,
    state: FeedState | None,
    pending: PendingRows,
) -> None:
    """Record one Source's check: its items' outcomes and its new feed state, or its failure."""
    res, planned = item.result, item.result.plan
    if planned.skip_reason is not None or planned.record is None:
        return
    state = state or FeedState(planned.source_id)
    if res.failed:
        _commit_failure(con, spec, res, state, pending)
        return
    _commit_items(spec, item, write, pending)
    _commit_outside_window(spec, res, pending)
    _commit_filtered(spec, res, pending)
    _commit_rejections(spec, res, pending)
    # Deferred items are not persisted yet: the validators stay where they were, so the next
    # check fetches and parses the feed again instead of ending on a 304 (invariant 6).
    holds_back = any(d.decision == Decision.DEFERRED for d in item.decisions)
    pending.states.append(_state_after_success(spec.as_of, res, state, holds_back))
    pending.facts.extend(write.facts)


def _commit_items(
    spec: CollectionSpec,
    item: DedupedCheck,
    write: SourceWrite,
    pending: PendingRows,
) -> None:
    source_id, now = item.result.plan.source_id, spec.as_of
    resolved = {ident: sid for ident, (sid, _) in write.outcomes.items()}
    for dec in item.decisions:
        cand = dec.candidate
        if dec.decision == Decision.NEW:
            signal_id, _ = write.outcomes[cand.identity]
            flag = resolve_pending(dec.duplicate_candidate_of, now)
            pending.signals.append(index_row(source_id, signal_id, cand, now, flag))
        else:
            signal_id = dec.signal_id or ""
            if signal_id.startswith(PENDING_PREFIX):  # a new item of this same collection
                signal_id = resolved.get(signal_id[len(PENDING_PREFIX) :], signal_id)
        if dec.decision == Decision.UPDATED:
            pending.revisions.append(_revision(spec, signal_id, cand))
        if dec.by_earlier_identity and not signal_id.startswith(PENDING_PREFIX):
            # Found under the rule before ids were read as written: its identity now is an
            # alias of that Signal, whatever URL the feed moves to ("Faithful to the bytes").
            pending.aliases.append((cand.identity, signal_id, source_id, cand.canonical_url, now))
        if dec.decision == Decision.DUPLICATE and not signal_id.startswith(PENDING_PREFIX):
            pending.duplicates.append(
                (cand.identity, signal_id, source_id, cand.canonical_url, now)
            )
        outcome = item_outcome(dec, write).observation
        recorded = signal_id or None  # a deferred item has no Signal yet
        pending.observations.append(_observation(spec, source_id, cand, outcome, recorded))
        pending.source_items.append((cand.identity, source_id, cand.observed_at, now))
        pending.evidence.extend(_evidence(spec, item.result, cand))


def _commit_outside_window(spec: CollectionSpec, res: CheckResult, pending: PendingRows) -> None:
    """Items dated before the recovery cap: counted and recorded, never decided."""
    if res.parsed is None:
        return
    source_id, floor = res.plan.source_id, format_utc(window_from(spec.as_of))
    for cand in res.parsed.outside_window:
        outside = ItemOutcome.OUTSIDE_WINDOW.observation
        row = _observation(spec, source_id, cand, outside, None)
        seen = format_utc(cand.observed_at) if cand.observed_at else "?"
        reason = f"observed {seen} before the recovery cap {floor}"
        pending.observations.append((*row[:7], None, *row[8:10], reason))
        pending.source_items.append((cand.identity, source_id, cand.observed_at, spec.as_of))
        pending.evidence.extend(_evidence(spec, res, cand))


def _commit_filtered(spec: CollectionSpec, res: CheckResult, pending: PendingRows) -> None:
    """Items the Source's include/exclude rules dropped: recorded with the rule, never decided."""
    if res.parsed is None:
        return
    source_id = res.plan.source_id
    for dropped in res.parsed.filtered:
        filtered = ItemOutcome.FILTERED.observation
        row = _observation(spec, source_id, dropped.candidate, filtered, None)
        pending.observations.append((*row[:10], dropped.rule[:500]))
        pending.source_items.append(
            (dropped.candidate.identity, source_id, dropped.candidate.observed_at, spec.as_of)
        )
        pending.evidence.extend(_evidence(spec, res, dropped.candidate))


def _evidence(spec: CollectionSpec, res: CheckResult, cand: ItemCandidate) -> list[tuple[Any, ...]]:
    """One field_evidence row per field of an observed item (html, json, jsonfeed Sources), and
    for a feed's item the date text that was not read as it stands (its raw text kept)."""
    if not cand.evidence or res.plan.record is None:
        return []
    method = res.plan.record.source.collection_method
    return [
        (
            spec.collection_id,
            res.plan.source_id,
            cand.identity,
            ev.field,
            method,
            ev.expression,
            ev.origin,
            spec.as_of,
            ev.raw,
        )
        for ev in cand.evidence
    ]


def _revision(spec: CollectionSpec, signal_id: str, cand: ItemCandidate) -> tuple[Any, ...]:
    """A content change of a known item: a revision row, never a second Signal (invariant 3)."""
    return (
        signal_id,
        spec.collection_id,
        spec.as_of,
        cand.content_hash,
        cand.title,
        cand.observed_at,
    )


def _commit_rejections(spec: CollectionSpec, res: CheckResult, pending: PendingRows) -> None:
    if res.parsed is None:
        return
    for rej in res.parsed.rejections:
        pending.observations.append(
            rejection_row(
                spec.collection_id,
                res.plan.source_id,
                spec.as_of,
                rej.source_item_id,
                f"{rej.reason}: {rej.detail}"[:500],
            )
        )


def _state_after_success(
    now: datetime, res: CheckResult, state: FeedState, holds_back: bool = False
) -> FeedState:
    """The watermark and validators advance only here, once the items are persisted (all of
    them: `holds_back`, some items deferred to the next check, keeps the old validators)."""
    fetch = res.fetch
    assert fetch is not None
    new_state = replace(
        state,
        last_attempt_at=later(state.last_attempt_at, now),
        last_fetch_at=later(state.last_fetch_at, now),
        last_success_at=later(state.last_success_at, now),
        last_status=fetch.status,
        error_state=None,
        consecutive_failures=0,
        backoff_until=None,
    )
    if holds_back:
        pass
    elif fetch.outcome == "ok" or fetch.unchanged_body:
        new_state = replace(
            new_state,
            etag=fetch.etag,
            last_modified=fetch.last_modified,
            last_body_sha256=fetch.body_sha256 or state.last_body_sha256,
        )
    elif fetch.etag or fetch.last_modified:  # 304 may carry refreshed validators
        new_state = replace(
            new_state,
            etag=fetch.etag or state.etag,
            last_modified=fetch.last_modified or state.last_modified,
        )
    if not fetch.conditional:
        new_state = replace(
            new_state, last_unconditional_at=later(state.last_unconditional_at, now)
        )
    polite = polite_delay_s(fetch)
    polite_until = now + timedelta(seconds=polite) if polite is not None else None
    return replace(new_state, polite_until=polite_until)


def _commit_failure(
    con: Connection,
    spec: CollectionSpec,
    res: CheckResult,
    state: FeedState,
    pending: PendingRows,
) -> None:
    """A failed check: backoff in the feed state and a dead letter; nothing else moves."""
    now = spec.as_of
    failures = state.consecutive_failures + 1
    retry_after = res.fetch.retry_after_s if res.fetch else None
    rng = random.Random(f"{res.plan.source_id}:{failures}:{now.isoformat()}")
    backoff = next_backoff(
        failures, now, error_class=res.error_class, retry_after_s=retry_after, rng=rng
    )
    pending.states.append(
        replace(
            state,
            last_attempt_at=later(state.last_attempt_at, now),
            last_fetch_at=later(state.last_fetch_at, now) if res.fetch else state.last_fetch_at,
            last_status=res.fetch.status if res.fetch else state.last_status,
            error_state=res.error_class,
            consecutive_failures=failures,
            backoff_until=backoff,
        ),
    )
    record_failure(
        con,
        spec.collection_id,
        res.plan.source_id,
        res.error_stage or "fetch",
        res.error_class,
        res.error_message or "",
        failures,
        now,
    )


def later(recorded: datetime | None, now: datetime) -> datetime:
    """A health time after a check at `now`: never earlier than the one recorded (a clock
    set back, a restored backup or `--as-of` in the past must not move health backwards)."""
    return now if recorded is None or recorded <= now else recorded


def item_outcome(dec: ItemDecision, write: SourceWrite) -> ItemOutcome:
    """What became of an eligible item: its decision's outcome, except that a `new` item's
    Signal file was created, or reused if it appeared meanwhile (the file stage says which)."""
    if dec.decision == Decision.NEW:
        return write.outcomes[dec.candidate.identity][1]
    return dec.decision.outcome


def _observation(
    spec: CollectionSpec,
    source_id: str,
    cand: ItemCandidate,
    outcome: str,
    signal_id: str | None,
) -> tuple[Any, ...]:
    return (
        spec.collection_id,
        source_id,
        spec.as_of,
        cand.identity,
        cand.source_item_id,
        cand.canonical_url,
        cand.observed_at,
        cand.content_hash,
        outcome,
        signal_id,
        None,  # reason: only rejections carry one
    )


def index_row(
    source_id: str, signal_id: str, cand: ItemCandidate, now: datetime, candidate_of: str | None
) -> tuple[Any, ...]:
    """The `signals` index row of a new Signal, with every identity and secondary key."""
    return (
        signal_id,
        cand.identity,
        IDENTITY_VERSION,
        source_id,
        cand.source_item_id,
        cand.canonical_url,
        cand.title_key,
        cand.observed_at.date() if cand.observed_at else None,
        cand.content_hash,
        cand.simhash,
        now,
        candidate_of,
        (SIGNALS_DIR / f"{signal_id}.md").as_posix(),
        distinguishing_fragment(cand.link, cand.source_item_id),
    )


def health_fields(
    spec: CollectionSpec,
    res: CheckResult,
    before: FeedState | None = None,
    next_attempt_at: str | None = None,
) -> dict[str, str | int | None]:
    """The Source file's health and HTTP keys after one check; `before`: the Source's state
    before it, whose later times are kept (health never moves back, as in the store).
    `next_attempt_at`: the report's time the schedule checks the Source next (empty for a
    `manual` Source: checked when a person runs it)."""
    fetch = res.fetch
    attempt = later(before.last_attempt_at if before else None, spec.as_of)
    fields: dict[str, str | int | None] = {
        "lastAttemptAt": format_utc(attempt),
        NEXT_ATTEMPT_KEY: next_attempt_at,
    }
    if res.failed:
        fields["errorState"] = res.error_class
    else:
        success = later(before.last_success_at if before else None, spec.as_of)
        fields["lastSuccessAt"] = format_utc(success)
        fields["errorState"] = None
    if fetch is not None and fetch.status is not None:
        fields["httpStatus"] = fetch.status
        fields["lastResponseAt"] = format_utc(
            later(before.last_fetch_at if before else None, spec.as_of)
        )
        if not res.failed:
            fields["etag"] = fetch.etag
            fields["lastModified"] = fetch.last_modified
    if fetch is not None:
        fields |= manners_fields(fetch)  # permanentRedirect; a 410 blocks the Source
        record = res.plan.record
        if fields.get("permanentRedirect", "") is None and (
            record is None or not record.source.permanent_redirect
        ):
            # Nothing to clear: a Source that never moved keeps its file as it was.
            del fields["permanentRedirect"]
    return fields
