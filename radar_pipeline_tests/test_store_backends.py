"""The store's two backends: the embedded DuckDB file stays as it was (no PostgreSQL driver
loaded), one schema for both (core/store/migrations.py), the dialect's own functions
(core/store/dialect.py) alike on each, and the evidence audits' verdicts on one vault state
built on each."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.audit.run import run_audits
from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import RadarPaths, Settings
from radar_pipeline.core.errors import StoreError, StoreLocked, explain
from radar_pipeline.core.layout import SIGNALS_DIR
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.store.dialect import arg_max, arg_min
from radar_pipeline.core.store.migrations import MIGRATIONS, SCHEMA_VERSION
from radar_pipeline.core.store.postgres import connect, redacted
from radar_pipeline_tests.conftest import (
    collect_stages,
    empty_postgres_store,
    refused_store_url,
    store_url_under_test,
)
from radar_pipeline_tests.evidencekit import content_rss
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import rss, signal_files, write_fixture_source, write_source

VERDICT_AS_OF = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

_NO_DRIVER = """
import sys
from radar_pipeline.cli import main
code = main(["collect", "--all", "--json"])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("psycopg", "psycopg2"))
loaded += [m for m in sys.modules if m == "radar_pipeline.core.store.postgres"]
print("LOADED", loaded, file=sys.stderr)
sys.exit(code)
"""


def test_embedded_collection_loads_no_postgresql_driver(radar_env: dict[str, Path]) -> None:
    if store_url_under_test():
        pytest.skip("the embedded profile only")
    write_fixture_source(radar_env["vault"], "fixture", rss([{"title": "A", "guid": "g"}]))
    env = {k: v for k, v in os.environ.items() if k != "RADAR_STORE_URL"}
    proc = subprocess.run(
        [sys.executable, "-c", _NO_DRIVER], capture_output=True, text=True, env=env, timeout=240
    )
    assert proc.returncode == 0, proc.stderr
    assert "LOADED []" in proc.stderr, proc.stderr
    assert radar_env["db"].exists()  # the DuckDB file at RADAR_DB holds the provenance


def _columns(con: Any, schema: str) -> list[tuple[str, str, str]]:
    rows = con.execute(
        "SELECT table_name, column_name, is_nullable FROM information_schema.columns "
        "WHERE table_schema = $1 ORDER BY table_name, column_name",
        [schema],
    ).fetchall()
    return [(str(t), str(c), str(n)) for t, c, n in rows]


def test_one_schema_serves_both_engines(tmp_path: Path) -> None:
    """The migrations DuckDB applies make, on PostgreSQL, the same tables with the same
    columns, and nothing else: no function of ours (nothing of one engine re-created in the
    other)."""
    url = store_url_under_test()
    if not url:
        pytest.skip("needs a PostgreSQL store: run `make test-postgres`")
    empty_postgres_store(url)
    duck, pg = Store(tmp_path / "radar.duckdb"), Store(tmp_path / "unused.duckdb", url=url)
    with duck.transaction() as con:
        embedded = _columns(con, "main")
    with pg.transaction() as con:
        team = _columns(con, "radar")
        functions = con.execute(
            "SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
            "WHERE n.nspname = 'radar'"
        ).fetchall()
    assert len(embedded) > 100
    assert team == embedded
    assert functions == []


def test_the_migrations_are_one_list_and_only_old_ones_backfill_on_duckdb_alone() -> None:
    """Versions 1 to SCHEMA_VERSION in order; a DuckDB-only backfill only before version 11,
    when PostgreSQL schemas began (they are made from empty tables); the two engines' DDL
    differ only in the unsigned 64-bit type."""
    assert [m.version for m in MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))
    assert all(m.version < 11 for m in MIGRATIONS if m.backfill)
    for m in MIGRATIONS:
        team = m.sql("postgresql")
        assert team == m.schema_sql("duckdb").replace("UBIGINT", "NUMERIC(20)")
        assert "{" not in team and "?" not in team


def test_arg_max_and_arg_min_read_alike_on_both_engines(store: Store) -> None:
    """`dialect.arg_max`/`arg_min` on whichever engine `store` is (make test-postgres runs
    this on PostgreSQL): the value at the greatest (least) key, rows where either is NULL
    left out, as DuckDB's own aggregates."""
    rows = [("a", "x", 1), ("a", None, 3), ("a", "y", 2), ("a", "z", None), ("b", None, 1)]
    with store.transaction() as con:
        con.execute("CREATE TEMP TABLE t (g VARCHAR, v VARCHAR, k INTEGER)")
        con.executemany("INSERT INTO t VALUES ($1, $2, $3)", rows)
        got = con.execute(
            f"SELECT g, {arg_max(con, 'v', 'k')}, {arg_min(con, 'v', 'k')} FROM t "
            "GROUP BY g ORDER BY g"
        ).fetchall()
        con.execute("DROP TABLE t")
    assert got == [("a", "y", "x"), ("b", None, None)]


def test_a_url_in_a_message_carries_no_password() -> None:
    assert (
        redacted("postgresql://radar:s3cret@db:5432/radar")
        == "postgresql://radar:***@db:5432/radar"
    )


