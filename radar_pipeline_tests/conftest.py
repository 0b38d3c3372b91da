"""Shared fixtures: a loopback feed server, a temp vault, the real corpus."""

from __future__ import annotations

import os
import socket
import urllib.parse
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import Settings
from radar_pipeline.core.contract.collection import CollectionReport
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.store.connection import Store, rows_as_dicts
from radar_pipeline_tests.feedserver import FeedServer

REPO_ROOT = Path(__file__).resolve().parents[1]
CORPUS = Path(__file__).resolve().parent / "corpus"  # provenance and licences: corpus/README.md
CORPUS_REAL = CORPUS / "real"
CORPUS_FEEDPARSER = CORPUS / "feedparser-tests"


@pytest.fixture
def feed_server() -> Iterator[FeedServer]:
    server = FeedServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def allow_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the fetcher reach the loopback test server (refused by default)."""
    monkeypatch.setenv("RADAR_ALLOWED_PRIVATE_HOSTS", "127.0.0.1,localhost")


# `make test-postgres` sets this to a PostgreSQL database: the tests that take `radar_env`
# then keep provenance there (RADAR_STORE_URL), in a schema emptied before each test.
TEST_STORE_URL_ENV = "RADAR_TEST_STORE_URL"


def store_url_under_test() -> str:
    """The PostgreSQL store the tests run against, or "" (the DuckDB file). Under pytest-xdist
    each worker has a database of its own on the same server (`<name>_<worker>`, created on
    first use), since every test empties its store's schema."""
    url = os.environ.get(TEST_STORE_URL_ENV, "")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return _worker_database(url, worker) if url and worker else url


def _worker_database(url: str, worker: str) -> str:
    import psycopg

    parts = urllib.parse.urlsplit(url)
    name = f"{parts.path.lstrip('/')}_{worker}"
    with psycopg.connect(url, autocommit=True) as con:
        exists = con.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            con.execute(f'CREATE DATABASE "{name}"')
    return urllib.parse.urlunsplit(parts._replace(path=f"/{name}"))


def empty_postgres_store(url: str) -> None:
    """Drop the store's schema at `url`: the next transaction migrates a fresh one. Under the
    migrations' own lock (a worker migrating it meanwhile finishes first, then its mark of
    "migrated" is forgotten with the schema)."""
    import psycopg

    from radar_pipeline.core.store.postgres import (
        MIGRATION_LOCK_KEY,
        SCHEMA,
        PostgresStoreBackend,
    )

    with PostgresStoreBackend.migrate_lock, psycopg.connect(url, autocommit=True) as con:
        con.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK_KEY])
        con.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        Store.forget_migrations()


@pytest.fixture
def radar_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A temp vault, DuckDB file and (empty) Dagster home, exported like a user would; with
    RADAR_TEST_STORE_URL set, an empty PostgreSQL store instead of the DuckDB file."""
    vault = tmp_path / "vault"
    (vault / "Radar" / "Sources").mkdir(parents=True)
    (vault / "Site Content").mkdir(parents=True)
    db = tmp_path / "radar.duckdb"
    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("RADAR_VAULT", str(vault))
    monkeypatch.setenv("RADAR_DB", str(db))
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("RADAR_ALLOWED_PRIVATE_HOSTS", "127.0.0.1,localhost")
    url = store_url_under_test()
    if url:
        empty_postgres_store(url)
        monkeypatch.setenv("RADAR_STORE_URL", url)
    else:
        monkeypatch.delenv("RADAR_STORE_URL", raising=False)
    return {"vault": vault, "db": db, "home": home, "root": tmp_path}


@pytest.fixture
def store(radar_env: dict[str, Path]) -> Store:
    """The store of `radar_env` (DuckDB, or PostgreSQL under RADAR_TEST_STORE_URL)."""
    return Store.of(Settings.from_env().paths)


def refused_store_url() -> str:
    """A PostgreSQL URL on a loopback port nothing listens on (bound, then closed): every
    connection to it is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://radar:pw@127.0.0.1:{port}/radar"


def new_collection_id() -> str:
    """A fresh collection id for a test that runs the Collector itself (a Dagster run's id
    is its run id)."""
    return uuid.uuid4().hex


def collect_stages(collector: Collector, spec: CollectionSpec) -> CollectionReport:
    """One collection through the Collector's stages in one call, in this process: plan,
    fetch, parse, dedupe, commit (the page pass included), then the locks released; what a
    slice step does (core/collect/slices.check_slice), for tests of the stages without
    Dagster."""
    plan = collector.plan(spec)
    try:
        return collector.commit(
            plan, collector.dedupe(collector.parse(plan, collector.fetch(plan)))
        )
    finally:
        collector.locks.release_all(spec.collection_id)


def env_store() -> Store:
    """The store the environment names, as `radar_env` exported it: the DuckDB file at
    RADAR_DB, or the PostgreSQL store at RADAR_STORE_URL. Tests read and change provenance
    through it with the store's own SQL, which runs on both (PostgreSQL has the same tables,
    in schema `radar`)."""
    return Store.of(Settings.from_env().paths)


def store_rows(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows `sql` gives on `env_store()`."""
    with env_store().transaction() as con:
        return con.execute(sql, list(params)).fetchall()


def store_dicts(sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """The rows `sql` gives on `env_store()`, each as a dict by column name."""
    with env_store().transaction() as con:
        return rows_as_dicts(con, sql, params)


def assert_not_stored(needle: str) -> None:
    """`needle` is in no text column of `env_store()`, and not in the bytes of a DuckDB file at
    RADAR_DB (DuckDB may compress strings on disk, so the byte grep alone could miss one)."""
    db = Settings.from_env().paths.db
    for path in db.parent.glob(db.name + "*"):
        assert needle.encode() not in path.read_bytes(), path
    # The store's own schema on either backend: `main` in DuckDB, `radar` in PostgreSQL.
    columns = store_rows(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND data_type IN ('VARCHAR', 'character varying')"
    )
    assert columns  # the query found the store's text columns
    with env_store().transaction() as con:
        for table, column in columns:
            row = con.execute(
                f'SELECT count(*) FROM "{table}" WHERE "{column}" LIKE $1', [f"%{needle}%"]
            ).fetchone()
            assert row is not None and row[0] == 0, (table, column)


def fresh_store(tmp_path: Path, name: str = "radar.duckdb") -> Store:
    """An empty store: the DuckDB file `tmp_path/name`, or under RADAR_TEST_STORE_URL the
    PostgreSQL store with its schema emptied."""
    url = store_url_under_test()
    if url:
        empty_postgres_store(url)
    return Store(tmp_path / name, url=url)
