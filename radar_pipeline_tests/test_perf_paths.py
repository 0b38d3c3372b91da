"""The fast paths give the same answers as the plain ones: parsing on the parse workers, Signal
and health writes on threads, and the evidence audits' persisted per-file facts (written by the
collection, refreshed on change)."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from radar_pipeline.core.audit.run import run_audit, run_audits
from radar_pipeline.core.audit.signal_audits import (
    audit_agreement,
    audit_idempotency,
    audit_provenance,
)
from radar_pipeline.core.collect.signal_files import SignalWrite, WrittenSignal, write_signals
from radar_pipeline.core.collect.workers import (
    MIN_PARALLEL_BODIES,
    RENDER_CHUNK,
    ParseJob,
    ParseWorkers,
    parse_job,
)
from radar_pipeline.core.config import RadarPaths, Settings
from radar_pipeline.core.errors import VaultError
from radar_pipeline.core.identity.dedupe import PENDING_PREFIX, SIMHASH_DISTANCE, DedupeBatch
from radar_pipeline.core.identity.keys import (
    MIN_SUBSTANTIVE_WORDS,
    hamming64,
    is_substantive,
    word_count,
)
from radar_pipeline.core.models import ItemCandidate
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.store.migrations import SCHEMA_VERSION
from radar_pipeline.core.vault import index
from radar_pipeline.core.vault.facts import (
    FactsUpdate,
    SignalFile,
    _read_one,
    facts_key,
    gather_facts,
    open_facts,
)
from radar_pipeline.core.vault.health import HealthUpdate, write_health
from radar_pipeline.core.vault.signals import SignalDocument
from radar_pipeline_tests.conftest import (
    CORPUS_REAL,
    collect_stages,
    env_store,
    store_url_under_test,
)
from radar_pipeline_tests.feedserver import FeedServer, conditional
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source, write_source

RADAR = str(Path(sys.executable).parent / "radar")
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BOMB = (
    b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa">'
    b'<!ENTITY b "&a;&a;&a;&a;">]><rss version="2.0"><channel><item><title>&b;</title>'
    b"<link>https://example.com/x</link></item></channel></rss>"
)


def _jobs() -> list[ParseJob]:
    bodies = [p.read_bytes() for p in sorted(CORPUS_REAL.glob("*.xml"))]
    bodies += [BOMB, b"not a feed at all", b""]
    return [
        ParseJob(f"s{i}", body, "https://example.com/feed.xml", "application/xml", NOW, None)
        for i, body in enumerate(bodies)
    ]


def test_workers_parse_exactly_like_the_plain_path() -> None:
    jobs = _jobs()
    assert len(jobs) >= MIN_PARALLEL_BODIES
    with ParseWorkers(2) as workers:
        on_workers = workers.parse_all(jobs)
    assert on_workers == [parse_job(job) for job in jobs]
    assert sum(1 for o in on_workers if o.parsed is not None) == len(jobs) - 3
    assert on_workers[-3].error_class == "invalid-xml"  # the entity bomb is refused
    assert on_workers[-2].error_class == "not-a-feed"


def test_workers_start_in_a_threaded_process_and_inherit_nothing() -> None:
    """Spawned, not forked: a process with threads (a Dagster run) may start them, and a worker
    holds none of its parent's modules, locks or files."""
    import threading

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        with ParseWorkers(2) as workers:
            workers.warm_up()
            children = multiprocessing.active_children()
            assert len(children) >= 2
            outcomes = workers.parse_all(_jobs())
        assert outcomes == [parse_job(job) for job in _jobs()]
        assert not any(c.is_alive() for c in children)  # closed: every worker joined
    finally:
        stop.set()
        thread.join()


def test_a_worker_killed_mid_parse_loses_no_feed() -> None:
    jobs = _jobs()
    with ParseWorkers(2) as workers:
        workers.warm_up()
        [victim, *_] = workers.processes  # this pool's, whatever other children there are
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(timeout=30)
        # The broken pool's bodies are parsed in this process instead: same outcomes.
        assert workers.parse_all(jobs) == [parse_job(job) for job in jobs]