def test_an_unreachable_postgresql_store_is_one_clear_error(tmp_path: Path) -> None:
    url = refused_store_url()
    store = Store.of(RadarPaths(tmp_path / "vault", tmp_path / "radar.duckdb", store_url=url))
    with pytest.raises(StoreError, match=r"cannot connect to the PostgreSQL store") as err:
        store.schema_version()
    assert "pw" not in str(err.value).replace("PostgreSQL", "")
    assert not (tmp_path / "radar.duckdb").exists()


def test_the_store_of_the_settings_is_migrated_at_start(store: Store) -> None:
    assert store.schema_version() == SCHEMA_VERSION
    assert bool(store.url) == bool(store_url_under_test())


def _broken_vault_state(paths: RadarPaths, server: FeedServer) -> None:
    """One vault state, built the same way on whichever store `paths` names: a collection at
    AS_OF (full text left under Temporary Content, a failing Source, an invalid Source file),
    then a vault broken on purpose: a second file of one identity, a Signal without its
    canonical URL, a Signal file deleted and another's index row."""
    vault = paths.vault
    items = [("a1", "First", "Full text one. " * 30), ("a2", "Second", "Full text two. " * 30)]
    write_fixture_source(vault, "full", content_rss(items), fullText="feed-content")
    plain = [{"title": f"P{n}", "guid": f"p{n}", "link": f"https://e.com/p{n}"} for n in "12"]
    write_fixture_source(vault, "plain", rss(plain))
    web = rss([{"title": "W", "guid": "w1", "link": "https://e.com/w1"}])
    write_source(vault, "web", server.add("/web.xml", web))
    write_source(vault, "down", server.add("/down.xml", b"no", status=503, headers={}))
    write_source(vault, "broken", "not a url")
    spec = CollectionSpec("same-collection", "all", VERDICT_AS_OF)
    # The environment's settings (the loopback allowed), on the vault and store of `paths`.
    settings = replace(
        Settings.from_env(), vault=paths.vault, db=paths.db, store_url=paths.store_url
    )
    with Collector(settings) as collector:
        report = collect_stages(collector, spec).json_object()
    assert (report["created"], report["failed"]) == (5, 1), report
    first, second, third, fourth = signal_files(vault)[:4]
    shutil.copyfile(first, first.with_name(f"{first.stem} 1.md"))
    lines = second.read_text(encoding="utf-8").splitlines(keepends=True)
    second.write_text("".join(x for x in lines if not x.startswith("canonicalUrl:")))
    third.unlink()
    with Store.of(paths).transaction() as con:
        con.execute("DELETE FROM signals WHERE signal_id = $1", [fourth.stem])
    # Broken an hour before the audits, not within the file system's clock tick of them: the
    # audits' listing then settles the Signals folder's state on either store, and the
    # retention walk's own figures (how much of the folder it listed) do not hang on how long
    # the DELETE above took.
    an_hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(vault / SIGNALS_DIR, ns=(an_hour_ago, an_hour_ago))


def test_the_evidence_audits_give_the_same_verdicts_on_both_backends(
    tmp_path: Path, feed_server: FeedServer, allow_loopback: None
) -> None:
    """The same vault state on the DuckDB file and on the PostgreSQL store: every audit's
    verdict, figures and table are the same on both, and the state is one that fails most."""
    url = store_url_under_test()
    if not url:
        pytest.skip("needs a PostgreSQL store: run `make test-postgres`")
    stores = {
        "duckdb": RadarPaths(tmp_path / "duckdb" / "vault", tmp_path / "duckdb" / "radar.duckdb"),
        "postgresql": RadarPaths(
            tmp_path / "postgresql" / "vault", tmp_path / "postgresql" / "radar.duckdb", url
        ),
    }
    verdicts = {}
    for name, paths in stores.items():
        if paths.store_url:
            empty_postgres_store(url)  # just before its half: nothing else runs in between
        _broken_vault_state(paths, feed_server)
        audits = run_audits(paths, VERDICT_AS_OF + timedelta(days=1))
        verdicts[name] = {
            audit: (result.passed, result.severity, result.figures, result.markdown())
            for audit, result in audits.items()
        }
    assert not (tmp_path / "postgresql" / "radar.duckdb").exists()  # it kept nothing there
    assert verdicts["postgresql"] == verdicts["duckdb"]
    failed = sorted(audit for audit, (passed, *_) in verdicts["duckdb"].items() if not passed)
    assert failed == [
        "agreement",
        "idempotency",
        "on_cadence",
        "overdue",
        "provenance",
        "registry",
        "retention",
    ]


def test_a_postgresql_lock_not_available_is_store_locked(tmp_path: Path) -> None:
    """psycopg's LockNotAvailable (SQLSTATE 55P03, a real lock held by another session past
    the statement's lock_timeout) leaves the store's transaction as StoreLocked naming the
    store's URL without its password."""
    url = store_url_under_test()
    if not url:
        pytest.skip("needs a PostgreSQL store: run `make test-postgres`")
    empty_postgres_store(url)
    store = Store(tmp_path / "unused.duckdb", url=url)
    store.schema_version()
    holder = connect(url)
    try:
        with holder.raw.transaction():
            holder.execute("LOCK TABLE schema_migrations IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreLocked) as raised, store.transaction() as con:
                con.execute("SET LOCAL lock_timeout = '50ms'")
                con.execute("SELECT count(*) FROM schema_migrations")
    finally:
        holder.close()
    why = explain(raised.value)
    assert why.error_class == "store-locked"
    assert why.line == (
        f"store {redacted(url)} is held by another process; retry when it has finished"
    )
