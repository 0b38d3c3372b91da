"""The path of one collection, stage by stage: plan -> fetch -> parse -> dedupe -> commit ->
pages (page extraction for the Sources whose policy allows it, before their locks go).

Each stage is a method; a Dagster run's slice step calls them in turn for its slice of Sources
(core/collect/slices.py; whoever launched the run: the CLI, the schedule, a backfill, the UI).
A Collector belongs to one collection, or to the slices of one
step of it, checked in turn: it holds their Source locks and parse workers, and `close`
releases both (it is a context manager), before the step that opened it ends.

The rules each stage keeps are in docs/architecture.md; the numbers below cite its invariants.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import replace

from radar_pipeline.core.acquire.fetch import Fetcher, FetchSettings, fetch_many
from radar_pipeline.core.collect import page_stage
from radar_pipeline.core.collect.accounting import CheckAccount, account, accounting_row
from radar_pipeline.core.collect.commit import (
    PendingRows,
    SourceWrite,
    commit_source,
    health_fields,
)
from radar_pipeline.core.collect.decisions import by_identity, decide_checks
from radar_pipeline.core.collect.filtering import filter_for
from radar_pipeline.core.collect.report import build_report
from radar_pipeline.core.collect.results import CheckResult, DedupedCheck, FetchedChecks
from radar_pipeline.core.collect.run_failure import (
    RunFailure,
    record_run_failure,
    replay_run_failures,
    run_failure_of,
)
from radar_pipeline.core.collect.signal_files import SignalWrite, build_document, write_signals
from radar_pipeline.core.collect.workers import (
    MIN_PARALLEL_BODIES,
    ParseJob,
    ParseOutcome,
    ParseWorkers,
    default_worker_count,
)
from radar_pipeline.core.config import Settings
from radar_pipeline.core.contract.collection import CollectionReport
from radar_pipeline.core.contract.outcomes import Decision, ItemOutcome
from radar_pipeline.core.errors import Explanation, explain
from radar_pipeline.core.extract.pages import PageSettings
from radar_pipeline.core.identity.dedupe import resolve_pending
from radar_pipeline.core.identity.keys import make_signal_id
from radar_pipeline.core.models import FetchRequest, FetchResult
from radar_pipeline.core.plan.collection import (
    CollectionFigures,
    CollectionPlan,
    CollectionSpec,
    SourcePlan,
    plan_collection,
)
from radar_pipeline.core.plan.locks import LockBook
from radar_pipeline.core.plan.schedule import window_from
from radar_pipeline.core.registry.sources import RegistrySnapshot, load_registry
from radar_pipeline.core.store.accounting import previous_checks, record_accounts
from radar_pipeline.core.store.collections import merge_collection, record_metrics
from radar_pipeline.core.store.connection import Connection, Store
from radar_pipeline.core.store.feed_state import FeedState, load_states
from radar_pipeline.core.store.fetch_attempts import (
    planning_state,
    planning_state_in,
    record_fetches,
)
from radar_pipeline.core.vault import index
from radar_pipeline.core.vault.folder_state import (
    dir_mtime_ns,
    folder_of,
    holds_no_temp_files,
    journal_created,
    judge,
    list_names,
)
from radar_pipeline.core.vault.health import HealthUpdate, write_health
from radar_pipeline.core.vault.signals import SIGNAL_ID_RE, remove_stale_temp_files

log = logging.getLogger(__name__)

# Requests in flight at once. A check mostly waits on the publisher (~100 ms a response), so
# 32 threads finish 200 conditional checks in ~7 round trips; the client caps connections.
FETCH_THREADS = 32
# The class of a body whose parser crashed: the format the Source's method could not read.
UNREADABLE_BODY = {"html": "not-html", "json": "not-json", "jsonfeed": "not-a-feed"}


class Collector:
    """One collection over one vault and one DuckDB file."""

    def __init__(
        self,
        settings: Settings,
        store: Store | None = None,
        fetch_settings: FetchSettings | None = None,
        fetch_threads: int = FETCH_THREADS,
        parse_workers: int | None = None,
        page_settings: PageSettings | None = None,
    ) -> None:
        """The collection `settings` describe (vault, store, fetch limits, parse workers,
        tokens); the arguments after them replace what the settings say."""
        self.settings = settings
        self.paths = paths = settings.paths
        self.store = store or Store.of(paths)
        self.fetch_settings = fetch_settings or FetchSettings.of(settings)
        self.page_settings = page_settings or PageSettings()
        self.fetch_threads = fetch_threads
        self.locks = LockBook(paths.locks_dir, self.store.source_locks())
        configured = settings.parse_workers if parse_workers is None else parse_workers
        self.workers = ParseWorkers(default_worker_count(configured))
        # This collection's plan, once made: whom a failure of a later stage concerns.
        self.planned: CollectionPlan | None = None

    def __enter__(self) -> Collector:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release every Source lock still held and join the parse workers."""
        try:
            self.locks.release_all()
        finally:
            self.workers.close()

    # ---- stages ----------------------------------------------------------------------------

    def plan(
        self,
        spec: CollectionSpec,
        snapshot: RegistrySnapshot | None = None,
        figures: CollectionFigures | None = None,
    ) -> CollectionPlan:
        """Every selected Source's check: gates, cadence, backoff, validators, its lock. First
        records what an earlier collection that failed as a whole could not (run_failure.py).
        A slice gives its Sources' records (`snapshot`) and its collection's `figures`."""
        # A Collector may check several slices in turn: until this plan is made, a failure
        # concerns the Sources `spec` names, not the previous slice's.
        self.planned = None
        self.workers.renew_if_broken()
        replay_run_failures(self.store, self.paths)
        with self._failing_whole(spec):
            self.planned = self._plan(spec, snapshot, figures)
        return self.planned

    def _plan(
        self,
        spec: CollectionSpec,
        snapshot: RegistrySnapshot | None,
        figures: CollectionFigures | None,
    ) -> CollectionPlan:
        folder = folder_of(self.paths.vault)
        # A slice plans on its own Sources' states (the Sources of `snapshot`); its figures
        # are the collection's, from the outline, not read again on its own Sources.
        ids = None if snapshot is None else {r.source.id for r in snapshot.sources}
        if snapshot is None:
            snapshot = load_registry(self.paths.vault)

        tokens = self.settings.tokens

        def plan_on_store(con: Connection) -> tuple[bool, CollectionPlan, bool]:
            # One transaction (opening the store costs ~45 ms of CPU): whether the Signals
            # folder may hold a writer's temp files, the states to plan on, and the plan, which
            # takes the locks of the Sources it checks.
            clean, (states, last) = holds_no_temp_files(con, folder), planning_state_in(con, ids)
            plan = plan_collection(spec, snapshot, states, last, self.locks, tokens, figures)
            # Another process may have committed a check of the same Source between this
            # read and our lock, and its fetch time (minIntervalSeconds) and validators must
            # count. On the DuckDB file it cannot: this transaction held the file through the
            # read and the locks.
            settled = self.store.excludes_other_writers or not any(
                c.request is not None for c in plan.source_plans
            )
            return clean, plan, settled

        clean, first, settled = self.store.atomically(plan_on_store)
        removed = remove_stale_temp_files(self.paths.vault, skip_signals=clean)
        if removed:
            log.info("removed %d temp files a killed collection left behind", removed)
        if settled:
            return first
        # The locks are held now: plan again on the state as it is under them.
        states, last = planning_state(self.store, ids)
        return plan_collection(spec, snapshot, states, last, self.locks, tokens, figures)

    def fetch(self, plan: CollectionPlan) -> FetchedChecks:
        """Fetch every planned request concurrently; record each attempt in DuckDB. With
        enough bodies ahead, each body starts parsing on the workers as it arrives; what the
        parse stage needs, results and started parses, is the returned value."""
        with self._failing_whole():
            wanted = [
                c.request for c in plan.source_plans if c.request is not None and c.failure is None
            ]
            early = len(wanted) >= MIN_PARALLEL_BODIES
            # The workers boot while we wait on publishers, when enough bodies are to come: a
            # request without validators brings one. A conditional request of an unchanged feed
            # brings a 304, so an unchanged re-run starts no worker (each is a spawned Python
            # process, about half a second of CPU to boot); the workers start once enough
            # bodies did arrive instead.
            if sum(1 for r in wanted if _expects_body(r)) >= MIN_PARALLEL_BODIES:
                self.workers.warm_up()
            planned_by_source = {c.source_id: c for c in plan.source_plans}
            parsing: dict[str, Future[ParseOutcome]] = {}
            bodies = itertools.count(1)  # next() is atomic under the GIL: fetch threads share it

            def start_parse(result: FetchResult) -> None:
                # Each body goes to the workers as it arrives: parsing overlaps the fetches still
                # in flight (the parse stage awaits it; nothing is decided or written before).
                # Runs in the fetch threads; each writes its own Source's key.
                planned = planned_by_source.get(result.source_id)
                if planned is not None and _has_body(planned, result):
                    if next(bodies) >= MIN_PARALLEL_BODIES:
                        self.workers.warm_up()
                    future = self.workers.submit(_parse_job(planned, result, plan))
                    if future is not None:
                        parsing[result.source_id] = future

            with Fetcher(self.fetch_settings, self.paths.vault) as fetcher:
                results = fetch_many(
                    fetcher,
                    wanted,
                    plan.spec.as_of,
                    self.fetch_threads,
                    on_result=start_parse if early else None,
                )
            # A request its origin deferred (Retry-After, core/acquire/pacing) was not sent: no
            # attempt to record; its check is reported skipped with the reason.
            sent = [r for r in results if r.outcome != "skipped"]
            record_fetches(self.store, plan.spec.collection_id, sent)
            by_source = {r.source_id: r for r in results}
            return FetchedChecks(
                tuple(by_source.get(c.source_id) for c in plan.source_plans), parsing
            )

    def parse(self, plan: CollectionPlan, fetched: FetchedChecks) -> tuple[CheckResult, ...]:
        """Parse every fetched body (on the parse workers, awaiting those the fetch stage
        started); failures become classified CheckResults, never a silent drop."""
        with self._failing_whole():
            pairs = list(zip(plan.source_plans, fetched.results, strict=True))
            jobs: list[ParseJob] = []
            started: dict[int, Future[ParseOutcome]] = {}
            for c, r in pairs:
                if not _has_body(c, r):
                    continue
                early = fetched.parsing.get(c.source_id)
                if early is not None:
                    started[len(jobs)] = early
                jobs.append(_parse_job(c, r, plan))
            outcomes = iter(self.workers.parse_all(jobs, started))
            return tuple(
                _check_result(c, _body_parsed(r), next(outcomes) if _has_body(c, r) else None)
                for c, r in pairs
            )

    def dedupe(self, results: tuple[CheckResult, ...]) -> tuple[DedupedCheck, ...]:
        """Repair the index from the vault (invariant 5), then classify every candidate.

        The Signals folder is listed only when it changed since its recorded state
        (vault/folder_state.py): while it is as recorded, its files are the names the stored
        facts hold, and the unindexed ones and the candidates' files are set queries."""

        def decide(con: Connection) -> tuple[DedupedCheck, ...]:
            judgement = judge(con, folder_of(self.paths.vault))
            # How the folder was found (folder_state.Verdict): the fast path or a listing.
            log.info(
                "dedupe: Signals folder %s",
                judgement.verdict,
                extra={"radar_folder_scan": judgement.verdict},
            )
            if judgement.unchanged:
                repair = index.reconcile_known(con, self.paths.vault)
                wanted = sorted(
                    {c.identity for r in results if r.parsed for c in r.parsed.candidates}
                )
                on_disk = index.files_of_identities(con, wanted)
            else:
                listing = judgement.listing or list_names(folder_of(self.paths.vault))
                ids = {n[:-3] for n in listing.names} if listing else set()
                ids = {i for i in ids if SIGNAL_ID_RE.fullmatch(i)}
                repair = index.reconcile(con, self.paths.vault, ids)
                # Every item inside the cap is looked at again, so a Signal file the index
                # cannot hold (unreadable) must still count as known: its name carries the
                # identity.
                on_disk = by_identity(ids)
            if repair.indexed:
                log.info("index: %d Signal files had no index row; indexed", repair.indexed)
            return decide_checks(con, results, on_disk)

        with self._failing_whole():
            return self.store.atomically(decide)

    def commit(
        self, plan: CollectionPlan, deduped: tuple[DedupedCheck, ...], pages: bool = True
    ) -> CollectionReport:
        """Write the new Signals, then record everything in one transaction, mirror each
        Source's health into its file, run the page stage (unless `pages` is False: a slice
        of a run whose own step extracts the pages, core/collect/slices.py) and release the
        Source locks; the report of these checks.

        The collection's row in the store gets these checks' report; a slice's commit adds it
        as a part of the report the run's earlier slices recorded
        (store/collections.merge_collection)."""
        spec = plan.spec
        try:
            # Recorded while the Source locks are still held: no other check of them overlaps.
            with self._failing_whole():
                batches = [self._signal_writes(spec, d) for d in deduped]
                folder = folder_of(self.paths.vault)
                before = dir_mtime_ns(folder) if any(batches) else None
                written = write_signals(self.paths.vault, batches, self.workers.render_all)
                writes = [SourceWrite.of(w) for w in written]
                created = [
                    f"{s.signal_id}.md"
                    for batch in written
                    for s in batch
                    if s.outcome == ItemOutcome.CREATED
                ]
                ids = {c.source_id for c in plan.source_plans}

                def record(con: Connection) -> tuple[CollectionReport, dict[str, FeedState]]:
                    # Our own new files, journaled with their index rows (folder_state.py).
                    journal_created(con, before, created, folder)
                    # This commit's Sources' states (a slice's, not the registry's).
                    states, pending = load_states(con, ids), PendingRows()
                    accounts = self._accounts(con, spec.collection_id, deduped, writes)
                    for item, write in zip(deduped, writes, strict=True):
                        state = states.get(item.result.plan.source_id)
                        commit_source(con, spec, item, write, state, pending)
                    pending.flush(con)
                    page_stage.enqueue_new_pages(con, spec, deduped, writes)
                    report = build_report(plan, deduped, writes, load_states(con, ids), accounts)
                    record_accounts(
                        con,
                        [
                            accounting_row(spec, d, a, src.outcome)
                            for d, a, src in zip(deduped, accounts, report.sources, strict=True)
                            if src.outcome != "skipped"
                        ],
                    )
                    record_metrics(con, spec.collection_id, report.sources)
                    merge_collection(con, spec.dagster_run_id, spec.trigger, spec.as_of, report)
                    return report, states

                report, states = self.store.atomically(record)
                self._mirror_health(spec, deduped, states, report)
                if not pages:
                    return report
                try:
                    return self.pages(plan, deduped, report)
                except Exception:  # committed already: the pages stay pending for the next check
                    log.exception("page stage failed after the commit; its pages stay pending")
                    return report
        finally:
            self.locks.release_all(spec.collection_id)

    def pages(
        self, plan: CollectionPlan, deduped: tuple[DedupedCheck, ...], report: CollectionReport
    ) -> CollectionReport:
        """Page extraction for the checked `fullText: page-extraction` Sources, while their
        locks are still held (so no other check of them overlaps); the report with each
        Source's `pages` figures, as recorded in DuckDB."""
        return page_stage.run_pages(
            self.store,
            self.paths.vault,
            self.fetch_settings,
            self.page_settings,
            plan.spec,
            page_stage.page_sources(deduped),
            report,
        )

    # ---- helpers ---------------------------------------------------------------------------

    @contextmanager
    def _failing_whole(self, spec: CollectionSpec | None = None) -> Iterator[None]:
        """A stage that fails as a whole (a full disk, a store it cannot read) has the failure
        recorded on each Source the collection was checking, then re-raised (run_failure.py).
        While planning, those are the Sources `spec` names, as the registry reads them."""
        try:
            yield
        except Exception as exc:
            failure = self._run_failure(explain(exc), spec)
            if failure is not None:
                record_run_failure(self.store, self.paths, failure)
            raise

    def _run_failure(self, why: Explanation, spec: CollectionSpec | None) -> RunFailure | None:
        if self.planned is not None:
            checked = [
                c.record
                for c in self.planned.source_plans
                if c.record is not None and c.skip_reason is None
            ]
            return run_failure_of(self.planned.spec, checked, why, self.store)
        if spec is None or not spec.source_ids:
            return None
        try:
            snapshot = load_registry(self.paths.vault)
        except Exception:  # the vault itself is what failed: nothing to name the Sources by
            log.warning("run failure of %s: the registry cannot be read", spec.collection_id)
            return None
        wanted = set(spec.source_ids)
        named = [r for r in snapshot.sources if r.source.id in wanted]
        return run_failure_of(spec, named, why, self.store, snapshot)

    @staticmethod
    def _accounts(
        con: Connection,
        collection_id: str,
        deduped: tuple[DedupedCheck, ...],
        writes: list[SourceWrite],
    ) -> list[CheckAccount]:
        """Each check's outcome counts and gap flag (against its Source's previous check)."""
        parsed = [d.result.plan.source_id for d in deduped if d.result.parsed is not None]
        previous = previous_checks(con, parsed, collection_id)
        return [
            account(d, w, previous.get(d.result.plan.source_id))
            for d, w in zip(deduped, writes, strict=True)
        ]

    def _signal_writes(self, spec: CollectionSpec, item: DedupedCheck) -> list[SignalWrite]:
        """The Signal files one Source's new items need (none when the check failed)."""
        res = item.result
        if res.failed or res.plan.record is None or res.fetch is None:
            return []
        rec = res.plan.record
        keep_text = rec.source.full_text == "feed-content"
        writes: list[SignalWrite] = []
        for dec in item.decisions:
            if dec.decision != Decision.NEW:
                continue
            cand = dec.candidate
            signal_id = make_signal_id(spec.as_of, cand.identity)
            flag = resolve_pending(dec.duplicate_candidate_of, spec.as_of)
            doc = build_document(signal_id, cand, res, rec.record_path, flag)
            temporary = (cand.title, cand.content) if keep_text and cand.content else None
            writes.append(SignalWrite(cand.identity, doc, temporary))
        return writes

    def _mirror_health(
        self,
        spec: CollectionSpec,
        deduped: tuple[DedupedCheck, ...],
        before: dict[str, FeedState],
        report: CollectionReport,
    ) -> None:
        """DuckDB holds the full history; a file mirror that fails is retried next check.
        `before`: the feed states before the commit (no health time moves back); `report`:
        the commit's report, whose next attempt each note names."""
        next_at = {s.id: s.next_attempt_at for s in report.sources}
        updates = [
            HealthUpdate(
                rec.source.id,
                rec.path,
                rec.record_path,
                health_fields(
                    spec, d.result, before.get(rec.source.id), next_at.get(rec.source.id)
                ),
            )
            for d in deduped
            if (rec := d.result.plan.record) is not None and d.result.plan.skip_reason is None
        ]
        for failure in write_health(updates):
            log.warning(
                "health of %s not written to %s: %s",
                failure.source_id,
                failure.record_path,
                failure.error,
            )


