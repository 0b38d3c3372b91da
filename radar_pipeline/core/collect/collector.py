"""One collection, stage by stage: plan -> fetch -> parse -> dedupe -> materialize.

Each stage is a method the Dagster ops call in turn (the CLI and the UI go through them). The
commit rule (design invariant 6): Signal files are written first, then one DuckDB transaction
records the index rows, observations and the new feed state (validators, watermark) together;
a crash in between leaves files without rows, which the next dedupe stage indexes (reconcile).
"""

from __future__ import annotations

import json
import logging
import random
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import duckdb

from radar_pipeline.core.acquire.fetch import Fetcher, FetchSettings, fetch_many
from radar_pipeline.core.audit.audits import FactsKey, SignalFile, record_facts
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.collect.pool import (
    HealthMirrors,
    ParseArgs,
    ParseOutcome,
    WriteItem,
    WriteResult,
    mirror_health,
    parse_early,
    parse_many,
    parse_pool,
    write_many,
)
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.identity.dedupe import (
    PENDING_PREFIX,
    DedupeBatch,
    ItemDecision,
    decide_many,
    resolve_pending,
)
from radar_pipeline.core.identity.keys import IDENTITY_VERSION, make_signal_id
from radar_pipeline.core.models import FetchResult, ItemCandidate, ParsedFeed
from radar_pipeline.core.plan.collection import (
    PUBLISHER_WAITS,
    CollectionPlan,
    CollectionSpec,
    PlannedCheck,
    plan_collection,
)
from radar_pipeline.core.plan.locks import LockBook
from radar_pipeline.core.plan.schedule import next_backoff
from radar_pipeline.core.registry.sources import RegistrySnapshot, load_registry
from radar_pipeline.core.store.connection import (
    Store,
    gc_paused,
    insert_rows,
    to_json_text,
    unnested,
)
from radar_pipeline.core.store.feed_state import FeedState, load_states, save_states
from radar_pipeline.core.vault import index
from radar_pipeline.core.vault.signals import SIGNALS_DIR, SignalDocument, remove_stale_temp_files

log = logging.getLogger(__name__)

COUNT_KEYS = ("created", "reused", "updated", "duplicates", "rejected")
# Requests in flight at once. A check mostly waits on the publisher (~100 ms a response), so
# 32 threads finish 200 conditional checks in ~7 round trips instead of 13 with 16; the client
# still caps connections at 100.
FETCH_WORKERS = 32


@dataclass(frozen=True)
class CheckResult:
    """A planned check after fetch and parse: either items to dedupe or a classified failure."""

    check: PlannedCheck
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
    result: CheckResult
    decisions: tuple[ItemDecision, ...] = ()


