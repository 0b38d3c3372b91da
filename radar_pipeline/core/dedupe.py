"""Layered dedupe: identity first, then the secondary keys that catch what identity misses.

Decision per candidate (one Source):
- identity known (or an alias of it recorded by a re-key) -> `reused`, or `updated` when its
  content hash changed (a revision);
- same canonical URL, or the same content hash of real content (summary or body, not a bare
  title), as a Signal of the same Source -> `duplicate` of it (a re-publication under a new
  guid; no new file);
- otherwise `new`; if its normalized title + observation day, or a simhash within
  `SIMHASH_DISTANCE` bits, matches an existing Signal (any Source) it is still created, only
  flagged `duplicateCandidateOf` for a person to review. Nothing is merged automatically.
  The flag names the oldest match, or the Signal that match is itself flagged against, so a
  cluster of near items all point at its first Signal.

Items decided `new` earlier in the same collection are not in the index yet; a `DedupeBatch`
carries them so later items (of the same or another Source) are checked against them too.

Every database lookup is an equality on one ART-indexed column (migration 2): DuckDB turns
exactly that into an index scan and scans the whole table for anything else (a conjunction, a
composite index, an OR), so further conditions are applied here, in Python, on the few rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal

import duckdb

from radar_pipeline.core.identity import hamming64
from radar_pipeline.core.models import ItemCandidate
from radar_pipeline.core.signals import make_signal_id

SIMHASH_DISTANCE = 3  # bands below assume <= 3: 4 bands, so one band is always equal
BANDS = 4
BAND_BITS = 16
PENDING_PREFIX = "pending:"
_IN_CHUNK = 100  # placeholders per IN list

Decision = Literal["new", "reused", "updated", "duplicate"]


@dataclass(frozen=True)
class ItemDecision:
    candidate: ItemCandidate
    decision: Decision
    signal_id: str | None = None  # the existing Signal for reused/updated/duplicate
    duplicate_candidate_of: str | None = None  # review flag for new Signals


@dataclass(frozen=True)
class _Pending:
    """A candidate decided `new` in this collection (its Signal id is known only later)."""

    source_id: str
    candidate: ItemCandidate
    flag: str | None  # its own duplicateCandidateOf

    @property
    def ref(self) -> str:
        return f"{PENDING_PREFIX}{self.candidate.identity}"


class DedupeBatch:
    """The `new` candidates of one collection so far, across Sources, in decision order."""

    def __init__(self) -> None:
        self._pending: list[_Pending] = []

    def add(self, source_id: str, cand: ItemCandidate, flag: str | None) -> str:
        entry = _Pending(source_id, cand, flag)
        self._pending.append(entry)
        return entry.ref

    def twin(self, source_id: str, cand: ItemCandidate) -> str | None:
        for p in self._pending:
            if p.source_id == source_id and (
                p.candidate.canonical_url == cand.canonical_url
                or (_has_content(cand) and p.candidate.content_hash == cand.content_hash)
            ):
                return p.ref
        return None

    def near(self, cand: ItemCandidate) -> str | None:
        day = _day(cand)
        for p in self._pending:
            other = p.candidate
            if (day is not None and other.title_key == cand.title_key and _day(other) == day) or (
                cand.simhash and hamming64(other.simhash, cand.simhash) <= SIMHASH_DISTANCE
            ):
                return p.flag or p.ref
        return None


def decide(
    con: duckdb.DuckDBPyConnection,
    source_id: str,
    candidates: tuple[ItemCandidate, ...],
    batch: DedupeBatch | None = None,
) -> tuple[ItemDecision, ...]:
    """Classify every candidate of one Source against the Signal index and `batch`.

    `batch` (one per collection) holds the items already decided `new` in this collection;
    the new ones of this call are added to it. A decision naming such an item carries
    `pending:<identity>` until `resolve_pending` turns it into the Signal id.
    """
    if not candidates:
        return ()
    batch = batch if batch is not None else DedupeBatch()
    known = lookup_identities(con, [c.identity for c in candidates])
    decisions: list[ItemDecision] = []
    for cand in candidates:
        hit = known.get(cand.identity)
        if hit is not None:
            signal_id, content_hash = hit
            outcome: Decision = "reused" if content_hash == cand.content_hash else "updated"
            decisions.append(ItemDecision(cand, outcome, signal_id))
            continue
        twin = _secondary_match(con, source_id, cand) or batch.twin(source_id, cand)
        if twin is not None:
            decisions.append(ItemDecision(cand, "duplicate", twin))
            continue
        flag = _near_match(con, cand) or batch.near(cand)
        batch.add(source_id, cand, flag)
        decisions.append(ItemDecision(cand, "new", None, flag))
    return tuple(decisions)


def resolve_pending(ref: str | None, first_seen_at: datetime) -> str | None:
    """The Signal id behind a `pending:<identity>` reference (a `new` item of the collection
    whose `as_of` is `first_seen_at`); any other value is returned unchanged."""
    if ref is None or not ref.startswith(PENDING_PREFIX):
        return ref
    return make_signal_id(first_seen_at, ref[len(PENDING_PREFIX) :])


def simhash_band_keys(simhash: int) -> list[int]:
    """The four indexed band keys of a simhash: band number * 65536 + its 16-bit slice."""
    mask = (1 << BAND_BITS) - 1
    return [b << BAND_BITS | (simhash >> (BAND_BITS * b)) & mask for b in range(BANDS)]


def lookup_identities(
    con: duckdb.DuckDBPyConnection, identities: Sequence[str]
) -> dict[str, tuple[str, str]]:
    """identity -> (Signal id, current content hash), by Signal identity or recorded alias."""
    found = {
        str(r[0]): (str(r[1]), str(r[2]))
        for r in _select_in(
            con, "identity, signal_id, content_hash", "signals", "identity", identities
        )
    }
    missing = [i for i in identities if i not in found]
    if not missing:
        return found
    aliases = {
        str(r[0]): str(r[1])
        for r in _select_in(con, "identity, signal_id", "identity_aliases", "identity", missing)
    }
    if aliases:
        current = {
            str(r[0]): str(r[1])
            for r in _select_in(
                con, "signal_id, content_hash", "signals", "signal_id", list(aliases.values())
            )
        }
        for alias, signal_id in aliases.items():
            if signal_id in current:
                found[alias] = (signal_id, current[signal_id])
    return found


def _select_in(
    con: duckdb.DuckDBPyConnection, columns: str, table: str, key: str, values: Sequence[str]
) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    unique = list(dict.fromkeys(values))
    for start in range(0, len(unique), _IN_CHUNK):
        chunk = unique[start : start + _IN_CHUNK]
        marks = ", ".join("?" * len(chunk))
        rows += con.execute(
            f"SELECT {columns} FROM {table} WHERE {key} IN ({marks})", chunk
        ).fetchall()
    return rows


def _secondary_match(
    con: duckdb.DuckDBPyConnection, source_id: str, cand: ItemCandidate
) -> str | None:
    """The oldest Signal of this Source with the candidate's canonical URL or content."""
    rows = con.execute(
        "SELECT signal_id, source_id, first_seen_at FROM signals WHERE canonical_url = ?",
        [cand.canonical_url],
    ).fetchall()
    # A re-key may have re-canonicalised an older Signal's URL: that form is the alias's.
    rows += con.execute(
        "SELECT a.signal_id, a.source_id, a.recorded_at FROM identity_aliases a "
        "WHERE a.canonical_url = ?",
        [cand.canonical_url],
    ).fetchall()
    if _has_content(cand):
        rows += con.execute(
            "SELECT signal_id, source_id, first_seen_at FROM signals WHERE content_hash = ?",
            [cand.content_hash],
        ).fetchall()
    return _oldest(r for r in rows if r[1] == source_id)


