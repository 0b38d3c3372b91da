"""Layered dedupe: identity first, then the secondary keys that catch what identity misses.

Decision per candidate (one Source):
- identity known (or an alias of it recorded by a re-key, or the item's earlier identity, the
  one the rule before ids were read as written gave it: a Signal already in a vault keeps
  it) -> `reused`, or
  `updated` when its content hash changed (a revision) and it is dated inside the period the
  check covers (or undated): an older item is looked at again only since every item inside
  the 7-day cap is (invariant 8), and that must not add revisions the rule before it would
  never have seen;
- identity recorded as a duplicate by an earlier check -> `duplicate` of the same Signal again
  (the decision is kept, so a change of the rules below never turns it into a new Signal);
- otherwise the item is unknown. At most `item_cap` unknown items are decided per check,
  newest first (undated ones after the dated, in feed order); the rest are `deferred` to the
  next checks, which find them still unknown (docs/architecture.md, invariant 14);
- same canonical URL and the same distinguishing fragment (links differing only by fragment
  are two items: keys.distinguishing_fragment), or the same content hash of *substantive*
  text, as a Signal of the same Source -> `duplicate` of it (a re-publication under a new
  guid; no new file). Substantive:
  at least MIN_SUBSTANTIVE_WORDS words of summary or body, and not a template: a text held by
  three or more links of the check, by most of them, or by two or more Signals of the Source
  already is the feed's boilerplate and proves nothing (invariant 2);
- otherwise `new`; if its normalized title + observation day, or a simhash within
  `SIMHASH_DISTANCE` bits, matches an existing Signal (any Source) it is still created, only
  flagged `duplicateCandidateOf` for a person to review. Nothing is merged automatically.
  The flag names the oldest match, or the Signal that match is itself flagged against, so a
  cluster of near items all point at its first Signal.

Items decided `new` earlier in the same collection are not in the index yet; a `DedupeBatch`
carries them so later items (of the same or another Source) are checked against them too.

Every database lookup is on one column (core/store/lookups.py says why); further conditions
are applied here, in Python, on the few rows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from radar_pipeline.core.contract.outcomes import Decision
from radar_pipeline.core.identity.keys import (
    distinguishing_fragment,
    hamming64,
    is_substantive,
    make_signal_id,
)
from radar_pipeline.core.models import ItemCandidate
from radar_pipeline.core.store import lookups
from radar_pipeline.core.store.connection import Connection
from radar_pipeline.core.store.signals import BANDS, simhash_band_keys

SIMHASH_DISTANCE = 3  # the bands assume <= 3: 4 bands, so one band is always equal
assert SIMHASH_DISTANCE < BANDS
PENDING_PREFIX = "pending:"


@dataclass(frozen=True)
class ItemDecision:
    candidate: ItemCandidate
    decision: Decision
    signal_id: str | None = None  # the existing Signal for reused/updated/duplicate
    duplicate_candidate_of: str | None = None  # review flag for new Signals
    by_earlier_identity: bool = False  # known only by its earlier identity


@dataclass(frozen=True)
class _Pending:
    """A candidate decided `new` in this collection (its Signal id is known only later)."""

    source_id: str
    candidate: ItemCandidate
    flag: str | None  # its own duplicateCandidateOf

    @property
    def ref(self) -> str:
        return f"{PENDING_PREFIX}{self.candidate.identity}"


class CandidateKeys:
    """Two keys dedupe reads off a candidate's text, each computed once per text: whether it is
    substantive (`is_substantive`) and its distinguishing fragment. The templates, the index
    and the batch each ask for them, so a candidate was worked three or four times; both are
    pure functions of the text they read, so a memo by that text answers what a call would."""

    def __init__(self) -> None:
        self._substantive: dict[str, bool] = {}
        self._fragments: dict[tuple[str, str], str] = {}

    def substantive(self, cand: ItemCandidate) -> bool:
        """`_has_substantive_text(cand)`."""
        text = cand.content or cand.summary
        found = self._substantive.get(text)
        if found is None:
            found = self._substantive[text] = _has_substantive_text(cand)
        return found

    def fragment(self, cand: ItemCandidate) -> str:
        """`distinguishing_fragment(cand.link, cand.source_item_id)`."""
        key = (cand.link, cand.source_item_id)
        found = self._fragments.get(key)
        if found is None:
            found = self._fragments[key] = _fragment(cand)
        return found

    def is_evidence(self, cand: ItemCandidate, templates: frozenset[str]) -> bool:
        """Whether the candidate's content hash may prove a re-publication (invariant 2)."""
        return self.substantive(cand) and cand.content_hash not in templates