def test_a_pool_a_dead_worker_broke_is_renewed_for_the_next_slice() -> None:
    """A step's parse workers serve its slices in turn: after a worker died, the next slice
    gets a new pool (not in-process parsing for the rest of the step), whose workers parse
    exactly as before."""
    jobs = _jobs()
    with ParseWorkers(2) as workers:
        workers.warm_up()
        before = workers.processes
        [victim, *_] = before
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        victim.join(timeout=30)
        assert workers.parse_all(jobs) == [parse_job(job) for job in jobs]
        workers.renew_if_broken()  # between two slices
        assert all(not p.is_alive() for p in before)
        workers.warm_up()
        after = workers.processes
        assert len(after) == 2 and all(p.is_alive() for p in after), after
        assert {p.pid for p in after}.isdisjoint({p.pid for p in before})
        futures = [workers.submit(job) for job in jobs]
        assert all(f is not None for f in futures)
        assert [f.result() for f in futures if f is not None] == [parse_job(j) for j in jobs]


def test_closing_ends_a_worker_that_does_not_exit_on_the_pools_sigterm() -> None:
    """After a worker dies, the pool ends the others with SIGTERM and joins them without a
    timeout: one that does not exit on it (here: stopped) must not hold the collection.
    Closing kills only the pool's own workers: another child of the process lives on."""
    import threading
    import time

    jobs = _jobs()
    expected = [parse_job(job) for job in jobs]
    bystander = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(120,))
    bystander.start()
    workers = ParseWorkers(2, close_timeout_s=1.0)
    started: tuple[multiprocessing.process.BaseProcess, ...] = ()
    try:
        workers.warm_up()
        assert workers.parse_all(jobs) == expected  # both workers are started by now
        started = workers.processes
        stopped, victim = started
        assert stopped.pid is not None and victim.pid is not None
        os.kill(stopped.pid, signal.SIGSTOP)
        os.kill(victim.pid, signal.SIGKILL)
        assert workers.parse_all(jobs) == expected  # the broken pool's bodies parsed here
        closing = threading.Thread(target=workers.close, daemon=True)
        closing.start()
        closing.join(60)
        assert not closing.is_alive(), "close() waited on the stopped worker"
        assert not any(worker.is_alive() for worker in (stopped, victim))
        assert bystander.is_alive()
    finally:  # a failed run leaves no stopped process behind
        for child in (*started, bystander):
            if child.is_alive():
                child.kill()
                child.join()


def test_bodies_handed_over_during_the_fetch_are_parsed_once_and_alike() -> None:
    """The fetch stage submits each body as it arrives; `parse_all` awaits those futures and
    parses the others: the outcomes are the plain path's, in order."""
    jobs = _jobs()
    with ParseWorkers(2) as workers:
        workers.warm_up()
        started = {i: f for i in range(0, len(jobs), 2) if (f := workers.submit(jobs[i]))}
        assert len(started) == (len(jobs) + 1) // 2
        assert workers.parse_all(jobs, started) == [parse_job(job) for job in jobs]
    assert ParseWorkers(2).submit(jobs[0]) is None  # no running pool: parse_all parses it


def test_signals_rendered_on_the_workers_equal_those_rendered_here() -> None:
    docs = _documents(2 * RENDER_CHUNK + 7)
    with ParseWorkers(2) as workers:
        assert [call() for call in workers.render_all(docs[:3])] == [
            d.render() for d in docs[:3]
        ]  # too few for the workers: rendered where called
        workers.warm_up()
        assert [call() for call in workers.render_all(docs)] == [d.render() for d in docs]


def test_is_substantive_decides_as_the_full_word_count_does() -> None:
    """It normalises only a prefix cut before an ASCII space; the answer must be the one the
    whole text's word count gives, whatever characters meet at the cut."""
    rng = random.Random(30)
    pieces = [
        "word",
        "é",
        " ",
        "  ",
        "\u0301",
        "\u00a0",
        "\ufb01",
        "\u2460",
        "\u3000",
        "\n",
        "-",
        "x" * 60,
        " " * 40,
        "\uff8a\uff9f",
        "\u1100\u1161",
    ]
    for _ in range(3000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 900)))
        assert is_substantive(text) == (word_count(text) >= MIN_SUBSTANTIVE_WORDS), text[:80]