class Collector:
    """The pipeline over one vault and one DuckDB file."""

    def __init__(
        self,
        paths: RadarPaths,
        store: Store | None = None,
        fetch_settings: FetchSettings | None = None,
        max_workers: int = FETCH_WORKERS,
    ) -> None:
        self.paths = paths
        self.store = store or Store(paths.db)
        self.fetch_settings = fetch_settings or FetchSettings.from_env()
        self.max_workers = max_workers
        self.locks = LockBook(paths.locks_dir)

    # ---- stages ----------------------------------------------------------------------------

    def plan(
        self, spec: CollectionSpec, snapshot: RegistrySnapshot | None = None
    ) -> CollectionPlan:
        """Every Source's check (`snapshot`: the registry already loaded for this collection)."""
        removed = remove_stale_temp_files(self.paths.vault)
        if removed:
            log.info("removed %d temp files a killed collection left behind", removed)
        if snapshot is None:
            snapshot = load_registry(self.paths.vault)
        with self.store.transaction() as con:
            states = with_uncommitted_fetches(con, load_states(con))
            row = con.execute("SELECT max(as_of) FROM collections").fetchone()
        last = row[0] if row else None
        first = plan_collection(spec, snapshot, states, last, self.locks)
        if not any(c.request is not None for c in first.checks):
            return first
        # The locks are held now. Plan again on the state as it is under them: another process
        # may have committed a check of the same Source between our read and our lock, and
        # its fetch time (minIntervalSeconds) and validators must count.
        with self.store.transaction() as con:
            states = with_uncommitted_fetches(con, load_states(con))
        return plan_collection(spec, snapshot, states, last, self.locks)

    def fetch(self, plan: CollectionPlan) -> tuple[FetchResult | None, ...]:
        """Fetch every planned request concurrently; record each attempt in DuckDB."""
        wanted = [c.request for c in plan.checks if c.request is not None and c.failure is None]
        by_id = {c.source_id: c for c in plan.checks}

        def parse_soon(result: FetchResult) -> None:
            # With the parse pool (core/parallel.py), parsing starts while the other feeds are
            # still being fetched; the parse stage picks the outcome up.
            check = by_id.get(result.source_id)
            if check is not None and _parse_input(check, result) is not None:
                parse_early(_parse_args(check, result, plan.spec.as_of), _body_key(result))

        with Fetcher(self.fetch_settings, self.paths.vault) as fetcher:
            results = fetch_many(
                fetcher,
                wanted,
                plan.spec.as_of,
                max_workers=self.max_workers,
                on_result=parse_soon if parse_pool() is not None else None,
            )
        by_source = {r.source_id: r for r in results}
        with self.store.transaction() as con:
            states = load_states(con)
            _record_attempts(con, plan.spec.collection_id, results, states)
        return tuple(by_source.get(c.source_id) for c in plan.checks)

    def parse(
        self, plan: CollectionPlan, fetched: tuple[FetchResult | None, ...]
    ) -> tuple[CheckResult, ...]:
        """Parse every fetched body (on the parse pool's processes when the command started
        one, see core/parallel.py); failures become classified CheckResults."""
        now = plan.spec.as_of
        pairs = list(zip(plan.checks, fetched, strict=True))
        jobs: list[ParseArgs] = []
        keys: list[str] = []
        for check, result in pairs:
            if result is not None and _parse_input(check, result) is not None:
                jobs.append(_parse_args(check, result, now))
                keys.append(_body_key(result))
        outcomes = iter(parse_many(jobs, keys))
        return tuple(
            _parse_one(
                check, result, next(outcomes) if _parse_input(check, result) is not None else None
            )
            for check, result in pairs
        )

    def dedupe(self, results: tuple[CheckResult, ...]) -> tuple[DedupedCheck, ...]:
        """Repair the index from the vault, then classify every candidate."""
        batch = DedupeBatch()  # new items of earlier Sources in this collection count too
        # The repair scan loads every indexed id: no cycles, many objects (store.gc_paused).
        with gc_paused(), self.store.transaction() as con:
            repair = index.reconcile(con, self.paths.vault)
            if repair.indexed:
                log.info("index: %d Signal files had no index row; indexed", repair.indexed)
            checks = [
                (res.check.source_id, res.parsed.candidates if res.parsed else ())
                for res in results
            ]
            decisions = decide_many(con, checks, batch)
        return tuple(DedupedCheck(res, d) for res, d in zip(results, decisions, strict=True))

    def materialize(
        self, plan: CollectionPlan, deduped: tuple[DedupedCheck, ...]
    ) -> dict[str, Any]:
        """Write new Signals, then commit index, observations and feed state; report."""
        return self.commit(plan, deduped).finish()

    def commit(self, plan: CollectionPlan, deduped: tuple[DedupedCheck, ...]) -> Committed:
        """`materialize` up to its commit: the Sources' health mirrors are still being written
        (on the parse pool when there is one) when this returns, so the caller can report the
        committed collection meanwhile. `Committed.finish` waits for them and releases the
        Source locks; until then no other collection checks these Sources."""
        spec = plan.spec
        try:
            # Sources write in parallel (each its own Signals, so no two writers ever race for
            # one file), on the parse pool's processes or on threads: the two fsyncs per Signal
            # then overlap instead of queueing.
            batches = [self._write_items(spec, d) for d in deduped]
            results = write_many(self.paths.vault, batches)
            writes = [_source_write(r) for r in results]
            with self.store.transaction() as con:
                states = load_states(con)
                pending = PendingRows()
                for item, write in zip(deduped, writes, strict=True):
                    state = states.get(item.result.check.source_id)
                    _commit_source(con, spec, item, write, state, pending)
                    pending.facts.extend(write.facts)
                pending.flush(con)
                report = build_report(plan, deduped, writes, load_states(con))
                _record_metrics(con, spec, report["sources"])
                _record_collection(con, spec, report)
            mirrors = [
                (rec.source.id, rec.path, rec.record_path, health_fields(spec, d.result))
                for d in deduped
                if (rec := d.result.check.record) is not None and d.result.check.skip_reason is None
            ]
            return Committed(spec.collection_id, report, mirror_health(mirrors))
        except BaseException:
            LockBook.release_all(spec.collection_id)
            raise

    def run(self, spec: CollectionSpec) -> dict[str, Any]:
        """All stages in one call (the same code the Dagster ops run, for plain tests)."""
        plan = self.plan(spec)
        try:
            results = self.parse(plan, self.fetch(plan))
            return self.materialize(plan, self.dedupe(results))
        finally:
            LockBook.release_all(spec.collection_id)

    # ---- helpers ---------------------------------------------------------------------------

    def _write_items(self, spec: CollectionSpec, item: DedupedCheck) -> list[WriteItem]:
        """The Signal files one Source's new items need (none when the check failed)."""
        res = item.result
        if res.failed or res.check.record is None or res.fetch is None:
            return []
        rec = res.check.record
        keep_text = rec.source.full_text == "feed-content"
        items: list[WriteItem] = []
        for dec in item.decisions:
            if dec.decision != "new":
                continue
            cand = dec.candidate
            signal_id = make_signal_id(spec.as_of, cand.identity)
            flag = resolve_pending(dec.duplicate_candidate_of, spec.as_of)
            doc = build_document(signal_id, cand, res, rec.record_path, flag)
            temporary = (cand.title, cand.content) if keep_text and cand.content else None
            items.append((cand.identity, doc, temporary))
        return items