class DedupeBatch:
    """The `new` candidates of one collection so far, across Sources, in decision order.

    Indexed like the Signal index (URL, content hash, title key and day, simhash bands), so
    each look-up costs the same however many items the collection already holds; each answers
    the first pending item, in decision order, that a scan of the whole list would find.
    """

    def __init__(self) -> None:
        self.keys = CandidateKeys()  # the collection's memo of text keys
        self._pending: list[_Pending] = []
        self._by_url: dict[tuple[str, str, str], int] = {}
        self._by_content: dict[tuple[str, str], int] = {}
        self._by_title: dict[tuple[str, date], int] = {}
        self._by_band: dict[int, list[int]] = {}

    def add(self, source_id: str, cand: ItemCandidate, flag: str | None) -> str:
        entry = _Pending(source_id, cand, flag)
        position = len(self._pending)
        self._pending.append(entry)
        # setdefault: the first item with a key is the one a scan in order finds.
        self._by_url.setdefault((source_id, cand.canonical_url, self.keys.fragment(cand)), position)
        self._by_content.setdefault((source_id, cand.content_hash), position)
        day = _day(cand)
        if day is not None:
            self._by_title.setdefault((cand.title_key, day), position)
        for key in simhash_band_keys(cand.simhash):
            self._by_band.setdefault(key, []).append(position)
        return entry.ref

    def twin(
        self, source_id: str, cand: ItemCandidate, templates: frozenset[str] = frozenset()
    ) -> str | None:
        """The first pending item of this Source with the same canonical URL and fragment, or
        (for a candidate with substantive text) the same content hash."""
        found = [self._by_url.get((source_id, cand.canonical_url, self.keys.fragment(cand)))]
        if self.keys.is_evidence(cand, templates):
            found.append(self._by_content.get((source_id, cand.content_hash)))
        first = min((i for i in found if i is not None), default=None)
        return self._pending[first].ref if first is not None else None

    def near(self, cand: ItemCandidate) -> str | None:
        """The first pending item (any Source) with the same title key and day, or a simhash
        within SIMHASH_DISTANCE bits (such two share at least one band); its own flag if it
        has one."""
        found: list[int] = []
        day = _day(cand)
        if day is not None:
            title = self._by_title.get((cand.title_key, day))
            if title is not None:
                found.append(title)
        if cand.simhash:
            for key in simhash_band_keys(cand.simhash):
                for i in self._by_band.get(key, ()):
                    if hamming64(self._pending[i].candidate.simhash, cand.simhash) <= (
                        SIMHASH_DISTANCE
                    ):
                        found.append(i)
                        break  # positions are ascending: the first in this band is enough
        if not found:
            return None
        p = self._pending[min(found)]
        return p.flag or p.ref


def decide(
    con: Connection,
    source_id: str,
    candidates: tuple[ItemCandidate, ...],
    batch: DedupeBatch | None = None,
) -> tuple[ItemDecision, ...]:
    """Classify every candidate of one Source against the Signal index and `batch`.

    `batch` (one per collection) holds the items already decided `new` in this collection;
    the new ones of this call are added to it. A decision naming such an item carries
    `pending:<identity>` until `resolve_pending` turns it into the Signal id.
    """
    return decide_many(con, [(source_id, candidates)], batch)[0]