def _radar(env: dict[str, Path], *args: str) -> subprocess.CompletedProcess[str]:
    environ = {
        **os.environ,
        "RADAR_VAULT": str(env["vault"]),
        "RADAR_DB": str(env["db"]),
        "DAGSTER_HOME": str(env["home"]),
    }
    return subprocess.run([RADAR, *args], capture_output=True, text=True, env=environ, timeout=180)


def test_cli_collection_parses_on_the_workers_and_keeps_failures_per_source(
    radar_env: dict[str, Path],
) -> None:
    vault = radar_env["vault"]
    for i in range(5):  # enough bodies for the parse workers
        items = [
            {"title": f"Item {i}-{j}", "guid": f"g{i}-{j}", "link": f"https://e.com/{i}/{j}"}
            for j in range(3)
        ]
        write_fixture_source(vault, f"ok-{i}", rss(items))
    write_fixture_source(vault, "bomb", BOMB)
    done = _radar(radar_env, "collect", "--all", "--json")
    assert done.returncode == 2, done.stderr  # the bomb's Source failed, alone
    report = json.loads(done.stdout)
    assert (report["created"], report["passed"], report["failed"]) == (15, 5, 1)
    [bomb] = [s for s in report["sources"] if s["id"] == "bomb"]
    assert (bomb["errorStage"], bomb["errorClass"]) == ("parse", "invalid-xml")
    assert bomb["error"].startswith("parse: invalid-xml: the feed declares XML entities")
    assert all(report["checks"].values()), report["checks"]
    assert "Traceback" not in done.stderr


