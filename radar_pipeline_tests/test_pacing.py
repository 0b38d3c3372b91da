"""Per-origin pacing of feed fetches (core/acquire/pacing): the queue's choices, and what real
loopback servers (one origin each) saw when `fetch_many` fetched from them."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path

import pytest

from radar_pipeline.core.acquire.fetch import Fetcher, FetchSettings, fetch_many
from radar_pipeline.core.acquire.pacing import PacedQueue, origin_of, paced_origin
from radar_pipeline.core.models import FetchRequest
from radar_pipeline_tests.feedserver import FeedServer, RequestHandler
from radar_pipeline_tests.vaultkit import rss

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
BODY = rss([{"title": "t", "guid": "g", "link": "https://example.com/t"}])


def test_origin_is_scheme_host_and_port() -> None:
    assert origin_of("https://Example.com/a/feed.xml?x=1") == "https://example.com"
    assert origin_of("https://example.com:443/feed") == "https://example.com"
    assert origin_of("http://example.com:8080/feed") == "http://example.com:8080"
    assert origin_of("http://example.com/a") != origin_of("https://example.com/a")


def test_fixture_and_vault_reads_are_not_paced() -> None:
    fixture = FetchRequest("fx", "Radar/Fixtures/feed.xml", "fixture")
    vault = FetchRequest("v", "Radar/page.html", "html", from_vault=True)
    feed = FetchRequest("f", "https://example.com/feed.xml", "rss")
    assert [paced_origin(r) for r in (fixture, vault, feed)] == [None, None, "https://example.com"]
    # Without an origin, every item is handed out at once, none ever done.
    queue = PacedQueue([fixture] * 5, paced_origin, max_in_flight=1, min_gap_s=3600)
    assert [queue.take() for _ in range(6)] == [(n, fixture, None) for n in range(5)] + [None]


def test_a_busy_origin_lets_the_next_origin_go_first() -> None:
    items = ["a1", "a2", "a3", "b1"]
    queue = PacedQueue(items, lambda item: item[0], max_in_flight=2, min_gap_s=0)
    assert [queue.take(), queue.take()] == [(0, "a1", "a"), (1, "a2", "a")]
    assert queue.take() == (3, "b1", "b")  # a has two in flight: b does not wait behind it
    queue.done("a")
    assert queue.take() == (2, "a3", "a")
    assert queue.take() is None


class Origins:
    """Loopback servers, one origin each, whose handler records when each request reached it
    and how many of that origin's requests it was serving at once."""

    def __init__(self, count: int, latency_s: float) -> None:
        self.servers = [FeedServer().start() for _ in range(count)]
        self.latency_s = latency_s
        self.starts: dict[int, list[float]] = {k: [] for k in range(count)}
        self.most: dict[int, int] = dict.fromkeys(range(count), 0)
        self._busy: dict[int, int] = dict.fromkeys(range(count), 0)
        self._lock = threading.Lock()
        for k, server in enumerate(self.servers):
            server.add("/feed.xml", handler=self._handler(k))

    def _handler(self, k: int):  # type: ignore[no-untyped-def]
        def handle(req: RequestHandler) -> None:
            with self._lock:
                self.starts[k].append(time.monotonic())
                self._busy[k] += 1
                self.most[k] = max(self.most[k], self._busy[k])
            time.sleep(self.latency_s)
            with self._lock:  # before the answer: the client cannot start the next one first
                self._busy[k] -= 1
            req.send_simple(200, BODY, {"Content-Type": "application/rss+xml"})

        return handle

    def requests(self, counts: list[int]) -> list[FetchRequest]:
        return [
            FetchRequest(f"s{k}-{n}", self.servers[k].url(f"/feed.xml?n={n}"), "rss")
            for k, count in enumerate(counts)
            for n in range(count)
        ]

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


@pytest.fixture
def origins() -> Iterator[Origins]:
    farm = Origins(2, latency_s=0.0)
    try:
        yield farm
    finally:
        farm.stop()


def _fetch(settings: FetchSettings, tmp_path: Path, requests: list[FetchRequest]) -> list[str]:
    with Fetcher(settings, tmp_path) as fetcher:
        results = fetch_many(fetcher, requests, NOW, max_workers=8)
    assert [r.source_id for r in results] == [r.source_id for r in requests]  # input order
    return [r.outcome for r in results]


def test_no_more_than_two_requests_in_flight_per_origin(
    allow_loopback: None, origins: Origins, tmp_path: Path
) -> None:
    origins.latency_s = 0.5  # slower than the gap: only the in-flight bound holds them back
    settings = replace(FetchSettings.from_env(), origin_max_in_flight=2, origin_min_gap_s=0.05)
    outcomes = _fetch(settings, tmp_path, origins.requests([6, 3]))
    assert outcomes == ["ok"] * 9
    assert origins.most == {0: 2, 1: 2}  # eight threads, yet two at a time per origin


def test_request_starts_to_one_origin_keep_their_gap_and_origins_interleave(
    allow_loopback: None, origins: Origins, tmp_path: Path
) -> None:
    settings = replace(FetchSettings.from_env(), origin_max_in_flight=2, origin_min_gap_s=0.5)
    # Origin 1's two requests come after all four of origin 0's.
    assert _fetch(settings, tmp_path, origins.requests([4, 2])) == ["ok"] * 6
    for k in (0, 1):
        starts = origins.starts[k]
        gaps = [b - a for a, b in pairwise(starts)]
        # What the server saw; half the gap is left for loopback jitter between two arrivals.
        assert len(starts) == (4, 2)[k] and all(gap >= 0.25 for gap in gaps), gaps
    # Origin 1 did not wait behind origin 0's queue: it started before origin 0's second.
    assert origins.starts[1][0] < origins.starts[0][1]


def test_a_url_httpx_cannot_read_fails_its_own_check_only(
    allow_loopback: None, origins: Origins, tmp_path: Path
) -> None:
    # Hosts IDNA or httpx refuse, though they pass the registry's URL check: each is one
    # failed check (its origin is its own), never an error that sinks the wave's fetch.
    odd = ["https://\u2603.com/f", "https://xn--zz.com/f", "https://a\u200b.com/f"]
    assert len({origin_of(url) for url in odd}) == len(odd)
    requests = [FetchRequest(f"odd-{n}", url, "rss") for n, url in enumerate(odd)]
    requests += origins.requests([2, 0])
    outcomes = _fetch(FetchSettings.from_env(), tmp_path, requests)
    assert outcomes == ["failed"] * len(odd) + ["ok"] * 2