class Committed:
    """A committed collection whose Source files' health mirrors may still be in writing."""

    def __init__(self, collection_id: str, report: dict[str, Any], mirrors: HealthMirrors) -> None:
        self.collection_id = collection_id
        self.report = report
        self._mirrors = mirrors

    def finish(self) -> dict[str, Any]:
        """Wait for the mirrors, release the Source locks; the report."""
        try:
            for source_id, record_path, error in self._mirrors.wait():
                # DuckDB holds the full history; the file mirror is retried on the next check.
                log.warning("health of %s not written to %s: %s", source_id, record_path, error)
        finally:
            LockBook.release_all(self.collection_id)
        return self.report


@dataclass
class SourceWrite:
    """What the file stage did for one Source: identity -> (Signal id, created | reused)."""

    outcomes: dict[str, tuple[str, str]] = field(default_factory=dict)
    temporary_bytes: int = 0
    facts: list[tuple[str, FactsKey, SignalFile]] = field(default_factory=list)


@dataclass
class PendingRows:
    """Index and observation rows of a whole collection, inserted in two statements at the end
    of the commit transaction (per-row INSERTs cost DuckDB milliseconds each)."""

    signals: list[tuple[Any, ...]] = field(default_factory=list)
    observations: list[tuple[Any, ...]] = field(default_factory=list)
    states: list[FeedState] = field(default_factory=list)
    facts: list[tuple[str, FactsKey, SignalFile]] = field(default_factory=list)

    def flush(self, con: duckdb.DuckDBPyConnection) -> None:
        index.insert_signals(con, self.signals)
        insert_rows(con, "item_observations", OBSERVATION_COLUMN_TYPES, self.observations)
        save_states(con, self.states)
        record_facts(con, self.facts)
        self.signals, self.observations, self.states, self.facts = [], [], [], []


