"""Shared fixtures: a loopback feed server, a temp vault, the real corpus."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from radar_pipeline.core.config import RadarPaths
from radar_pipeline.core.store.connection import Store
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
    """The PostgreSQL store the tests run against, or "" (the DuckDB file)."""
    return os.environ.get(TEST_STORE_URL_ENV, "")


def empty_postgres_store(url: str) -> None:
    """Drop the store's schema at `url`: the next transaction migrates a fresh one."""
    import psycopg

    from radar_pipeline.core.store.postgres import SCHEMA

    with psycopg.connect(url, autocommit=True) as con:
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
    return Store.of(RadarPaths.from_env())


def fresh_store(tmp_path: Path, name: str = "radar.duckdb") -> Store:
    """An empty store: the DuckDB file `tmp_path/name`, or under RADAR_TEST_STORE_URL the
    PostgreSQL store with its schema emptied."""
    url = store_url_under_test()
    if url:
        empty_postgres_store(url)
    return Store(tmp_path / name, url=url)
