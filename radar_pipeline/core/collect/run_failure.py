"""A collection that fails as a whole (a full or read-only disk, a store that cannot be read or
written), recorded on each Source it was checking: the attempt and the failure's class in the
Source's feed state and health keys, the line a person reads in a dead letter.

Backoff and failure count stay as they were (the publisher did nothing wrong), so the Source is
due as before; but a run of the collection schedule that failed so still covered its slot, and
the schedule asks for it again only when its next slot starts. Each Source file's
`nextAttemptAt` names that time (core/plan/collection.py, `next_attempts_of`: the rule behind
every check's), read on the store's feed states; a failure of the store itself leaves the key
as it was (the schedule cannot read the store either until it is repaired).

The failure is recorded where it can be: the store (feed state and dead letter, one
transaction) and each Source file (its health keys). Whatever could not be written is kept as
a journal (`.radar/run-failures/<collection>.json`, in the vault or else beside the DuckDB
file) that the next collection records first, before it plans anything. Only a machine on
which neither place can be written loses the record (the Dagster run keeps the line).

A failure while planning (a read-only vault refusing the Source locks) is recorded on the
Sources the collection was asked to check, as the registry names them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path

from radar_pipeline.core import files
from radar_pipeline.core.clock import format_utc, parse_utc
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.errors import Explanation
from radar_pipeline.core.plan.collection import CollectionSpec, next_attempts_of, placement_of
from radar_pipeline.core.registry.sources import RegistrySnapshot, SourceRecord
from radar_pipeline.core.store.connection import Connection, Store
from radar_pipeline.core.store.dead_letters import insert_run_failures
from radar_pipeline.core.store.feed_state import FeedState, load_states, save_states
from radar_pipeline.core.vault.health import NEXT_ATTEMPT_KEY, HealthUpdate, write_health

log = logging.getLogger(__name__)

JOURNAL_DIR = Path(".radar") / "run-failures"
# explain()'s classes of a store that must not be written while the failure is recorded.
STORE_UNUSABLE = frozenset({"store-unreadable", "store-locked"})


@dataclass(frozen=True)
class RunFailure:
    """One collection's failure as a whole, and the Sources it was checking."""

    collection_id: str
    as_of: str  # the collection's clock, UTC
    error_class: str  # explain()'s class: disk-full, read-only, store-unreadable, ...
    line: str  # explain()'s line: the root cause and what to do
    sources: tuple[tuple[str, str, str], ...]  # (Source id, file path, vault path)
    # Source id -> when the schedule next tries it (ISO-8601 UTC; "" for a `manual` Source:
    # when run by hand), its `nextAttemptAt`; a Source absent keeps the key it has.
    next_attempts: dict[str, str] = field(default_factory=dict)


def run_failure_of(
    spec: CollectionSpec,
    records: Sequence[SourceRecord],
    why: Explanation,
    store: Store,
    snapshot: RegistrySnapshot | None = None,
) -> RunFailure:
    """The failure of `spec`'s collection, for each Source of `records` it was checking, with
    when the schedule next tries each (read on `store`'s feed states, on the due grids of
    `spec`, else placed on `snapshot`, the registry). Without a readable store, none."""
    checked = tuple((r.source.id, str(r.path), r.record_path) for r in records)
    states = _readable_states(store, why)
    attempts: dict[str, str] = {}
    if states is not None:
        placement = placement_of(spec, snapshot or RegistrySnapshot(tuple(records), ()))
        for sid, attempt in next_attempts_of(records, states, spec, placement).items():
            attempts[sid] = format_utc(attempt.at) if attempt.at else ""
    return RunFailure(
        spec.collection_id, format_utc(spec.as_of), why.error_class, why.line, checked, attempts
    )


def _readable_states(store: Store, why: Explanation) -> dict[str, FeedState] | None:
    """The store's feed states, or None when the store is what failed (not read again: a held
    one would cost another wait) or cannot be read now."""
    if why.error_class in STORE_UNUSABLE:
        return None
    try:
        return store.atomically(load_states)
    except Exception as exc:  # the store failed too: the keys stay as they are
        log.info("feed states unreadable after a run failure: %s", exc)
        return None