# item_observations columns in order (store.py, migration 1).
OBSERVATION_COLUMN_TYPES = (
    "VARCHAR",  # collection_id
    "VARCHAR",  # source_id
    "TIMESTAMPTZ",  # observed_in_run_at
    "VARCHAR",  # identity
    "VARCHAR",  # source_item_id
    "VARCHAR",  # canonical_url
    "TIMESTAMPTZ",  # observed_at
    "VARCHAR",  # content_hash
    "VARCHAR",  # outcome
    "VARCHAR",  # signal_id
    "VARCHAR",  # reason
)


def _source_write(results: list[WriteResult]) -> SourceWrite:
    write = SourceWrite()
    for identity, signal_id, outcome, facts, temporary_bytes in results:
        write.outcomes[identity] = (signal_id, outcome)
        if facts is not None:
            write.facts.append(facts)
        write.temporary_bytes += temporary_bytes
    return write


def new_collection_id() -> str:
    return uuid.uuid4().hex


def _parse_args(check: PlannedCheck, result: FetchResult, now: datetime) -> ParseArgs:
    assert result.body is not None
    return (
        check.source_id,
        result.body,
        result.final_url,
        result.content_type,
        now,
        check.coverage_from,
    )


def _body_key(result: FetchResult) -> str:
    return result.body_sha256 or f"{result.requested_url}:{result.bytes_received}"


def _parse_input(check: PlannedCheck, result: FetchResult | None) -> bytes | None:
    """The body to parse, or None when the check ends before parsing."""
    if check.failure is not None or result is None or result.outcome != "ok":
        return None
    return result.body


def _parse_one(
    check: PlannedCheck, result: FetchResult | None, outcome: ParseOutcome | None
) -> CheckResult:
    if check.failure is not None:
        return CheckResult(check, result, None, "plan", check.failure[0], check.failure[1])
    if result is None:
        return CheckResult(check)
    if result.outcome == "failed":
        return CheckResult(
            check,
            result,
            None,
            "fetch",
            result.error_class or "network",
            result.error_message or "fetch failed",
        )
    if outcome is None:
        return CheckResult(check, result)
    if outcome[0] == "error":
        return CheckResult(
            check, result, None, "parse", outcome[1], f"parse: {outcome[1]}: {outcome[2]}"
        )
    if outcome[0] == "crash":  # a parser bug must fail one Source, never the collection
        log.error("parse of %s crashed: %s: %s", check.source_id, outcome[1], outcome[2])
        return CheckResult(
            check,
            result,
            None,
            "parse",
            "invalid-xml",
            f"parse: unexpected {outcome[1]}: {outcome[2]}"[:300],
        )
    return CheckResult(check, result, outcome[1])


def build_document(
    signal_id: str,
    cand: ItemCandidate,
    res: CheckResult,
    record_path: str,
    duplicate_candidate_of: str | None,
) -> SignalDocument:
    """The Signal's frontmatter: identity, provenance, observation, review flags."""
    fetch = res.fetch
    assert fetch is not None and res.check.record is not None
    notes = []
    if cand.future_dated:
        notes.append("future-dated")
    if res.parsed is not None and res.parsed.bozo:
        notes.append("feed-ill-formed")
    fm: dict[str, Any] = {
        "entityType": "signal",
        "schemaVersion": 1,
        "id": signal_id,
        "title": cand.title,
        "sourceId": res.check.source_id,
        "sourceItemId": cand.source_item_id,
        "sourceRecord": record_path,
        "requestedUrl": fetch.requested_url,
        "itemUrl": cand.link,
        "canonicalUrl": cand.canonical_url,
        "collectionMethod": res.check.record.source.collection_method,
        "fetchedAt": format_utc(fetch.fetched_at),
        "httpStatus": fetch.status,
        "validationState": "valid-with-warnings" if notes else "valid",
        "validationNotes": notes,
        "observedAt": format_utc(cand.observed_at) if cand.observed_at else None,
        "observedField": cand.observed_field,
        "observationKind": "rss-observation",
        "publishedAt": None,
        "contentHash": cand.content_hash,
        "simhash": f"{cand.simhash:016x}",
        "identityVersion": IDENTITY_VERSION,
        "duplicateCandidateOf": duplicate_candidate_of,
        "analysisState": "pending",
        "tags": ["radar/signal", f"radar/source/{res.check.source_id}"],
    }
    return SignalDocument(signal_id, fm, cand.summary)