def decide_many(
    con: Connection,
    checks: Sequence[tuple[str, tuple[ItemCandidate, ...]]],
    batch: DedupeBatch | None = None,
    item_cap: int | None = None,
    covered_from: Sequence[datetime | None] | None = None,
    on_disk: dict[str, str] | None = None,
) -> list[tuple[ItemDecision, ...]]:
    """`decide` for many Sources, in order, with one set of index queries for all of them.

    The index does not change while a collection dedupes (rows are written at its commit), so
    rows fetched for every candidate at once are the rows each Source's own queries would get;
    what earlier Sources of the collection decided `new` is in `batch`, as with `decide`.
    `item_cap` bounds the unknown items decided per Source (None: no bound); the rest are
    `deferred`. `covered_from`: each check's coverageFrom (None: all covered). Decisions come
    back in each check's candidate order. `on_disk`: identity -> Signal id of the files in the
    vault; a file the index lacks (unreadable, so never indexed) still makes its item known.
    """
    batch = batch if batch is not None else DedupeBatch()
    everything = [c for _, cands in checks for c in cands]
    if not everything:
        return [() for _ in checks]
    earlier = [c.earlier_identity for c in everything if c.earlier_identity is not None]
    known = lookup_identities(con, [c.identity for c in everything] + earlier)
    for c in everything:
        for key in (c.identity, c.earlier_identity):
            if key is not None and key not in known and on_disk and key in on_disk:
                known[key] = (on_disk[key], c.content_hash)
    by_earlier = _adopt_earlier(everything, known)
    unsettled = [c for c in everything if c.identity not in known]
    repeated = lookup_duplicates(
        con, [k for c in unsettled for k in (c.identity, c.earlier_identity) if k is not None]
    )
    for c in unsettled:
        if c.identity not in repeated and c.earlier_identity in repeated:
            repeated[c.identity] = repeated[c.earlier_identity]
    unknown = [c for c in everything if c.identity not in known and c.identity not in repeated]
    index = _SecondaryIndex.load(con, unknown, batch.keys)
    periods = list(covered_from) if covered_from is not None else [None] * len(checks)
    return [
        _decide_one(
            source_id, cands, _Known(known, repeated, by_earlier), index, batch, item_cap, since
        )
        for (source_id, cands), since in zip(checks, periods, strict=True)
    ]


def _adopt_earlier(
    candidates: Sequence[ItemCandidate], known: dict[str, tuple[str, str]]
) -> frozenset[str]:
    """Give each candidate whose identity is unknown but whose earlier identity names a Signal
    that Signal (a vault collected before keeps its Signals); return their identities."""
    adopted = set()
    for c in candidates:
        earlier = c.earlier_identity
        if c.identity not in known and earlier is not None and earlier in known:
            known[c.identity] = known[earlier]
            adopted.add(c.identity)
    return frozenset(adopted)


@dataclass(frozen=True)
class _Known:
    identities: dict[str, tuple[str, str]]  # identity -> (Signal id, content hash)
    duplicates: dict[str, str]  # identity -> the Signal it was recorded a duplicate of
    by_earlier: frozenset[str] = frozenset()  # identities known only by their earlier one


def _decide_one(
    source_id: str,
    candidates: tuple[ItemCandidate, ...],
    known: _Known,
    index: _SecondaryIndex,
    batch: DedupeBatch,
    item_cap: int | None,
    covered_from: datetime | None = None,
) -> tuple[ItemDecision, ...]:
    decided: dict[int, ItemDecision] = {}
    unknown: list[int] = []
    for i, cand in enumerate(candidates):
        hit = known.identities.get(cand.identity)
        if hit is not None:
            signal_id, content_hash = hit
            changed = content_hash != cand.content_hash and _covered(cand, covered_from)
            decided[i] = ItemDecision(
                cand,
                Decision.UPDATED if changed else Decision.REUSED,
                signal_id,
                by_earlier_identity=cand.identity in known.by_earlier,
            )
        elif cand.identity in known.duplicates:
            decided[i] = ItemDecision(cand, Decision.DUPLICATE, known.duplicates[cand.identity])
        else:
            unknown.append(i)
    unknown.sort(key=lambda i: _newest_first(candidates[i]))
    taken = unknown if item_cap is None else unknown[:item_cap]
    templates = template_hashes(candidates, batch.keys)
    for i in taken:
        cand = candidates[i]
        twin = index.twin(source_id, cand, templates, batch.keys) or batch.twin(
            source_id, cand, templates
        )
        if twin is not None:
            decided[i] = ItemDecision(cand, Decision.DUPLICATE, twin)
            continue
        flag = index.near(cand) or batch.near(cand)
        batch.add(source_id, cand, flag)
        decided[i] = ItemDecision(cand, Decision.NEW, None, flag)
    for i in unknown[len(taken) :]:
        decided[i] = ItemDecision(candidates[i], Decision.DEFERRED)
    return tuple(decided[i] for i in range(len(candidates)))


