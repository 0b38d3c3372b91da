"""The paths that keep a collection's cost flat as the index grows give the plain answers: the
semi-join lookups of a whole batch of keys, the paused garbage collector, and the checks as set
queries in DuckDB."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.audit.signal_audits import (
    audit_agreement,
    audit_idempotency,
    audit_provenance,
)
from radar_pipeline.core.identity import dedupe
from radar_pipeline.core.store import lookups
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.vault import index
from radar_pipeline.core.vault.facts import SignalFile, open_facts, record_facts
from radar_pipeline_tests.conftest import fresh_store

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _rows(count: int, rng: random.Random) -> list[tuple[Any, ...]]:
    rows = []
    for i in range(count):
        identity = f"{i:016x}"
        signal_id = f"20261130T120000Z-{identity}"
        rows.append(
            (
                signal_id,
                identity,
                1,
                f"src-{i % 7}",
                f"item-{i}",
                f"https://example.com/{i % 90}/{i}",
                f"title {i % 40}",
                None,
                f"hash-{i % 60}",
                rng.getrandbits(64),
                NOW + timedelta(seconds=i),
                None,
                f"Radar/Signals/{signal_id}.md",
                "",  # link_fragment
            )
        )
    return rows


@pytest.fixture
def store(tmp_path: Path) -> Store:
    store = fresh_store(tmp_path)
    with store.transaction() as con:
        index.insert_signals(con, _rows(300, random.Random(3)))
    return store


@pytest.mark.parametrize("count", [1, 50, 51, 400])
def test_batched_lookup_equals_a_filter_of_the_whole_table(store: Store, count: int) -> None:
    """Up to 50 keys take the IN list, more the semi-join: both are a plain filter."""
    rng = random.Random(count)
    with store.transaction() as con:
        everything = con.execute("SELECT identity, signal_id FROM signals").fetchall()
        bands = con.execute("SELECT band_key, signal_id FROM simhash_bands").fetchall()
        # Keys that exist and keys that do not, with repeats.
        wanted = [f"absent-{i}" if i % 3 == 2 else rng.choice(everything)[0] for i in range(count)]
        keys = [rng.choice(bands)[0] if i % 2 else 3 * 65536 + i for i in range(count)]
        got = lookups._select_in(con, "identity, signal_id", "signals", "identity", wanted)
        got_bands = lookups._select_in(
            con, "band_key, signal_id", "simhash_bands", "band_key", keys
        )
    assert sorted(got) == sorted(r for r in everything if r[0] in set(wanted))
    assert sorted(got_bands) == sorted(r for r in bands if r[0] in set(keys))
    assert got, "some wanted keys exist: the filter must find them"


def test_lookup_identities_answers_a_large_batch(store: Store) -> None:
    with store.transaction() as con:
        known = dict(con.execute("SELECT identity, content_hash FROM signals").fetchall())
        asked = list(known)[:120] + [f"new-{i}" for i in range(80)]
        found = dedupe.lookup_identities(con, asked)
    assert set(found) == set(list(known)[:120])
    assert all(found[i][1] == known[i] for i in found)


def test_insert_signals_bands_only_new_rows_in_a_large_batch(store: Store) -> None:
    more = _rows(420, random.Random(4))  # the first 300 are indexed already
    with store.transaction() as con:
        index.insert_signals(con, more)
        signals = con.execute("SELECT count(*) FROM signals").fetchone()
        bands = con.execute(
            "SELECT count(*), count(DISTINCT (band_key, signal_id)) FROM simhash_bands"
        ).fetchone()
    assert signals == (420,)
    assert bands == (420 * dedupe.BANDS, 420 * dedupe.BANDS)


def _plain_idempotency(
    files: list[SignalFile], index_rows: list[tuple[str, str]]
) -> list[tuple[str, tuple[str, ...]]]:
    """The audit as first written in Python (a list per identity, every identity sorted), over
    the files in name order and the index rows (Signal id, identity) in Signal id order."""
    by_identity: dict[str, list[SignalFile]] = {}
    unidentified = []
    for f in files:
        if f.identity is None:
            unidentified.append(f)
        else:
            by_identity.setdefault(f.identity, []).append(f)
    rows_by_identity: dict[str, list[str]] = {}
    for signal_id, identity in index_rows:
        rows_by_identity.setdefault(identity, []).append(signal_id)
    out: list[tuple[str, tuple[str, ...]]] = []
    for identity in sorted(by_identity.keys() | rows_by_identity.keys()):
        owners = by_identity.get(identity, [])
        rows = rows_by_identity.get(identity, [])
        names = ", ".join(f.rel_path for f in owners) or "–"
        counts = (identity, str(len(owners)), str(len(rows)), names)
        if len(owners) > 1:
            out.append(("ERROR", (*counts, "several files share this identity")))
        elif not owners:
            out.append(("ERROR", (*counts, "index row without a Signal file")))
        elif not rows:
            out.append(("WARN", (*counts, "no index row (the next collection repairs it)")))
        elif rows[0] != (owners[0].declared_id or owners[0].stem):
            out.append(("ERROR", (*counts, f"index names {rows[0]}")))
    for f in unidentified:
        out.append(("ERROR", ("–", "1", "0", f.rel_path, "no Signal id to identify")))
    return out


def _plain_agreement(
    files: list[SignalFile], index_rows: list[tuple[str, str]]
) -> list[tuple[str, tuple[str, ...]]]:
    in_vault = {f.declared_id or f.stem for f in files}
    in_index = {signal_id for signal_id, _ in index_rows}
    return [
        ("ERROR", (sid, "no", "yes", "index row without a Signal file"))
        for sid in sorted(in_index - in_vault)
    ] + [
        ("WARN", (sid, "yes", "no", "not indexed yet (the next collection repairs it)"))
        for sid in sorted(in_vault - in_index)
    ]


def _plain_provenance(files: list[SignalFile]) -> list[tuple[str, tuple[str, ...]]]:
    out: list[tuple[str, tuple[str, ...]]] = []
    for f in files:
        if f.error is not None:
            out.append(("ERROR", (f.rel_path, "all", f.error)))
        else:
            out.extend(("ERROR", (f.rel_path, *problem)) for problem in f.provenance)
    return out


def _random_vault_facts(
    rng: random.Random,
) -> tuple[list[SignalFile], list[tuple[str, str]]]:
    """Facts of 400 files and an index of its own: copies, files without rows, rows without
    files, rows naming another id, unreadable files, names that claim no id, broken
    provenance, and names Python's regex reads as ids (digits of other scripts)."""
    files: dict[str, SignalFile] = {}
    index_rows: dict[str, tuple[str, str]] = {}  # identity -> (signal id, identity): UNIQUE
    for i in range(400):
        identity = f"{rng.randrange(300):016x}"
        sid = f"20261130T120000Z-{identity}"
        kind = rng.random()
        stem = sid if kind > 0.05 else f"copy of {sid}-{i}"
        declared: str | None = sid if kind > 0.02 else None
        if kind < 0.01:
            stem, declared = f"notes-{i} é", None  # no identity at all
        elif kind < 0.015:
            stem, declared = f"٢٠٢٦١١٣٠T120000Z-{identity}", None  # \d matches these digits
        error = "no frontmatter" if rng.random() < 0.02 else None
        if error is not None:
            declared = None
        provenance: tuple[tuple[str, str], ...] = ()
        if error is None and rng.random() < 0.03:
            provenance = (("sourceId, itemUrl", "missing or empty"), ("id", "declares 'x'"))
        files[stem] = SignalFile(f"Radar/Signals/{stem}.md", stem, declared, error, provenance, 10)
        if rng.random() < 0.8:
            named = sid if rng.random() > 0.05 else f"20250101T000000Z-{identity}"
            index_rows.setdefault(identity, (named, identity))
    for _ in range(30):  # rows whose file is gone
        identity = f"{1000 + rng.randrange(40):016x}"
        index_rows[identity] = (f"20261130T120000Z-{identity}", identity)
    return sorted(files.values(), key=lambda f: f.stem + ".md"), sorted(index_rows.values())