ATTEMPT_COLUMNS = (
    "attempt_id",
    "collection_id",
    "source_id",
    "fetched_at",
    "requested_url",
    "final_url",
    "outcome",
    "http_status",
    "conditional",
    "etag",
    "last_modified",
    "validators_changed",
    "body_sha256",
    "bytes",
    "duration_ms",
    "redirects",
    "error_class",
    "error_message",
    "retry_after_s",
)
ATTEMPT_COLUMN_TYPES = (
    *("VARCHAR",) * 3,  # attempt_id, collection_id, source_id
    "TIMESTAMPTZ",  # fetched_at
    *("VARCHAR",) * 3,  # requested_url, final_url, outcome
    "INTEGER",  # http_status
    "BOOLEAN",  # conditional
    *("VARCHAR",) * 2,  # etag, last_modified
    "BOOLEAN",  # validators_changed
    "VARCHAR",  # body_sha256
    "BIGINT",  # bytes
    "DOUBLE",  # duration_ms
    "INTEGER",  # redirects
    *("VARCHAR",) * 2,  # error_class, error_message
    "DOUBLE",  # retry_after_s
)


def validators_changed(
    r: FetchResult, previous_etag: str | None, previous_last_modified: str | None
) -> bool | None:
    """Whether the publisher's validators differ from the stored ones (None: no answer)."""
    if r.outcome not in ("ok", "not-modified"):
        return None
    return (r.etag, r.last_modified) != (previous_etag, previous_last_modified)


def with_uncommitted_fetches(
    con: duckdb.DuckDBPyConnection, states: Mapping[str, FeedState]
) -> dict[str, FeedState]:
    """Feed state as the publishers saw it. A fetch whose collection never committed (the
    command was killed, or its Dagster run never started: core/headstart.py) still happened:
    it counts for `minIntervalSeconds` and a publisher's Retry-After (rate-limited, challenge),
    never for validators or the watermark. Such attempts are the ones the commit never
    completed (`check_outcome` is NULL)."""
    rows = con.execute(
        "SELECT source_id, max(fetched_at), arg_max(error_class, fetched_at), "
        "arg_max(retry_after_s, fetched_at) FROM fetch_attempts "
        "WHERE check_outcome IS NULL GROUP BY source_id"
    ).fetchall()
    out = dict(states)
    for source_id, fetched_at, error_class, retry_after_s in rows:
        state = out.get(source_id) or FeedState(source_id)
        changes: dict[str, Any] = {}
        if state.last_fetch_at is None or fetched_at > state.last_fetch_at:
            changes["last_fetch_at"] = fetched_at
        if error_class in PUBLISHER_WAITS and retry_after_s:
            until = fetched_at + timedelta(seconds=retry_after_s)
            if state.backoff_until is None or until > state.backoff_until:
                changes.update(backoff_until=until, error_state=error_class)
        if changes:
            out[source_id] = replace(state, **changes)
    return out