def _covered(cand: ItemCandidate, covered_from: datetime | None) -> bool:
    """Whether the candidate falls in the period the check covers (undated ones always do)."""
    return covered_from is None or cand.observed_at is None or cand.observed_at >= covered_from


def _newest_first(cand: ItemCandidate) -> tuple[int, float, int]:
    """Dated items newest first, then undated ones in feed order (feeds list newest first)."""
    if cand.observed_at is None:
        return (1, 0.0, cand.position)
    return (0, -cand.observed_at.timestamp(), cand.position)


def template_hashes(
    candidates: Sequence[ItemCandidate], keys: CandidateKeys | None = None
) -> frozenset[str]:
    """Content hashes that are the feed's boilerplate in this check: held by three or more of
    its links, or by two or more when they are most of the links with substantive text.

    Links, not items: a re-publication under a new guid at the same URL is one link."""
    substantive = keys.substantive if keys is not None else _has_substantive_text
    held = {(c.content_hash, c.canonical_url) for c in candidates if substantive(c)}
    counts = Counter(h for h, _ in held)
    links = len({url for _, url in held})
    return frozenset(h for h, n in counts.items() if n >= 3 or (n >= 2 and 2 * n > links))


def lookup_duplicates(con: Connection, identities: Sequence[str]) -> dict[str, str]:
    """identity -> Signal id, for items an earlier check recorded as a duplicate of it."""
    rows = lookups.duplicates_by_identity(con, identities)
    return {str(r[0]): str(r[1]) for r in rows}


def resolve_pending(ref: str | None, first_seen_at: datetime) -> str | None:
    """The Signal id behind a `pending:<identity>` reference (a `new` item of the collection
    whose `as_of` is `first_seen_at`); any other value is returned unchanged."""
    if ref is None or not ref.startswith(PENDING_PREFIX):
        return ref
    return make_signal_id(first_seen_at, ref[len(PENDING_PREFIX) :])


def lookup_identities(con: Connection, identities: Sequence[str]) -> dict[str, tuple[str, str]]:
    """identity -> (Signal id, current content hash), by Signal identity or recorded alias."""
    found = {
        str(r[0]): (str(r[1]), str(r[2])) for r in lookups.signals_by_identity(con, identities)
    }
    missing = [i for i in identities if i not in found]
    if not missing:
        return found
    aliases = {str(r[0]): str(r[1]) for r in lookups.aliases_by_identity(con, missing)}
    if aliases:
        current = {
            str(r[0]): str(r[1]) for r in lookups.content_hashes(con, list(aliases.values()))
        }
        for alias, signal_id in aliases.items():
            if signal_id in current:
                found[alias] = (signal_id, current[signal_id])
    return found


_Row = tuple[str, str, datetime]  # signal id, source id or flag, first seen