def test_facts_written_by_the_collection_equal_a_fresh_read_and_follow_edits(
    radar_env: dict[str, Path],
) -> None:
    vault = radar_env["vault"]
    items = [
        {
            "title": f"T{j}",
            "guid": f"g{j}",
            "link": f"https://e.com/{j}",
            "description": f"Body {j} " * (j + 1),
        }
        for j in range(4)
    ]
    write_fixture_source(vault, "fx", rss(items))
    assert _radar(radar_env, "collect", "--all", "--json").returncode == 0
    store = env_store()
    known = _stored_facts(store)
    files = signal_files(vault)
    assert len(files) == 4
    assert sorted(known) == sorted(p.name for p in files)
    for path in files:  # what the collection recorded is what reading the file finds
        assert known[path.name] == _read_one(path, path.name)

    paths = Settings.from_env().paths
    assert run_audit("provenance", paths, NOW).passed
    # A person breaks one file's provenance: its stat changes, so it is read again.
    edited = files[0]
    text = edited.read_text(encoding="utf-8")
    edited.write_text(text.replace("requestedUrl:", "requestedURL:"), encoding="utf-8")
    result = run_audit("provenance", paths, NOW)
    assert not result.passed
    assert [f.cells[:2] for f in result.findings] == [
        (f"Radar/Signals/{edited.name}", "requestedUrl")
    ]
    # The same size with its mtime put back (`touch -r`, `cp -p`): ctime still tells.
    sneaky = files[2]
    before = sneaky.stat()
    sneaky_text = sneaky.read_text(encoding="utf-8")
    assert "sourceId: fx" in sneaky_text
    sneaky.write_text(sneaky_text.replace("sourceId: fx", "sourceXd: fx"), encoding="utf-8")
    os.utime(sneaky, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = sneaky.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    result = run_audit("provenance", paths, NOW)
    assert f"Radar/Signals/{sneaky.name}" in {f.cells[0] for f in result.findings}
    sneaky.write_text(sneaky_text, encoding="utf-8")
    # A file that cannot be read is kept with its error, and read again at each check, even
    # when its stat says it did not change (the cause may pass).
    unreadable = files[3]
    unreadable_text = unreadable.read_text(encoding="utf-8")
    unreadable.write_text("no frontmatter here\n", encoding="utf-8")
    result = run_audit("provenance", paths, NOW)
    assert (f"Radar/Signals/{unreadable.name}", "all") in {f.cells[:2] for f in result.findings}
    assert _stored_facts(store)[unreadable.name].error is not None
    with store.transaction() as con:  # as if a passing I/O error had been the cause
        con.execute(
            "UPDATE audit_signal_files SET error = 'I/O error' WHERE name = $1", [files[0].name]
        )
    unreadable.write_text(unreadable_text, encoding="utf-8")
    run_audit("provenance", paths, NOW)
    known = _stored_facts(store)
    assert known[unreadable.name] == _read_one(unreadable, unreadable.name)
    assert known[files[0].name] == _read_one(files[0], files[0].name)
    # A deleted file's facts go too.
    files[1].unlink()
    run_audit("provenance", paths, NOW)
    assert files[1].name not in _stored_facts(store)
    # `radar index rebuild` reads every file anyway: it replaces their facts from that read.
    with store.transaction() as con:
        con.execute("UPDATE audit_signal_files SET error = 'stale'")
    assert index.rebuild(store, vault, datetime.now(UTC)).indexed == 3
    rebuilt = _stored_facts(store)
    assert sorted(rebuilt) == sorted(p.name for p in signal_files(vault))
    for path in signal_files(vault):
        assert rebuilt[path.name] == _read_one(path, path.name)
    assert rebuilt[edited.name].provenance  # the broken one stays broken


def _stored_facts(store: Store) -> dict[str, SignalFile]:
    """The `audit_signal_files` rows, as the SignalFile each one records."""
    with store.transaction() as con:
        rows = con.execute(
            "SELECT name, declared_id, error, provenance, body_length, identity "
            "FROM audit_signal_files"
        ).fetchall()
    out: dict[str, SignalFile] = {}
    for name, declared, error, provenance, length, identity in rows:
        problems = tuple((a, b) for a, b in json.loads(provenance)) if provenance else ()
        facts = SignalFile(f"Radar/Signals/{name}", name[:-3], declared, error, problems, length)
        assert identity == facts.identity  # the stored identity is the one Python gives
        out[name] = facts
    return out


def _scan_twin(
    pending: list[tuple[str, ItemCandidate, str | None]], source_id: str, cand: ItemCandidate
) -> str | None:
    """The original definition: the first pending item, in order, that matches."""
    for sid, other, _ in pending:
        if sid == source_id and (
            other.canonical_url == cand.canonical_url
            or (
                is_substantive(cand.content or cand.summary)
                and other.content_hash == cand.content_hash
            )
        ):
            return f"{PENDING_PREFIX}{other.identity}"
    return None


def _scan_near(
    pending: list[tuple[str, ItemCandidate, str | None]], cand: ItemCandidate
) -> str | None:
    day = cand.observed_at.date() if cand.observed_at else None
    for _, other, flag in pending:
        other_day = other.observed_at.date() if other.observed_at else None
        if (day is not None and other.title_key == cand.title_key and other_day == day) or (
            cand.simhash and hamming64(other.simhash, cand.simhash) <= SIMHASH_DISTANCE
        ):
            return flag or f"{PENDING_PREFIX}{other.identity}"
    return None


def test_indexed_batch_answers_what_a_scan_in_order_answers() -> None:
    rng = random.Random(11)
    batch = DedupeBatch()
    pending: list[tuple[str, ItemCandidate, str | None]] = []
    base = rng.getrandbits(64)
    for i in range(3000):
        source = f"s{rng.randrange(4)}"
        # Few distinct URLs, hashes, titles and days, and simhashes a few bits apart, so
        # every kind of match (and ties between kinds) happens often.
        simhash = (
            0
            if rng.random() < 0.05
            else base ^ sum(1 << rng.randrange(64) for _ in range(rng.randrange(6)))
        )
        cand = ItemCandidate(
            source_item_id=f"i{i}",
            title="t",
            link="https://e.com/",
            canonical_url=f"https://e.com/{rng.randrange(400)}",
            identity=f"{i:016x}",
            observed_at=None if rng.random() < 0.2 else NOW - timedelta(days=rng.randrange(30)),
            observed_field=None,
            future_dated=False,
            summary="" if rng.random() < 0.3 else "s" if rng.random() < 0.3 else "s " * 12,
            content=None,
            content_hash=f"h{rng.randrange(300)}",
            title_key=f"k{rng.randrange(200)}",
            simhash=simhash if rng.random() < 0.5 else rng.getrandbits(64),
            position=i,
        )
        assert batch.twin(source, cand) == _scan_twin(pending, source, cand), i
        assert batch.near(cand) == _scan_near(pending, cand), i
        if rng.random() < 0.6:
            flag = None if rng.random() < 0.7 else f"sig-{i}"
            batch.add(source, cand, flag)
            pending.append((source, cand, flag))


def _documents(count: int) -> list[SignalDocument]:
    docs = []
    for i in range(count):
        signal_id = f"20261130T120000Z-{i:016x}"
        fm = {
            "entityType": "signal",
            "schemaVersion": 1,
            "id": signal_id,
            "title": f"Title {i} [[link]] <script>",
            "sourceId": f"src-{i % 3}",
            "sourceItemId": f"item-{i}",
            "sourceRecord": f"Radar/Sources/src-{i % 3}.md",
            "requestedUrl": "https://e.com/feed.xml",
            "itemUrl": f"https://e.com/{i}",
            "canonicalUrl": f"https://e.com/{i}",
            "collectionMethod": "rss",
            "fetchedAt": "2026-11-30T12:00:00Z",
            "httpStatus": 200 if i % 7 else None,  # some miss a provenance field
            "validationState": "valid",
            "publishedAt": None,
        }
        docs.append(SignalDocument(signal_id, fm, f"Summary {i} " * (i % 50)))
    return docs


def test_signal_writes_create_each_file_once_with_its_facts(tmp_path: Path) -> None:
    docs = _documents(60)
    batches = [
        [
            SignalWrite(d.signal_id[-16:], d, ("title", "full text") if i % 2 else None)
            for i, d in enumerate(docs[j : j + 20])
        ]
        for j in range(0, 60, 20)
    ]
    results = write_signals(tmp_path, batches)
    flat = [r for batch in results for r in batch]
    assert [r.signal_id for r in flat] == [d.signal_id for d in docs]
    assert {r.outcome for r in flat} == {"created"}
    assert sum(1 for r in flat if r.temporary_bytes > 0) == 30  # full text kept for half
    folder = tmp_path / "Radar" / "Signals"
    for r in flat:
        assert r.facts is not None
        name, key, found = r.facts
        info = (folder / name).stat()
        assert key == facts_key(info)
        assert found == _read_one(folder / name, name)
    assert any(r.facts is not None and r.facts[2].provenance for r in flat)
    again = write_signals(tmp_path, batches)
    assert {r.outcome for batch in again for r in batch} == {"reused"}
    assert all(r.facts is None for batch in again for r in batch)


def test_grouped_signal_writes_equal_single_ones_and_a_failed_batch_leaves_no_temp_file(
    tmp_path: Path,
) -> None:
    """A batch made durable together (one file-system sync) writes the same files, outcomes
    and facts as one made durable file by file; a batch that fails part way (a malformed
    Signal id) raises and leaves no temp file in the Signals folder."""
    docs = _documents(40)
    batches = [[SignalWrite(d.signal_id[-16:], d) for d in docs[j : j + 10]] for j in (0, 10, 20)]
    grouped = write_signals(tmp_path / "grouped", batches, group_min=1)
    single = write_signals(tmp_path / "single", batches, group_min=10**6)

    def seen(written: list[list[WrittenSignal]]) -> list[tuple[object, ...]]:
        # The facts' stat key differs between two folders; the names and readings may not.
        return [
            (r.identity, r.signal_id, r.outcome, r.facts and (r.facts[0], r.facts[2]))
            for batch in written
            for r in batch
        ]

    assert seen(grouped) == seen(single)
    for name in (r.signal_id + ".md" for batch in grouped for r in batch):
        a = (tmp_path / "grouped" / "Radar" / "Signals" / name).read_bytes()
        assert a == (tmp_path / "single" / "Radar" / "Signals" / name).read_bytes()
    bad = SignalDocument("not-an-id", dict(docs[30].fields()), "text")
    broken = [[SignalWrite(d.signal_id[-16:], d) for d in docs[30:]] + [SignalWrite("x", bad)]]
    with pytest.raises(VaultError):
        write_signals(tmp_path / "broken", broken, group_min=1)
    folder = tmp_path / "broken" / "Radar" / "Signals"
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]

    def interrupted(documents: Sequence[SignalDocument]) -> list[Callable[[], str]]:
        # One text whose rendering is interrupted (Dagster stops a run with a BaseException).
        calls: list[Callable[[], str]] = [d.render for d in documents]
        calls[5] = _interrupt
        return calls

    with pytest.raises(KeyboardInterrupt):
        write_signals(tmp_path / "stopped", batches, interrupted, group_min=1)
    folder = tmp_path / "stopped" / "Radar" / "Signals"
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]