def _record_attempts(
    con: duckdb.DuckDBPyConnection,
    collection_id: str,
    results: list[FetchResult],
    states: Mapping[str, FeedState],
) -> None:
    """One `fetch_attempts` row per fetch, in one statement."""
    rows = []
    for r in results:
        state = states.get(r.source_id)
        previous = (state.etag, state.last_modified) if state is not None else (None, None)
        rows.append(
            (
                uuid.uuid4().hex,
                collection_id,
                r.source_id,
                r.fetched_at,
                r.requested_url,
                r.final_url,
                r.outcome,
                r.status,
                r.conditional,
                r.etag,
                r.last_modified,
                validators_changed(r, *previous),
                r.body_sha256,
                r.bytes_received,
                r.duration_s * 1000,
                r.redirects,
                r.error_class,
                r.error_message,
                r.retry_after_s,
            )
        )
    insert_rows(con, "fetch_attempts", ATTEMPT_COLUMN_TYPES, rows, columns=ATTEMPT_COLUMNS)


def _commit_source(
    con: duckdb.DuckDBPyConnection,
    spec: CollectionSpec,
    item: DedupedCheck,
    write: SourceWrite,
    state: FeedState | None,
    pending: PendingRows,
) -> None:
    res, check = item.result, item.result.check
    if check.skip_reason is not None or check.record is None:
        return
    now = spec.as_of
    state = state or FeedState(check.source_id)
    if res.failed:
        _commit_failure(con, spec, res, state, pending)
        return
    resolved = {ident: sid for ident, (sid, _) in write.outcomes.items()}
    for dec in item.decisions:
        cand = dec.candidate
        if dec.decision == "new":
            signal_id, _ = write.outcomes[cand.identity]
            flag = resolve_pending(dec.duplicate_candidate_of, now)
            pending.signals.append(_index_row(check.source_id, signal_id, cand, now, flag))
        else:
            signal_id = dec.signal_id or ""
            if signal_id.startswith(PENDING_PREFIX):
                signal_id = resolved.get(signal_id[len(PENDING_PREFIX) :], signal_id)
        if dec.decision == "updated":
            con.execute(
                "INSERT INTO signal_revisions VALUES (?, ?, ?, ?, ?, ?)",
                [
                    signal_id,
                    spec.collection_id,
                    now,
                    cand.content_hash,
                    cand.title,
                    cand.observed_at,
                ],
            )
            con.execute(
                "UPDATE signals SET content_hash = ? WHERE signal_id = ?",
                [cand.content_hash, signal_id],
            )
        outcome = _outcome_name(dec, write)
        pending.observations.append(_observation(spec, check.source_id, cand, outcome, signal_id))
    if res.parsed is not None:
        for rej in res.parsed.rejections:
            con.execute(
                "INSERT INTO item_observations VALUES (?, ?, ?, NULL, ?, NULL, NULL, NULL, ?, "
                "NULL, ?)",
                [
                    spec.collection_id,
                    check.source_id,
                    now,
                    rej.source_item_id,
                    "outside-coverage" if rej.reason == "outside-coverage" else "rejected",
                    f"{rej.reason}: {rej.detail}"[:500],
                ],
            )
    fetch = res.fetch
    assert fetch is not None
    new_state = replace(
        state,
        last_attempt_at=now,
        last_fetch_at=now,
        last_success_at=now,
        last_status=fetch.status,
        error_state=None,
        consecutive_failures=0,
        backoff_until=None,
    )
    if fetch.outcome == "ok" or fetch.unchanged_body:
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
        new_state = replace(new_state, last_unconditional_at=now)
    pending.states.append(new_state)