def _store_with(tmp_path: Path, files: list[SignalFile], rows: list[tuple[str, str]]) -> Store:
    store = fresh_store(tmp_path, "duckdb")
    with store.transaction() as con:
        facts = [(f.stem + ".md", (i, 1, 1, 1), f) for i, f in enumerate(files)]
        rng = random.Random(len(rows))
        record_facts(con, list(reversed(facts)))  # stored order must not matter
        for i, (signal_id, identity) in enumerate(rows):
            con.execute(
                "INSERT INTO signals (signal_id, identity, identity_version, source_id, "
                "source_item_id, canonical_url, title_key, content_hash, simhash, "
                "first_seen_at, file_path) VALUES ($1, $2, 1, 's', $3, $4, 't', 'h', $5, $6, $7)",
                [signal_id, identity, f"i{i}", f"u{i}", rng.getrandbits(63), NOW, "x.md"],
            )
    return store


@pytest.mark.parametrize("seed", range(6))
def test_set_query_audits_equal_the_plain_python_audits(tmp_path: Path, seed: int) -> None:
    """Idempotency, agreement and provenance as DuckDB set queries over the stored facts and
    the index give the findings, in the order, and the figures of the plain Python audits."""
    files, rows = _random_vault_facts(random.Random(seed))
    store = _store_with(tmp_path, files, rows)
    with store.transaction() as con:
        open_facts(con, tmp_path)  # the stored facts as they are (no folder update)
        idempotency = audit_idempotency(con)
        agreement = audit_agreement(con)
        provenance = audit_provenance(con)
    expected = _plain_idempotency(files, rows)
    assert [(f.severity, f.cells) for f in idempotency.findings] == expected
    identified = [f for f in files if f.identity is not None]
    assert dict(idempotency.figures) == {
        "identities": len({f.identity for f in identified}),
        "files": len(identified),
    }
    problems = {cells[-1].split(" ")[0] for _, cells in expected}
    assert {"several", "index", "no"} <= problems  # every kind of finding was exercised
    assert any(f.stem.startswith("٢") and f.identity for f in files)

    assert [(f.severity, f.cells) for f in agreement.findings] == _plain_agreement(files, rows)
    in_vault = {f.declared_id or f.stem for f in files}
    in_index = {signal_id for signal_id, _ in rows}
    assert dict(agreement.figures) == {
        "vault": len(in_vault),
        "index": len(in_index),
        "common": len(in_vault & in_index),
    }
    assert [(f.severity, f.cells) for f in provenance.findings] == _plain_provenance(files)
    assert provenance.findings and dict(provenance.figures)["signals"] == len(files)