def _interrupt() -> str:
    raise KeyboardInterrupt


def _source_notes(folder: Path, count: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    notes = []
    for i in range(count):
        note = folder / f"s{i}.md"
        note.write_text(f"---\nid: s{i}\n# kept\nlastCheckedAt:\n---\nBody {i}\n", "utf-8")
        notes.append(note)
    return notes


def test_health_mirrors_update_each_file_and_report_failures(tmp_path: Path) -> None:
    notes = _source_notes(tmp_path / "Sources", 8)
    notes[3].write_text("---\nid: [broken\n---\n", "utf-8")  # a person's typo
    updates = [
        HealthUpdate(
            f"s{i}", note, f"Sources/s{i}.md", {"lastCheckedAt": f"2026-11-30T12:0{i}:00Z"}
        )
        for i, note in enumerate(notes)
    ]
    failures = write_health(updates)
    assert [(f.source_id, f.record_path) for f in failures] == [("s3", "Sources/s3.md")]
    assert "broken frontmatter" in failures[0].error
    for i, note in enumerate(notes):
        if i != 3:
            expected = f"---\nid: s{i}\n# kept\nlastCheckedAt: '2026-11-30T12:0{i}:00Z'\n---\n"
            assert note.read_text("utf-8") == expected + f"Body {i}\n"


def test_migration_6_keeps_the_facts_of_declared_ids_and_reads_the_rest_again(
    radar_env: dict[str, Path],
) -> None:
    """A database of schema 5 (facts without identities): the rows with a declared id keep
    their facts and gain the identity Python gives; the others are read again at the next
    check, which then judges every file as a fresh read would."""
    if store_url_under_test():  # PostgreSQL schemas start at version 11 (migrations.py)
        pytest.skip("a migration of the DuckDB file")
    vault, db = radar_env["vault"], radar_env["db"]
    _collect_items(radar_env, 3)
    files = signal_files(vault)
    copy = files[0].parent / "a copy.md"
    copy.write_text(files[0].read_text(encoding="utf-8"), encoding="utf-8")
    paths = RadarPaths(vault=vault, db=db)
    assert not run_audit("idempotency", paths, NOW).passed  # the copy shares an identity
    # Back to schema 5, as the previous version left it: no identity column.
    with Store(db).transaction() as con:
        con.execute(
            "UPDATE audit_signal_files SET declared_id = NULL WHERE name = $1", [files[1].name]
        )
        con.execute("ALTER TABLE audit_signal_files DROP COLUMN identity")
        con.execute("ALTER TABLE audit_signal_files DROP COLUMN temporary_text")
        # The tables and columns of migrations 7 to 15 go too, so 6 to 15 are applied again.
        con.execute("DROP TABLE check_accounting; DROP TABLE duplicate_items")
        con.execute("DROP TABLE source_items")
        con.execute("ALTER TABLE feed_state DROP COLUMN polite_until")
        con.execute("DROP TABLE field_evidence")
        con.execute("DROP TABLE page_state; DROP TABLE robots_cache")
        con.execute("DROP TABLE vault_folder_state")
        con.execute("DROP TABLE collection_slices")
        con.execute(
            "CREATE TABLE signals_v11 AS SELECT * EXCLUDE (link_fragment) FROM signals; "
            "DROP TABLE signals; ALTER TABLE signals_v11 RENAME TO signals"
        )
        con.execute("DELETE FROM schema_migrations WHERE version >= 6")
    Store.forget_migrations()

    assert Store(db).schema_version() == SCHEMA_VERSION
    with Store(db).transaction() as con:
        stored = dict(con.execute("SELECT name, identity FROM audit_signal_files").fetchall())
    # The copy declares its original's id: it keeps its facts; the row that lost its declared
    # id is gone until the next check reads its file again.
    assert stored == {
        files[0].name: files[0].name[-19:-3],
        files[2].name: files[2].name[-19:-3],
        copy.name: files[0].name[-19:-3],
    }
    result = run_audit("idempotency", paths, NOW)
    assert [f.cells[:3] for f in result.findings] == [(files[0].name[-19:-3], "2", "1")]
    assert dict(result.figures) == {"identities": 3, "files": 4}
    assert _stored_facts(store=Store(db)).keys() == {p.name for p in signal_files(vault)}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="names that are not UTF-8")
