"""Shared fixtures: a loopback feed server, a temp vault, the real corpus."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from radar_pipeline_tests.feedserver import FeedServer

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
CORPUS_REAL = SHARED / "corpus" / "real"
CORPUS_FEEDPARSER = SHARED / "corpus" / "feedparser-tests"


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
