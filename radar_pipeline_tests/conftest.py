"""Shared fixtures: a loopback feed server, a temp vault, the real corpus."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.fixture
def radar_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A temp vault, DuckDB file and (empty) Dagster home, exported like a user would."""
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
    return {"vault": vault, "db": db, "home": home, "root": tmp_path}