def test_names_that_are_not_utf8_are_audited_with_their_bytes_escaped(
    radar_env: dict[str, Path],
) -> None:
    """The store holds only UTF-8: a file whose name is not (Linux allows any bytes) is stored and
    reported with its bytes escaped, never the reason the checks cannot run."""
    vault = radar_env["vault"]
    _collect_items(radar_env, 1)
    (signal,) = signal_files(vault)
    folder = os.fsencode(signal.parent)
    with open(folder + b"/copy\xff.md", "wb") as handle:  # a copy under a name not UTF-8
        handle.write(signal.read_bytes())
    with open(folder + b"/notes\xfe.md", "wb") as handle:  # and a file that is no Signal
        handle.write(b"no frontmatter\n")
    # A name that is UTF-8 and reads like the copy's escaped one: still a file of its own.
    (signal.parent / "copy\\xff.md").write_text("no frontmatter either\n", encoding="utf-8")
    paths = Settings.from_env().paths
    for _ in range(2):  # reading the files, then from the stored facts
        audits = run_audits(paths, NOW, ("idempotency", "provenance", "agreement"))
        idempotency = [f.cells for f in audits["idempotency"].findings]
        assert idempotency == [
            (
                signal.name[-19:-3],
                "2",
                "1",
                f"Radar/Signals/{signal.name}, Radar/Signals/copy\\xff.md",
                "several files share this identity",
            ),
            ("–", "1", "0", "Radar/Signals/copy\\xff.md", "no Signal id to identify"),
            ("–", "1", "0", "Radar/Signals/notes\\xfe.md", "no Signal id to identify"),
        ]
        provenance = sorted(f.cells[:2] for f in audits["provenance"].findings)
        assert provenance == [
            ("Radar/Signals/copy\\xff.md", "all"),
            ("Radar/Signals/copy\\xff.md", "id"),
            ("Radar/Signals/notes\\xfe.md", "all"),
        ]
        assert dict(audits["provenance"].figures)["signals"] == 4
        agreement = [f.cells for f in audits["agreement"].findings]
        assert agreement == [
            ("copy\\xff", "yes", "no", "not indexed yet (the next collection repairs it)"),
            ("notes\\xfe", "yes", "no", "not indexed yet (the next collection repairs it)"),
        ]


