"""The Signal files of one collection: their documents, written on threads, each with its facts.

A batch is written in three steps (core/files.py): every new file's temp file, then all of them
made durable at once (`BatchSync`: one `syncfs` for GROUP_SYNC_MIN or more, where that is as
strong as an fsync each; else each temp file is fsynced as it is written), then each linked to
its name. So a name appears only once its content is durable, and the Signals folder is
fsynced once after the batch, before the commit records any of it (docs/architecture.md,
invariants 4 and 5).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path, PurePosixPath

from radar_pipeline.core.collect.results import CheckResult
from radar_pipeline.core.contract.notes import SIGNAL_SCHEMA_VERSION, ObservationKind, SignalNote
from radar_pipeline.core.contract.outcomes import ItemOutcome
from radar_pipeline.core.files import BatchSync, link_staged, stage_once
from radar_pipeline.core.identity.keys import IDENTITY_VERSION
from radar_pipeline.core.layout import SIGNALS_DIR
from radar_pipeline.core.models import ItemCandidate
from radar_pipeline.core.text import wikilink
from radar_pipeline.core.vault.facts import FactsKey, SignalFile, facts_key, facts_of_written
from radar_pipeline.core.vault.signals import (
    CreateOutcome,
    SignalDocument,
    signal_path,
    sync_signals_dir,
)
from radar_pipeline.core.vault.temporary import write_temporary_text

WRITE_THREADS = 8
# From this many new files a batch is made durable by one file-system sync rather than an fsync
# each (below it the difference is a few milliseconds, and a sync also waits for whatever else
# the file system holds unwritten).
GROUP_SYNC_MIN = 32


@dataclass(frozen=True)
class SignalWrite:
    """One new item's file: its document and, where policy allows, its full text."""

    identity: str
    document: SignalDocument
    temporary: tuple[str, str] | None = None  # (title, full text) for Temporary Content


@dataclass(frozen=True)
class WrittenSignal:
    """What writing one item did: `created`, or `reused` when its file was already there."""

    identity: str
    signal_id: str
    outcome: CreateOutcome
    facts: tuple[str, FactsKey, SignalFile] | None = None  # of a created file, for the audits
    temporary_bytes: int = 0


def write_signals(
    vault: Path,
    batches: Sequence[Sequence[SignalWrite]],
    render: Callable[[Sequence[SignalDocument]], Sequence[Callable[[], str]]] | None = None,
    group_min: int = GROUP_SYNC_MIN,
) -> list[list[WrittenSignal]]:
    """Create every batch's files (one batch per Source; no two batches share a file), then
    fsync the Signals folder once: all are durable when this returns.

    `render` turns the documents into calls returning their texts (the collection's workers
    render them on other cores, `ParseWorkers.render_all`); by default each is rendered by the
    thread writing it. `group_min`: from how many new files they are made durable together
    (the module doc)."""
    items = [item for batch in batches for item in batch]
    documents = [item.document for item in items]
    texts = render(documents) if render is not None else [d.render for d in documents]
    folder = vault / SIGNALS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        group = BatchSync.open(folder, group_min) if len(items) >= group_min else None
        if group is not None:
            stack.enter_context(group)
        futures: list[Future[_Staged]] = []
        try:
            with ThreadPoolExecutor(WRITE_THREADS, thread_name_prefix="radar-write") as tp:
                futures = [
                    tp.submit(_stage_one, vault, item, text_of, group is None)
                    for item, text_of in zip(items, texts, strict=True)
                ]
                wait(futures)  # every temp file is written before a failure is raised
                staged = [f.result() for f in futures]
                if group is not None:
                    group.sync([s.temp for s in staged if s.temp is not None])
                written = iter(list(tp.map(lambda s: _link_one(vault, s), staged)))
        except BaseException:
            # A batch that failed part way, or was interrupted, leaves no temp file behind
            # (the pool has finished every task by now; a linked temp is already gone).
            _remove_temps(futures)
            raise
    # Also when every file was already there: a writer that died (a killed collection) may
    # have linked them without its folder fsync, and the caller is about to record them.
    if items:
        sync_signals_dir(vault)
    return [[next(written) for _ in batch] for batch in batches]