def record_run_failure(store: Store, paths: RadarPaths, failure: RunFailure) -> bool:
    """Record `failure` in the store and each Source file; what cannot be written goes to a
    journal for the next collection. True when both were written."""
    # A store that cannot be read, or that another process holds, is not touched again: the
    # file stays as it is for `radar index rebuild`, and a held one would cost another wait.
    in_store = failure.error_class not in STORE_UNUSABLE and _record_in_store(store, failure)
    recorded = _record_in_files(failure) and in_store
    if not recorded:
        _journal(paths, failure)
    return recorded


def replay_run_failures(store: Store, paths: RadarPaths) -> int:
    """Record every journaled run failure, then remove its journal; returns how many. A
    journal that still cannot be recorded stays for the next collection."""
    done = 0
    for journal in _journals(paths):
        try:
            raw = json.loads(journal.read_text(encoding="utf-8"))
            failure = RunFailure(**{**raw, "sources": tuple(tuple(s) for s in raw["sources"])})
        except (OSError, ValueError, TypeError, KeyError) as exc:
            log.warning("run-failure journal %s unreadable, left in place: %s", journal, exc)
            continue
        if _record_in_store(store, failure) and _record_in_files(failure):
            journal.unlink(missing_ok=True)
            done += 1
    if done:
        log.info("recorded %d run failures a previous collection could not record", done)
    return done


def _record_in_store(store: Store, failure: RunFailure) -> bool:
    """The attempt and class in each Source's feed state (never moved back in time; backoff
    and the failure count untouched: the publisher did nothing wrong) and a dead letter."""
    at = parse_utc(failure.as_of)
    ids = [source_id for source_id, _, _ in failure.sources]

    def record(con: Connection) -> None:
        states = load_states(con)
        save_states(con, [_failed(states.get(i) or FeedState(i), at, failure) for i in ids])
        insert_run_failures(con, failure.collection_id, ids, failure.line, at, failure.error_class)

    try:
        store.atomically(record)
    except Exception as exc:  # the store is what failed, most likely: the journal keeps it
        log.info("run failure %s not recorded in the store: %s", failure.collection_id, exc)
        return False
    return True


def _failed(state: FeedState, at: datetime, failure: RunFailure) -> FeedState:
    if state.last_attempt_at is not None and state.last_attempt_at > at:
        return replace(state, error_state=failure.error_class)
    return replace(state, last_attempt_at=at, error_state=failure.error_class)


def _record_in_files(failure: RunFailure) -> bool:
    updates = [
        HealthUpdate(i, Path(p), rp, _health_fields(failure, i)) for i, p, rp in failure.sources
    ]
    missed = write_health(updates)
    for miss in missed:  # the journal keeps it; the run's own line says why
        log.info("run failure not written to %s: %s", miss.record_path, miss.error)
    return not missed


def _health_fields(failure: RunFailure, source_id: str) -> dict[str, str | int | None]:
    fields: dict[str, str | int | None] = {
        "lastAttemptAt": failure.as_of,
        "errorState": failure.error_class,
    }
    if source_id in failure.next_attempts:
        fields[NEXT_ATTEMPT_KEY] = failure.next_attempts[source_id] or None
    return fields


def _journal_dirs(paths: RadarPaths) -> list[Path]:
    return [paths.vault / JOURNAL_DIR, paths.db.parent / JOURNAL_DIR]


def _journals(paths: RadarPaths) -> list[Path]:
    found: list[Path] = []
    for folder in dict.fromkeys(_journal_dirs(paths)):
        if folder.is_dir():
            found += sorted(p for p in folder.glob("*.json") if not files.is_temp_name(p.name))
    return found


def _journal(paths: RadarPaths, failure: RunFailure) -> Path | None:
    data = json.dumps(asdict(failure), indent=1).encode()
    for folder in _journal_dirs(paths):
        target = folder / f"{failure.collection_id}.json"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            files.replace(target, data)
        except OSError as exc:
            log.info("run failure not journaled in %s: %s", folder, exc)
            continue
        return target
    log.error(
        "run failure %s recorded nowhere (vault and store unwritable): %s",
        failure.collection_id,
        failure.line,
    )
    return None