def _expects_body(request: FetchRequest) -> bool:
    """Whether a request is expected to bring a body: it sends no validator (a first fetch, a
    host that gives none, the daily unconditional fetch)."""
    return not request.conditional or (request.etag is None and request.last_modified is None)


def _has_body(planned: SourcePlan, result: FetchResult | None) -> bool:
    """Whether the check goes on to parsing (a 304 or a failure ends it before)."""
    return (
        planned.failure is None
        and result is not None
        and result.outcome == "ok"
        and result.body is not None
    )


def _body_parsed(result: FetchResult | None) -> FetchResult | None:
    """The fetch without its body once the body is parsed: nothing after the parse stage
    reads it (the parse is the body's one reader; its hash and size stay), so a slice does not
    hold its Sources' bodies through the dedupe and the commit."""
    if result is None or result.body is None:
        return result
    return replace(result, body=None)


def _parse_job(planned: SourcePlan, result: FetchResult | None, plan: CollectionPlan) -> ParseJob:
    assert result is not None and result.body is not None and planned.record is not None
    source = planned.record.source
    return ParseJob(
        planned.source_id,
        result.body,
        result.final_url,
        result.content_type,
        plan.spec.as_of,
        window_from(plan.spec.as_of),
        method=source.collection_method,
        spec=source.extraction_spec,
    )