@dataclass(frozen=True)
class _Staged:
    """One new item between the steps: its text, its target and its temp file (None when the
    target was already there: the item is `reused`)."""

    item: SignalWrite
    text: str
    target: Path
    temp: Path | None


def _stage_one(
    vault: Path, item: SignalWrite, text_of: Callable[[], str], durable: bool
) -> _Staged:
    text = text_of()
    target = signal_path(vault, item.document.signal_id)
    return _Staged(item, text, target, stage_once(target, text.encode("utf-8"), durable=durable))


def _remove_temps(futures: list[Future[_Staged]]) -> None:
    for future in futures:
        if future.done() and not future.cancelled() and future.exception() is None:
            temp = future.result().temp
            if temp is not None:
                with contextlib.suppress(OSError):
                    temp.unlink(missing_ok=True)


def _link_one(vault: Path, staged: _Staged) -> WrittenSignal:
    item, doc = staged.item, staged.item.document
    if staged.temp is None or not link_staged(staged.temp, staged.target):
        return WrittenSignal(item.identity, doc.signal_id, ItemOutcome.REUSED)
    # What the evidence checks will need of this file, from the bytes just written (they then
    # skip reading it back).
    name = staged.target.name
    info = os.stat(staged.target)
    facts = (name, facts_key(info), facts_of_written(name, doc.fields(), staged.text))
    written = write_temporary_text(vault, doc.signal_id, *item.temporary) if item.temporary else 0
    return WrittenSignal(item.identity, doc.signal_id, ItemOutcome.CREATED, facts, written)


# What kind of reading produced an item's observedAt (docs/architecture.md, invariant 9): a feed
# (RSS, Atom, JSON Feed, a feed fixture), a page's selectors, or a JSON answer's paths.
OBSERVATION_KINDS: dict[str, ObservationKind] = {
    "html": "html-observation",
    "json": "json-observation",
}


def observation_kind(collection_method: str) -> ObservationKind:
    """`rss-observation` for feeds, `html-observation`, `json-observation`."""
    return OBSERVATION_KINDS.get(collection_method, "rss-observation")


def build_document(
    signal_id: str,
    cand: ItemCandidate,
    res: CheckResult,
    record_path: str,
    duplicate_candidate_of: str | None,
) -> SignalDocument:
    """The Signal's frontmatter: identity, provenance, observation, review flags, and what makes
    it an Obsidian note (docs/obsidian.md), built through `SignalNote` (core/contract/notes.py,
    the one definition of its keys): `source` and `duplicateCandidateOf` as links,
    `aliases` holding the title, `collectedOn`/`observedOn` as date properties (UTC days; the
    exact `fetchedAt`/`observedAt` strings stay)."""
    fetch = res.fetch
    assert fetch is not None and res.plan.record is not None
    notes = []
    if cand.future_dated:
        notes.append("future-dated")
    if res.parsed is not None and res.parsed.bozo:
        notes.append("feed-ill-formed")
    observed = cand.observed_at
    note = SignalNote(
        entity_type="signal",
        schema_version=SIGNAL_SCHEMA_VERSION,
        id=signal_id,
        title=cand.title,
        aliases=(cand.title,) if cand.title else (),
        source=wikilink(PurePosixPath(record_path).stem),
        source_id=res.plan.source_id,
        source_item_id=cand.source_item_id,
        source_record=record_path,
        requested_url=fetch.requested_url,
        item_url=cand.link,
        canonical_url=cand.canonical_url,
        collection_method=res.plan.record.source.collection_method,
        fetched_at=fetch.fetched_at,
        collected_on=fetch.fetched_at.astimezone(UTC).date(),
        http_status=fetch.status,
        validation_state="valid-with-warnings" if notes else "valid",
        validation_notes=tuple(notes),
        observed_at=observed,
        observed_on=observed.astimezone(UTC).date() if observed else None,
        observed_field=cand.observed_field,
        observation_kind=observation_kind(res.plan.record.source.collection_method),
        published_at=None,
        content_hash=cand.content_hash,
        simhash=f"{cand.simhash:016x}",
        identity_version=IDENTITY_VERSION,
        duplicate_candidate_of=wikilink(duplicate_candidate_of) if duplicate_candidate_of else None,
        analysis_state="pending",
        tags=("radar/signal", f"radar/source/{res.plan.source_id}"),
    )
    return SignalDocument.of(note, cand.summary)
