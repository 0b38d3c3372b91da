"""Layered dedupe: identity first, then the secondary keys that catch what identity misses.

Decision per candidate (one Source):
- identity known          -> `reused`, or `updated` when its content hash changed (a revision);
- same canonical URL or same content hash as a Signal of the same Source -> `duplicate` of it
  (a re-publication under a new guid; no new file);
- otherwise `new`; if its normalized title + observation day, or a simhash within
  `SIMHASH_DISTANCE` bits, matches an existing Signal (any Source) it is still created, only
  flagged `duplicateCandidateOf` for a person to review. Nothing is merged automatically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import duckdb

from radar_pipeline.core.models import ItemCandidate

SIMHASH_DISTANCE = 3
PENDING_PREFIX = "pending:"

Decision = Literal["new", "reused", "updated", "duplicate"]


@dataclass(frozen=True)
class ItemDecision:
    candidate: ItemCandidate
    decision: Decision
    signal_id: str | None = None  # the existing Signal for reused/updated/duplicate
    duplicate_candidate_of: str | None = None  # review flag for new Signals


def decide(
    con: duckdb.DuckDBPyConnection, source_id: str, candidates: tuple[ItemCandidate, ...]
) -> tuple[ItemDecision, ...]:
    """Classify every candidate of one Source against the Signal index (indexed lookups only)."""
    if not candidates:
        return ()
    known = _lookup(con, "identity", [c.identity for c in candidates])
    decisions: list[ItemDecision] = []
    batch_urls: dict[str, str] = {}
    batch_hashes: dict[str, str] = {}
    for cand in candidates:
        hit = known.get(cand.identity)
        if hit is not None:
            signal_id, content_hash = hit
            outcome: Decision = "reused" if content_hash == cand.content_hash else "updated"
            decisions.append(ItemDecision(cand, outcome, signal_id))
            continue
        twin = _secondary_match(con, source_id, cand) or batch_urls.get(cand.canonical_url)
        twin = twin or batch_hashes.get(cand.content_hash)
        if twin is not None:
            decisions.append(ItemDecision(cand, "duplicate", twin))
            continue
        # A duplicate of an item that is new in this same batch names it by this marker
        # until the materialize stage knows its Signal id.
        pending = f"{PENDING_PREFIX}{cand.identity}"
        batch_urls[cand.canonical_url] = pending
        batch_hashes[cand.content_hash] = pending
        decisions.append(ItemDecision(cand, "new", None, _near_match(con, cand)))
    return tuple(decisions)


def _lookup(
    con: duckdb.DuckDBPyConnection, column: str, values: list[str]
) -> dict[str, tuple[str, str]]:
    rows = con.execute(
        f"SELECT {column}, signal_id, content_hash FROM signals WHERE {column} IN "
        "(SELECT unnest(?))",
        [values],
    ).fetchall()
    return {str(r[0]): (str(r[1]), str(r[2])) for r in rows}


def _secondary_match(
    con: duckdb.DuckDBPyConnection, source_id: str, cand: ItemCandidate
) -> str | None:
    row = con.execute(
        "SELECT signal_id FROM signals WHERE source_id = ? AND "
        "(canonical_url = ? OR content_hash = ?) ORDER BY first_seen_at LIMIT 1",
        [source_id, cand.canonical_url, cand.content_hash],
    ).fetchone()
    return str(row[0]) if row else None


def _near_match(con: duckdb.DuckDBPyConnection, cand: ItemCandidate) -> str | None:
    day = cand.observed_at.date() if cand.observed_at else None
    row = con.execute(
        "SELECT signal_id FROM signals WHERE (title_key = ? AND observed_day IS NOT DISTINCT FROM ?"
        " AND ? IS NOT NULL) OR bit_count(xor(simhash, ?::UBIGINT)) <= ? "
        "ORDER BY first_seen_at LIMIT 1",
        [cand.title_key, day, day, cand.simhash, SIMHASH_DISTANCE],
    ).fetchone()
    return str(row[0]) if row else None