def test_a_check_listing_the_folder_before_a_collection_keeps_the_new_files_facts(
    radar_env: dict[str, Path],
) -> None:
    """A check lists the folder, a collection then commits new Signals with their facts and
    index rows, and only then does the check read the stored facts: to its listing those files
    are gone. Their rows stay (each file still exists), so the check's own audits judge them
    with their index rows instead of reporting index rows without files."""
    vault = radar_env["vault"]
    _collect_items(radar_env, 3)
    new = sorted(p.name for p in signal_files(vault))
    stale_listing = FactsUpdate(True, {})  # listed before they existed
    with env_store().transaction() as con:
        open_facts(con, vault, stale_listing)
        results = [audit_idempotency(con), audit_agreement(con)]
    assert [(r.passed, dict(r.figures)) for r in results] == [
        (True, {"identities": 3, "files": 3}),
        (True, {"vault": 3, "index": 3, "common": 3}),
    ]
    assert sorted(_stored_facts(env_store())) == new
    # A file that is really gone loses its row.
    (vault / "Radar" / "Signals" / new[0]).unlink()
    with env_store().transaction() as con:
        open_facts(con, vault, FactsUpdate(True, {}))
        agreement = audit_agreement(con)
    assert [f.cells[0] for f in agreement.findings] == [new[0][:-3]]
    assert sorted(_stored_facts(env_store())) == new[1:]


