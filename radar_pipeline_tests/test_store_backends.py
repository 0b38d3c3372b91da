"""The store's two backends: the embedded DuckDB file stays as it was (no PostgreSQL driver
loaded), the dialect translation of core/store/postgres.py, statement by statement, and the
evidence audits' verdicts on one vault state built on each."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from radar_pipeline.core.audit.run import run_audits
from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.errors import StoreError
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.store.connection import Store
from radar_pipeline.core.store.migrations import SCHEMA_VERSION
from radar_pipeline.core.store.postgres import postgres_text, redacted
from radar_pipeline_tests.conftest import (
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


def test_marks_and_percent_signs_are_translated_outside_quotes_only() -> None:
    sql = "SELECT a FROM t WHERE b = ? AND c LIKE 'pending:%' AND d = '?' AND e % 2 = ?"
    assert postgres_text(sql) == (
        "SELECT a FROM t WHERE b = %s AND c LIKE 'pending:%%' AND d = '?' AND e %% 2 = %s"
    )


def test_type_names_postgresql_spells_differently() -> None:
    assert postgres_text("CREATE TABLE t (h UBIGINT, d DOUBLE, p DOUBLE PRECISION)") == (
        "CREATE TABLE t (h NUMERIC(20), d DOUBLE PRECISION, p DOUBLE PRECISION)"
    )
    assert postgres_text("SELECT unnest(?::UBIGINT[]), unnest(?::DOUBLE[])") == (
        "SELECT unnest(%s::NUMERIC(20)[]), unnest(%s::DOUBLE PRECISION[])"
    )


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
    with Collector(paths) as collector:
        report = collector.run(spec).to_json()
    assert (report["created"], report["failed"]) == (5, 1), report
    first, second, third, fourth = signal_files(vault)[:4]
    shutil.copyfile(first, first.with_name(f"{first.stem} 1.md"))
    lines = second.read_text(encoding="utf-8").splitlines(keepends=True)
    second.write_text("".join(x for x in lines if not x.startswith("canonicalUrl:")))
    third.unlink()
    with Store.of(paths).transaction() as con:
        con.execute("DELETE FROM signals WHERE signal_id = ?", [fourth.stem])


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
    assert failed == ["agreement", "idempotency", "overdue", "provenance", "registry", "retention"]