@dataclass(frozen=True)
class _SecondaryIndex:
    """The indexed rows that can match the candidates of a collection, fetched in one query
    per key and chunk (an IN list on one indexed column): a few queries, not a few per item.
    """

    by_url: dict[tuple[str, str], list[_Row]]  # (canonical URL, fragment) -> (signal, ...)
    by_content: dict[str, list[_Row]]  # content hash -> (signal, source, first seen)
    by_title: dict[tuple[str, date], list[_Row]]  # (title key, day) -> (signal, flag, seen)
    by_band: dict[int, list[tuple[str, int, datetime]]]  # band key -> (signal, simhash, seen)
    flags: dict[str, str]  # duplicateCandidateOf of the Signals a near match can name

    @classmethod
    def load(
        cls, con: Connection, cands: list[ItemCandidate], keys: CandidateKeys
    ) -> _SecondaryIndex:
        by_url: dict[tuple[str, str], list[_Row]] = {}
        by_content: dict[str, list[_Row]] = {}
        by_title: dict[tuple[str, date], list[_Row]] = {}
        by_band: dict[int, list[tuple[str, int, datetime]]] = {}
        if not cands:
            return cls(by_url, by_content, by_title, by_band, {})
        urls = [c.canonical_url for c in cands]
        for u in lookups.signals_by_url(con, urls):
            by_url.setdefault((u[0], str(u[4])), []).append((str(u[1]), str(u[2]), u[3]))
        # A re-key may have re-canonicalised an older Signal's URL: that form is the alias's
        # (with its Signal's fragment).
        aliased = lookups.aliases_by_url(con, urls)
        fragments = dict(lookups.link_fragments(con, [str(r[1]) for r in aliased]))
        for r in aliased:
            url_key = (str(r[0]), str(fragments.get(str(r[1]), "")))
            by_url.setdefault(url_key, []).append((str(r[1]), str(r[2]), r[3]))
        hashes = [c.content_hash for c in cands if keys.substantive(c)]
        for r in lookups.signals_by_content(con, hashes):
            by_content.setdefault(r[0], []).append((str(r[1]), str(r[2]), r[3]))
        titles = [c.title_key for c in cands if c.observed_at is not None]
        for t in lookups.signals_by_title(con, titles):
            if t[1] is not None:
                by_title.setdefault((t[0], t[1]), []).append((str(t[2]), str(t[3] or ""), t[4]))
        wanted: dict[int, list[int]] = {}  # band key -> simhashes of candidates with it
        for c in cands:
            for key in simhash_band_keys(c.simhash) if c.simhash else ():
                wanted.setdefault(key, []).append(c.simhash)
        for b in lookups.bands_by_key(con, list(wanted)):
            # Most rows share a band by chance; keep only those near a candidate.
            if any(hamming64(int(b[2]), h) <= SIMHASH_DISTANCE for h in wanted[int(b[0])]):
                by_band.setdefault(int(b[0]), []).append((str(b[1]), int(b[2]), b[3]))
        near = [row[0] for rows in by_band.values() for row in rows]
        flags = {str(r[0]): str(r[1]) for r in lookups.candidate_flags(con, near) if r[1]}
        flags.update((row[0], row[1]) for rows in by_title.values() for row in rows if row[1])
        return cls(by_url, by_content, by_title, by_band, flags)

    def twin(
        self, source_id: str, cand: ItemCandidate, templates: frozenset[str], keys: CandidateKeys
    ) -> str | None:
        """The oldest Signal of this Source with the candidate's canonical URL and fragment, or
        with its substantive text when no more than one Signal of the Source holds that text."""
        rows = self.by_url.get((cand.canonical_url, keys.fragment(cand)), [])
        if keys.is_evidence(cand, templates):
            same = [r for r in self.by_content.get(cand.content_hash, []) if r[1] == source_id]
            if len({r[0] for r in same}) == 1:  # two or more: the Source's boilerplate
                rows = rows + same
        return _oldest(r for r in rows if r[1] == source_id)

    def near(self, cand: ItemCandidate) -> str | None:
        """The oldest Signal (any Source) with the same title key and day, or a near simhash;
        if that one is itself flagged, the Signal it is flagged against (no chains)."""
        day = _day(cand)
        rows = list(self.by_title.get((cand.title_key, day), [])) if day is not None else []
        if cand.simhash:  # 0 means "no words": nothing to compare
            rows += [
                (sid, "", seen)
                for key in simhash_band_keys(cand.simhash)
                for sid, simhash, seen in self.by_band.get(key, [])
                if hamming64(simhash, cand.simhash) <= SIMHASH_DISTANCE
            ]
        match = _oldest(rows)
        return self.flags.get(match, match) if match is not None else None


def _oldest(rows: Iterable[tuple[Any, ...]]) -> str | None:
    """The signal id (column 0) with the earliest first-seen time (column 2); ties by id."""
    best = min(rows, key=lambda r: (r[2], str(r[0])), default=None)
    return str(best[0]) if best is not None else None


def _has_substantive_text(cand: ItemCandidate) -> bool:
    # Without summary or body the content hash is the title's: equal titles are no proof of a
    # re-publication (two "Weekly release notes" are two items); nor is a short text.
    return is_substantive(cand.content or cand.summary)


def _fragment(cand: ItemCandidate) -> str:
    return distinguishing_fragment(cand.link, cand.source_item_id)


def _day(cand: ItemCandidate) -> date | None:
    return cand.observed_at.date() if cand.observed_at else None