def _commit_failure(
    con: duckdb.DuckDBPyConnection,
    spec: CollectionSpec,
    res: CheckResult,
    state: FeedState,
    pending: PendingRows,
) -> None:
    now = spec.as_of
    failures = state.consecutive_failures + 1
    retry_after = res.fetch.retry_after_s if res.fetch else None
    rng = random.Random(f"{res.check.source_id}:{failures}:{now.isoformat()}")
    backoff = next_backoff(
        failures, now, error_class=res.error_class, retry_after_s=retry_after, rng=rng
    )
    fetched = res.fetch is not None
    pending.states.append(
        replace(
            state,
            last_attempt_at=now,
            last_fetch_at=now if fetched else state.last_fetch_at,
            last_status=res.fetch.status if res.fetch else state.last_status,
            error_state=res.error_class,
            consecutive_failures=failures,
            backoff_until=backoff,
        ),
    )
    con.execute(
        "INSERT INTO dead_letters (dead_letter_id, collection_id, source_id, stage, error_class, "
        "message, attempt, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?)",
        [
            uuid.uuid4().hex[:12],
            spec.collection_id,
            res.check.source_id,
            res.error_stage or "fetch",
            res.error_class,
            (res.error_message or "")[:1000],
            failures,
            now,
        ],
    )


def _outcome_name(dec: ItemDecision, write: SourceWrite) -> str:
    """created | reused | updated | duplicate (a `new` item is created, or reused if its file
    appeared meanwhile)."""
    if dec.decision == "new":
        return write.outcomes[dec.candidate.identity][1]
    return dec.decision


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


def _index_row(
    source_id: str, signal_id: str, cand: ItemCandidate, now: datetime, candidate_of: str | None
) -> tuple[Any, ...]:
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
    )


def health_fields(spec: CollectionSpec, res: CheckResult) -> dict[str, str | int | None]:
    """The Source file's health and HTTP fields after one check."""
    now = format_utc(spec.as_of)
    fetch = res.fetch
    fields: dict[str, str | int | None] = {"lastAttemptAt": now}
    if res.failed:
        fields["errorState"] = res.error_class
    else:
        fields["lastSuccessAt"] = now
        fields["errorState"] = None
    if fetch is not None and fetch.status is not None:
        fields["httpStatus"] = fetch.status
        fields["lastResponseAt"] = now
        if not res.failed:
            fields["etag"] = fetch.etag
            fields["lastModified"] = fetch.last_modified
    return fields


def build_report(
    plan: CollectionPlan,
    deduped: tuple[DedupedCheck, ...],
    writes: list[SourceWrite],
    states: dict[str, FeedState] | None = None,
) -> dict[str, Any]:
    """The contract's `radar collect --json` object, plus scopes and per-Source extras
    (`states`: the feed state after this collection's commit, for the backoff figures)."""
    after = states or {}
    sources = [
        _source_report(d, w, after.get(d.result.check.source_id))
        for d, w in zip(deduped, writes, strict=True)
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
            for key in COUNT_KEYS:
                counter[key] += src[key]
    spec = plan.spec
    report: dict[str, Any] = {
        "collectionId": spec.collection_id,
        "asOf": format_utc(spec.as_of),
        "mode": spec.mode,
        "downtimeFrom": format_utc(plan.downtime_from) if plan.downtime_from else None,
        "overdue": plan.overdue,
        "due": len(plan.checks),
        "passed": totals["passed"],
        "failed": totals["failed"],
        "skipped": totals["skipped"],
        **{key: totals[key] for key in COUNT_KEYS},
        "scopes": {
            name: {k: c[k] for k in ("passed", "failed", "skipped", *COUNT_KEYS)}
            for name, c in scopes.items()
        },
        "sources": sources,
    }
    return report


def _source_report(
    item: DedupedCheck, write: SourceWrite, state: FeedState | None = None
) -> dict[str, Any]:
    res, check = item.result, item.result.check
    counts = Counter(_outcome_name(d, write) for d in item.decisions)
    rejected = sum(
        1 for r in (res.parsed.rejections if res.parsed else ()) if r.reason != "outside-coverage"
    )
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
        "created": counts["created"],
        "reused": counts["reused"],
        "updated": counts["updated"],
        "duplicates": counts["duplicate"],
        "rejected": rejected,
        "coverageFrom": format_utc(check.coverage_from) if check.coverage_from else None,
        "error": check.skip_reason or res.error_message,
        "errorClass": res.error_class,
        "bytes": fetch.bytes_received if fetch else 0,
        "durationMs": round(fetch.duration_s * 1000, 1) if fetch else 0.0,
        "conditional": fetch.conditional if fetch else None,
        "temporaryBytes": write.temporary_bytes,
        "notes": list(check.notes),
        # Metrics per attempt (also in fetch_attempts): what came back and what it held.
        "errorStage": res.error_stage,
        "bodySha256": fetch.body_sha256 if fetch else None,
        "validatorsChanged": _report_validators_changed(check, fetch),
        "itemsParsed": _items_parsed(res),
        "itemsNew": sum(1 for d in item.decisions if d.decision == "new"),
        "consecutiveFailures": state.consecutive_failures if state else 0,
        "backoffUntil": format_utc(state.backoff_until) if state and state.backoff_until else None,
    }


