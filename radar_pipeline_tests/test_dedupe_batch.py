"""`decide_many` (index queries once per collection) decides as `decide` does per Source."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from radar_pipeline.core.collect.commit import index_row
from radar_pipeline.core.identity.dedupe import (
    CandidateKeys,
    DedupeBatch,
    decide,
    decide_many,
    template_hashes,
)
from radar_pipeline.core.identity.keys import (
    canonicalize_url,
    content_hash,
    distinguishing_fragment,
    identity_hash,
    is_substantive,
    make_signal_id,
    normalize_title,
    simhash64,
)
from radar_pipeline.core.models import ItemCandidate
from radar_pipeline.core.vault import index
from radar_pipeline_tests.conftest import fresh_store

NOW = datetime(2025, 3, 4, tzinfo=UTC)
WORDS = [
    "go",
    "rust",
    "release",
    "notes",
    "security",
    "fix",
    "kernel",
    "network",
    "cache",
    "region",
    "outage",
    "patch",
]


def _cand(rng: random.Random, source: str, n: int) -> ItemCandidate:
    # Few URLs, titles and texts, so identities, URLs, contents, titles and simhashes collide.
    url = canonicalize_url(f"https://ex.com/{source if rng.random() < 0.5 else 'x'}/{n % 7}")
    guid = f"g{rng.randrange(12)}"
    title = " ".join(rng.sample(WORDS, 3)) if rng.random() < 0.7 else "Weekly notes"
    summary = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 9)))
    observed = NOW - timedelta(days=rng.randrange(3)) if rng.random() < 0.8 else None
    return ItemCandidate(
        source_item_id=guid,
        title=title,
        link=url,
        canonical_url=url,
        identity=identity_hash(source, url, guid),
        observed_at=observed,
        observed_field="published" if observed else None,
        future_dated=False,
        summary=summary,
        content=None,
        content_hash=content_hash(summary or title),
        title_key=normalize_title(title),
        simhash=simhash64(f"{title} {summary}"),
        position=n,
    )


def _fresh(source: str, url: str) -> ItemCandidate:
    title = "Zebra quantum headline nobody else wrote"
    return ItemCandidate(
        source_item_id=url,
        title=title,
        link=url,
        canonical_url=url,
        identity=identity_hash(source, url, url),
        observed_at=NOW,
        observed_field="published",
        future_dated=False,
        summary="",
        content=None,
        content_hash=content_hash(title),
        title_key=normalize_title(title),
        simhash=simhash64(title),
        position=99,
    )


def test_decide_many_equals_decide_per_source(tmp_path: Path) -> None:
    rng = random.Random(11)
    store = fresh_store(tmp_path)
    rows: list[tuple[Any, ...]] = []
    seen: set[str] = set()
    for n in range(60):  # an index of earlier Signals from three Sources
        source = f"s{n % 3}"
        cand = _cand(rng, source, n)
        if cand.identity in seen:
            continue
        seen.add(cand.identity)
        sid = make_signal_id(NOW - timedelta(days=5, minutes=n), cand.identity)
        flag = None if n % 5 else (rows[0][0] if rows else None)
        rows.append(index_row(source, sid, cand, NOW - timedelta(days=5, minutes=n), flag))
    with store.transaction() as con:
        index.insert_signals(con, rows)
    checks = [
        (f"s{k}", tuple(_cand(rng, f"s{k}", 100 * k + i) for i in range(rng.randrange(0, 15))))
        for k in range(5)
    ]
    # The same fresh headline in two Sources: only the collection's batch links them.
    fresh = [_fresh("s3", "https://ex.com/fresh/3"), _fresh("s4", "https://ex.com/fresh/4")]
    checks[3] = ("s3", (*checks[3][1], fresh[0]))
    checks[4] = ("s4", (*checks[4][1], fresh[1]))
    with store.transaction() as con:
        one_by_one_batch = DedupeBatch()
        one_by_one = [decide(con, s, cands, one_by_one_batch) for s, cands in checks]
        together = decide_many(con, checks, DedupeBatch())
    assert together == one_by_one
    last = together[4][-1]
    assert last.decision == "new" and last.duplicate_candidate_of == f"pending:{fresh[0].identity}"
    decided = [d.decision for ds in together for d in ds]
    # The fixture exercises new, duplicate, known identities and the review flag.
    assert {"new", "duplicate"} <= set(decided) and {"reused", "updated"} & set(decided)
    assert any(d.duplicate_candidate_of for ds in together for d in ds)


def test_candidate_keys_answer_what_the_plain_functions_do() -> None:
    # Texts around the ten-word bound, shared by several candidates, in content or summary;
    # links and http ids with and without fragments: each answer, asked twice, is the plain one.
    rng = random.Random(30)
    keys = CandidateKeys()
    cands = []
    for n in range(400):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 14)))
        link = f"https://ex.com/p/{n % 9}" + rng.choice(["", "#a", "#b", "#"])
        guid = rng.choice([f"g{n % 5}", f"https://ex.com/id/{n % 4}#f{n % 3}", link])
        content = words if rng.random() < 0.3 else None
        summary = rng.choice(["", words, "Read more"])
        cand = ItemCandidate(
            source_item_id=guid,
            title="t",
            link=link,
            canonical_url=canonicalize_url(link),
            identity=identity_hash("s", canonicalize_url(link), guid),
            observed_at=None,
            observed_field=None,
            future_dated=False,
            summary=summary,
            content=content,
            content_hash=content_hash(content or summary or "t"),
            title_key="t",
            simhash=0,
            position=n,
        )
        cands.append(cand)
    assert any(keys.substantive(c) for c in cands) and not all(keys.substantive(c) for c in cands)
    for cand in cands + cands:
        assert keys.substantive(cand) == is_substantive(cand.content or cand.summary)
        assert keys.fragment(cand) == distinguishing_fragment(cand.link, cand.source_item_id)
    plain = template_hashes(cands)
    assert template_hashes(cands, keys) == plain
    for cand in cands:
        evidence = is_substantive(cand.content or cand.summary) and cand.content_hash not in plain
        assert keys.is_evidence(cand, plain) == evidence