def _near_match(con: duckdb.DuckDBPyConnection, cand: ItemCandidate) -> str | None:
    """The oldest Signal (any Source) with the same title key and day, or a near simhash."""
    rows: list[tuple[Any, ...]] = []
    day = _day(cand)
    if day is not None:
        rows += [
            (r[0], r[2])
            for r in con.execute(
                "SELECT signal_id, observed_day, first_seen_at FROM signals WHERE title_key = ?",
                [cand.title_key],
            ).fetchall()
            if r[1] == day
        ]
    if cand.simhash:  # 0 means "no words": nothing to compare
        keys = simhash_band_keys(cand.simhash)
        rows += [
            (r[0], r[2])
            for r in con.execute(
                "SELECT signal_id, simhash, first_seen_at FROM simhash_bands "
                f"WHERE band_key IN ({', '.join('?' * len(keys))})",
                keys,
            ).fetchall()
            if hamming64(int(r[1]), cand.simhash) <= SIMHASH_DISTANCE
        ]
    match = _oldest((r[0], None, r[1]) for r in rows)
    if match is None:
        return None
    # Flags name the first Signal of a cluster, never another flagged one (no chains).
    row = con.execute(
        "SELECT duplicate_candidate_of FROM signals WHERE signal_id = ?", [match]
    ).fetchone()
    return str(row[0]) if row and row[0] else match


def _oldest(rows: Iterable[tuple[Any, ...]]) -> str | None:
    """The signal id (column 0) with the earliest first-seen time (column 2); ties by id."""
    best = min(rows, key=lambda r: (r[2], str(r[0])), default=None)
    return str(best[0]) if best is not None else None


def _has_content(cand: ItemCandidate) -> bool:
    # Without summary or body the content hash is the title's: equal titles are no proof
    # of a re-publication (two "Weekly release notes" are two items).
    return bool(cand.summary or cand.content)


def _day(cand: ItemCandidate) -> date | None:
    return cand.observed_at.date() if cand.observed_at else None