def _check_result(
    planned: SourcePlan, result: FetchResult | None, outcome: ParseOutcome | None
) -> CheckResult:
    """One check after fetch and parse, its failure classified by stage (invariant 7)."""
    if planned.failure is not None:
        return CheckResult(planned, result, None, "plan", planned.failure[0], planned.failure[1])
    if result is None:
        return CheckResult(planned)
    if result.outcome == "skipped":  # deferred by its origin's Retry-After; checked next time
        return CheckResult(replace(planned, skip_reason=result.error_message or "deferred"))
    if result.outcome == "failed":
        error_class = result.error_class or "network"
        message = result.error_message or "fetch failed"
        return CheckResult(planned, result, None, "fetch", error_class, message)
    if outcome is None:
        return CheckResult(planned, result)
    if outcome.crashed:  # a parser bug must fail one Source, never the collection
        log.error(
            "parse of %s crashed: %s: %s", planned.source_id, outcome.error_class, outcome.message
        )
        message = f"parse: unexpected {outcome.error_class}: {outcome.message}"[:300]
        method = planned.record.source.collection_method if planned.record else "rss"
        error_class = UNREADABLE_BODY.get(method, "invalid-xml")
        return CheckResult(planned, result, None, "parse", error_class, message)
    if outcome.error_class is not None:
        message = f"parse: {outcome.error_class}: {outcome.message}"
        return CheckResult(planned, result, None, "parse", outcome.error_class, message)
    return CheckResult(planned, result, filter_for(planned.record, outcome.parsed))