def test_a_row_removed_after_the_listing_is_read_again_in_the_checks_transaction(
    radar_env: dict[str, Path],
) -> None:
    """`radar index rebuild` between a check's listing and its transaction keeps only the
    facts of the files it indexes: the check reads the other listed files again there, and
    still reports the copy and the unreadable file (or a folder that stopped being one, as no
    error)."""
    vault = radar_env["vault"]
    _collect_items(radar_env, 2)
    first, second = signal_files(vault)
    copy = first.parent / "a copy.md"
    copy.write_text(first.read_text(encoding="utf-8"), encoding="utf-8")
    second.write_text("no frontmatter\n", encoding="utf-8")
    store = env_store()
    run_audits(Settings.from_env().paths, NOW)  # every file's facts are stored
    update = gather_facts(vault, store)  # the check lists the folder ...
    assert [name for name, _, _ in update.fresh] == [second.name]  # unreadable: read each time
    index.rebuild(store, vault, datetime.now(UTC))  # ... a rebuild keeps only what it indexes ...
    assert sorted(_stored_facts(store)) == [first.name]
    with store.transaction() as con:  # ... then the check's transaction
        open_facts(con, vault, update)
        idempotency, provenance = audit_idempotency(con), audit_provenance(con)
    assert [f.cells[1:3] for f in idempotency.findings][:1] == [("2", "1")]
    assert dict(provenance.figures)["signals"] == 3
    assert (f"Radar/Signals/{second.name}", "all") in {f.cells[:2] for f in provenance.findings}
    assert sorted(_stored_facts(store)) == sorted([first.name, second.name, copy.name])


def test_a_signals_folder_that_became_a_file_does_not_break_the_checks(
    radar_env: dict[str, Path],
) -> None:
    vault = radar_env["vault"]
    _collect_items(radar_env, 1)
    store = env_store()
    (signal,) = signal_files(vault)
    gone = FactsUpdate(True, {})  # as listed before the change: an empty folder
    folder = signal.parent
    shutil.rmtree(folder)
    folder.write_text("not a folder\n", encoding="utf-8")
    with store.transaction() as con:
        open_facts(con, vault, gone)
        agreement = audit_agreement(con)
    assert [f.cells[3] for f in agreement.findings] == ["index row without a Signal file"]


def _collect_items(radar_env: dict[str, Path], count: int) -> None:
    """One Source serving `count` items, collected once by the command."""
    items = [
        {"title": f"T{j}", "guid": f"g{j}", "link": f"https://e.com/{j}"} for j in range(count)
    ]
    write_fixture_source(radar_env["vault"], "fx", rss(items))
    assert _radar(radar_env, "collect", "--all", "--json").returncode == 0


def test_parse_workers_start_only_for_bodies_to_parse(
    radar_env: dict[str, Path], feed_server: FeedServer, caplog: pytest.LogCaptureFixture
) -> None:
    """A cold collection starts the workers before its fetches (no validator to send: bodies
    will come); an unchanged re-run (every answer a 304) starts none; a re-run in which enough
    feeds changed starts them once that many bodies arrived."""
    import uuid

    from radar_pipeline.core.collect.collector import Collector
    from radar_pipeline.core.plan.collection import CollectionSpec

    bodies = {
        n: rss([{"title": f"t{n}", "guid": f"g{n}", "link": f"https://e.x/{n}"}]) for n in range(8)
    }
    for n in range(8):
        handler = conditional(bodies[n], f'"v{n}"', "Mon, 30 Nov 2026 10:00:00 GMT")
        write_source(radar_env["vault"], f"s{n}", feed_server.add(f"/{n}.xml", handler=handler))

    def started(as_of: datetime) -> tuple[int, dict[str, int]]:
        caplog.clear()
        workers_log = caplog.at_level(logging.DEBUG, logger="radar_pipeline.core.collect.workers")
        with workers_log, Collector(Settings.from_env(), parse_workers=2) as collector:
            report = collect_stages(
                collector, CollectionSpec(str(uuid.uuid4()), "all", as_of)
            ).json_object()
        starts = sum("parse workers started" in r.getMessage() for r in caplog.records)
        return starts, dict(Counter(s["outcome"] for s in report["sources"]))

    assert started(NOW) == (1, {"passed": 8})
    assert started(NOW + timedelta(hours=1)) == (0, {"not-modified": 8})
    for n in range(5):  # five feeds change: their bodies come, enough to start the workers
        feed_server.add(
            f"/{n}.xml",
            handler=conditional(
                rss([{"title": f"new {n}", "guid": f"h{n}", "link": f"https://e.x/h{n}"}]),
                f'"w{n}"',
                "Mon, 30 Nov 2026 11:00:00 GMT",
            ),
        )
    assert started(NOW + timedelta(hours=2)) == (1, {"passed": 5, "not-modified": 3})