def _report_validators_changed(check: PlannedCheck, fetch: FetchResult | None) -> bool | None:
    if fetch is None or check.request is None:
        return None
    return validators_changed(fetch, check.request.etag, check.request.last_modified)


def _items_parsed(res: CheckResult) -> int:
    """Every entry of the feed the parser saw: candidates and rejections alike."""
    if res.parsed is None:
        return 0
    return len(res.parsed.candidates) + len(res.parsed.rejections)


def _record_metrics(
    con: duckdb.DuckDBPyConnection, spec: CollectionSpec, sources: list[dict[str, Any]]
) -> None:
    """Complete this collection's attempt rows with what only the commit knows (one statement)."""
    rows = [
        (
            src["id"],
            src["outcome"],
            src["itemsParsed"],
            src["itemsNew"],
            src["duplicates"],
            src["rejected"],
            src["consecutiveFailures"],
            src["backoffUntil"],
        )
        for src in sources
        if src["outcome"] != "skipped"
    ]
    if not rows:
        return
    select, params = unnested(("VARCHAR", "VARCHAR", *("INTEGER",) * 5, "TIMESTAMPTZ"), rows)
    con.execute(
        "UPDATE fetch_attempts SET check_outcome = n.c1, items_parsed = n.c2, items_new = n.c3, "
        "items_duplicate = n.c4, items_rejected = n.c5, consecutive_failures = n.c6, "
        f"backoff_until = n.c7 FROM ({select}) AS n "
        "WHERE fetch_attempts.collection_id = ? AND fetch_attempts.source_id = n.c0",
        [*params, spec.collection_id],
    )


def _record_collection(
    con: duckdb.DuckDBPyConnection, spec: CollectionSpec, report: dict[str, Any]
) -> None:
    con.execute(
        "INSERT INTO collections VALUES (?, ?, ?, ?, ?, now(), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            spec.collection_id,
            spec.dagster_run_id,
            spec.trigger,
            spec.as_of,
            spec.as_of,
            report["downtimeFrom"],
            report["overdue"],
            report["due"],
            report["passed"],
            report["failed"],
            report["skipped"],
            *(report[k] for k in COUNT_KEYS),
            to_json_text(report),
        ],
    )


def last_report(store: Store) -> dict[str, Any] | None:
    """The report of the collection that finished last, if any."""
    return _stored_report(store, "ORDER BY finished_at DESC LIMIT 1", [])


def report_for(store: Store, collection_id: str) -> dict[str, Any] | None:
    """The report recorded for one collection (its id is the Dagster run id)."""
    return _stored_report(store, "WHERE collection_id = ?", [collection_id])


def _stored_report(store: Store, clause: str, params: list[Any]) -> dict[str, Any] | None:
    with store.transaction() as con:
        row = con.execute(f"SELECT report_json FROM collections {clause}", params).fetchone()
    return json.loads(row[0]) if row and row[0] else None
