"""Per-origin pacing of feed fetches (core/acquire/pacing): the queue's choices, and what real
loopback servers (one origin each) saw when `fetch_many` fetched from them."""

from __future__ import annotations

import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.core.acquire.fetch import Fetcher, FetchSettings, fetch_many
from radar_pipeline.core.acquire.pacing import (
    Answer,
    HostCeilings,
    HostLimit,
    PacedQueue,
    origin_of,
    paced_origin,
)
from radar_pipeline.core.config import Settings
from radar_pipeline.core.errors import ConfigError
from radar_pipeline.core.models import FetchRequest, FetchResult
from radar_pipeline_tests.conftest import collect_stages
from radar_pipeline_tests.feedserver import FeedServer, RequestHandler, conditional
from radar_pipeline_tests.vaultkit import rss, write_source

NOW = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
BODY = rss([{"title": "t", "guid": "g", "link": "https://example.com/t"}])


def test_origin_is_scheme_host_and_port() -> None:
    assert origin_of("https://Example.com/a/feed.xml?x=1") == "https://example.com"
    assert origin_of("https://example.com:443/feed") == "https://example.com"
    assert origin_of("http://example.com:8080/feed") == "http://example.com:8080"
    assert origin_of("http://example.com/a") != origin_of("https://example.com/a")


def test_fixture_and_vault_reads_are_not_paced() -> None:
    fixture = FetchRequest("fx", "Radar/Fixtures/feed.xml", "fixture", from_vault=True)
    vault = FetchRequest("v", "Radar/page.html", "html", from_vault=True)
    feed = FetchRequest("f", "https://example.com/feed.xml", "rss")
    assert [paced_origin(r) for r in (fixture, vault, feed)] == [None, None, "https://example.com"]
    # Without an origin, every item is handed out at once, none ever done.
    queue = PacedQueue([fixture] * 5, paced_origin, HostCeilings(1))
    assert [queue.take() for _ in range(6)] == [(n, fixture, None, None) for n in range(5)] + [None]


def test_a_busy_origin_lets_the_next_origin_go_first() -> None:
    items = ["a1", "a2", "a3", "b1"]
    queue = PacedQueue(items, lambda item: item[0])
    assert [queue.take(), queue.take()] == [(0, "a1", "a", None), (1, "a2", "a", None)]
    assert queue.take() == (3, "b1", "b", None)  # a has two in flight: b does not wait behind it
    queue.done("a", None)
    assert queue.take() == (2, "a3", "a", None)
    assert queue.take() is None


def _ok(wait_s: float, started: float | None = None) -> Answer:
    return Answer(time.monotonic() if started is None else started, wait_s, False, None, 200)


def test_a_host_limit_grows_on_prompt_answers_and_halves_once_a_round_trip_on_strain() -> None:
    limit = HostLimit(ceiling=8)
    assert limit.limit == 2  # starts small
    for _ in range(4):
        limit.answered(_ok(0.1), "o")
    assert limit.limit == 6  # slow start: one more an answer
    limit.answered(_ok(0.1), "o")
    limit.answered(_ok(0.1), "o")
    limit.answered(_ok(0.1), "o")
    assert limit.limit == 8  # never past the ceiling
    before_cut = time.monotonic()
    limit.answered(Answer(before_cut, None, True, None, 429), "o")
    assert limit.limit == 4 and limit.cuts == 1
    # Answers to requests sent before the cut tell nothing new: no second cut for them.
    limit.answered(Answer(before_cut, None, True, None, 503), "o")
    limit.answered(_ok(0.5, started=before_cut), "o")  # slow, but from the same window
    assert limit.limit == 4 and limit.cuts == 1
    limit.answered(_ok(0.1), "o")
    assert limit.limit == 4.25  # past the cut: one more a round trip, not one an answer
    for _ in range(5):
        limit.answered(Answer(time.monotonic(), None, True, None, 429), "o")
    assert limit.limit == 1  # never below one request in flight
    assert limit.may_start() and limit.deferred is None  # no Retry-After: nothing deferred


def test_a_wait_grown_past_twice_the_fastest_is_strain() -> None:
    limit = HostLimit(ceiling=8)
    limit.answered(_ok(0.1), "o")
    limit.answered(_ok(0.2), "o")  # within 2 x 0.1 + slack
    assert limit.limit == 4 and limit.cuts == 0
    limit.answered(_ok(0.3), "o")
    assert limit.limit == 2 and limit.cuts == 1


def test_a_retry_after_defers_the_origins_waiting_requests_with_the_reason() -> None:
    queue = PacedQueue(["a1", "a2", "a3", "b1"], lambda item: item[0])
    first, second = queue.take(), queue.take()
    assert first is not None and second is not None
    queue.done("a", Answer(time.monotonic(), None, True, 0.0, 429))  # "no wait": not deferred
    assert queue.origins["a"].deferred is None
    queue.done("a", Answer(time.monotonic(), None, True, 120.0, 429))
    taken = queue.take()
    assert taken is not None and taken.item == "a3" and taken.deferred is not None
    assert "Retry-After 120 s" in taken.deferred and "a" in taken.deferred
    assert queue.take() == (3, "b1", "b", None)  # another origin is not concerned
    assert queue.take() is None


# How an origin answers its n-th request (from 0) while `busy` requests (this one included)
# are being served: (seconds before the answer, status, extra headers).
Behaviour = Callable[[int, int], tuple[float, int, dict[str, str]]]


def flat(latency_s: float) -> Behaviour:
    return lambda n, busy: (latency_s, 200, {})


class Origins:
    """Loopback servers, one origin each, whose handler records when each request reached it
    and how many of that origin's requests it was serving at once."""

    def __init__(self, count: int, behaviour: Behaviour | None = None) -> None:
        self.servers = [FeedServer().start() for _ in range(count)]
        self.behaviour = behaviour or flat(0.0)
        self.starts: dict[int, list[float]] = {k: [] for k in range(count)}
        self.busy_seen: dict[int, list[int]] = {k: [] for k in range(count)}
        self._busy: dict[int, int] = dict.fromkeys(range(count), 0)
        self._lock = threading.Lock()
        for k, server in enumerate(self.servers):
            server.add("/feed.xml", handler=self._handler(k))

    @property
    def most(self) -> dict[int, int]:
        return {k: max(seen, default=0) for k, seen in self.busy_seen.items()}

    def _handler(self, k: int):  # type: ignore[no-untyped-def]
        def handle(req: RequestHandler) -> None:
            with self._lock:
                n = len(self.starts[k])
                self.starts[k].append(time.monotonic())
                self._busy[k] += 1
                self.busy_seen[k].append(self._busy[k])
                wait, status, headers = self.behaviour(n, self._busy[k])
            time.sleep(wait)
            with self._lock:  # before the answer: the client cannot start the next one first
                self._busy[k] -= 1
            body = BODY if status == 200 else b"slow down"
            req.send_simple(status, body, {"Content-Type": "application/rss+xml", **headers})

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
    farm = Origins(2)
    try:
        yield farm
    finally:
        farm.stop()


def _fetch(
    settings: FetchSettings, tmp_path: Path, requests: list[FetchRequest]
) -> list[FetchResult]:
    with Fetcher(settings, tmp_path) as fetcher:
        results = fetch_many(fetcher, requests, NOW, max_workers=32)
    assert [r.source_id for r in results] == [r.source_id for r in requests]  # input order
    return results


def _outcomes(results: list[FetchResult]) -> list[str]:
    return [r.outcome for r in results]


def test_a_prompt_origin_is_sent_up_to_its_ceiling_and_no_further(
    allow_loopback: None, origins: Origins, tmp_path: Path
) -> None:
    origins.behaviour = flat(0.1)
    settings = replace(FetchSettings.of(Settings.from_env()), host_ceilings=HostCeilings(4))
    assert _outcomes(_fetch(settings, tmp_path, origins.requests([30, 3]))) == ["ok"] * 33
    # 32 threads, yet at most 4 at a time; and the limit grew from 2 to reach 4.
    # Origin 1's third request waited for one of its first two: every origin starts at two.
    assert origins.most == {0: 4, 1: 2}
    assert origins.busy_seen[0][:2] == [1, 2]


def test_a_hosts_own_ceiling_from_the_environment(
    allow_loopback: None, origins: Origins, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    origins.behaviour = flat(0.05)
    monkeypatch.setenv("RADAR_HOST_MAX_IN_FLIGHT", "5,127.0.0.1=1")
    settings = FetchSettings.of(Settings.from_env())
    assert settings.host_ceilings == HostCeilings(5, (("127.0.0.1", 1),))
    assert _outcomes(_fetch(settings, tmp_path, origins.requests([6, 0]))) == ["ok"] * 6
    assert origins.most[0] == 1  # one at a time: as a sequential client, never slower


def test_an_origin_whose_latency_grows_with_load_is_not_pushed_past_it(
    allow_loopback: None, origins: Origins, tmp_path: Path
) -> None:
    # Each request more in flight triples the wait: 50 ms alone, 150 ms for two, 450 ms for
    # three. Tens of ms, not a few: a loaded machine's scheduling delay is added to every wait
    # the client measures (its fastest included), and must not hide a tripling.
    origins.behaviour = lambda n, busy: (0.05 * 3 ** (busy - 1), 200, {})
    settings = replace(FetchSettings.of(Settings.from_env()), host_ceilings=HostCeilings(8))
    assert _outcomes(_fetch(settings, tmp_path, origins.requests([40, 0]))) == ["ok"] * 40
    seen = origins.busy_seen[0]
    # A flat origin reaches its ceiling (test above); this one is held at a few at once:
    # each probe past that is answered slowly and halves the limit (AIMD probes again).
    assert max(seen) <= 5, seen
    assert max(seen[20:]) <= 4, seen
    assert statistics.median(seen) <= 3, seen


def test_429s_without_retry_after_bring_an_origin_down_to_one_request_at_a_time(
    allow_loopback: None, origins: Origins, tmp_path: Path
) -> None:
    origins.behaviour = lambda n, busy: (0.05, 429, {})
    results = _fetch(FetchSettings.of(Settings.from_env()), tmp_path, origins.requests([8, 0]))
    assert _outcomes(results) == ["failed"] * 8  # each its own failure, none deferred
    assert {r.error_class for r in results} == {"rate-limited"}
    seen = origins.busy_seen[0]
    assert len(seen) == 8 and seen[:2] == [1, 2] and max(seen[2:]) == 1, seen


def test_a_retry_after_defers_the_rest_of_the_origin_within_the_run(
    allow_loopback: None, origins: Origins, tmp_path: Path
) -> None:
    k = 5  # the origin answers its first K requests, then asks for two minutes of quiet

    def behaviour(n: int, busy: int) -> tuple[float, int, dict[str, str]]:
        return (0.05, 200, {}) if n < k else (0.05, 429, {"Retry-After": "120"})

    origins.behaviour = behaviour
    settings = replace(FetchSettings.of(Settings.from_env()), host_ceilings=HostCeilings(2))
    results = _fetch(settings, tmp_path, origins.requests([20, 3]))
    # Origin 0 saw its K answered requests, the first 429, and at most one more that was
    # in flight when the 429 came back; nothing after.
    sent = len(origins.starts[0])
    assert k + 1 <= sent <= k + 2, sent
    mine, other = results[:20], results[20:]
    # Arrival order may swap two neighbours (two in flight): count, do not index.
    assert Counter(_outcomes(mine)) == {"ok": k, "failed": sent - k, "skipped": 20 - sent}
    assert _outcomes(other) == ["ok"] * 3  # another origin is not concerned
    for r in mine:
        if r.outcome == "skipped":
            assert r.status is None and r.bytes_received == 0  # not sent
            assert r.error_message is not None and "Retry-After 120 s" in r.error_message


def test_a_url_httpx_cannot_read_fails_its_own_check_only(
    allow_loopback: None, origins: Origins, tmp_path: Path
) -> None:
    # Hosts IDNA or httpx refuse, though they pass the registry's URL check: each is one
    # failed check (its origin is its own), never an error that sinks the wave's fetch.
    odd = ["https://\u2603.com/f", "https://xn--zz.com/f", "https://a\u200b.com/f"]
    assert len({origin_of(url) for url in odd}) == len(odd)
    requests = [FetchRequest(f"odd-{n}", url, "rss") for n, url in enumerate(odd)]
    requests += origins.requests([2, 0])
    outcomes = _outcomes(_fetch(FetchSettings.of(Settings.from_env()), tmp_path, requests))
    assert outcomes == ["failed"] * len(odd) + ["ok"] * 2


def test_sources_a_host_deferred_are_reported_skipped_with_the_reason_and_collected_later(
    radar_env: dict[str, Path], feed_server: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the collection: the Sources of a host that said Retry-After are skipped, each
    with the reason in `error`, nothing recorded as their attempt or failure; the next
    collection checks them, and every item arrives."""
    from radar_pipeline.core.collect.collector import Collector
    from radar_pipeline.core.plan.collection import CollectionSpec
    from radar_pipeline_tests.conftest import new_collection_id

    monkeypatch.setenv("RADAR_HOST_MAX_IN_FLIGHT", "2")
    limit = {"answered": 3}  # the host answers this many, then asks for a minute of quiet
    lock = threading.Lock()

    def handler(n: int) -> Callable[[RequestHandler], None]:
        body = rss([{"title": f"t{n}", "guid": f"g{n}", "link": f"https://example.com/{n}"}])

        def handle(req: RequestHandler) -> None:
            with lock:
                limit["answered"] -= 1
                quiet = limit["answered"] < 0
            if quiet:
                req.send_simple(429, b"slow down", {"Retry-After": "60"})
            else:
                req.send_simple(200, body, {"Content-Type": "application/rss+xml"})

        return handle

    for n in range(8):
        write_source(radar_env["vault"], f"s{n}", feed_server.add(f"/{n}.xml", handler=handler(n)))

    def collect(as_of: datetime) -> dict[str, tuple[str, str | None]]:
        spec = CollectionSpec(new_collection_id(), "all", as_of)
        with Collector(Settings.from_env()) as collector:
            report = collect_stages(collector, spec).json_object()
        return {s["id"]: (s["outcome"], s["error"]) for s in report["sources"]}

    first = collect(NOW)
    outcomes = Counter(outcome for outcome, _ in first.values())
    sent = len(feed_server.requests)
    assert 4 <= sent <= 5  # three answered, the 429, perhaps one more already in flight
    assert outcomes == {"passed": 3, "failed": sent - 3, "skipped": 8 - sent}
    skipped = [sid for sid, (outcome, _) in first.items() if outcome == "skipped"]
    for sid in skipped:
        assert "Retry-After 60 s" in (first[sid][1] or ""), first[sid]

    limit["answered"] = 100  # the host is back
    later = collect(NOW + timedelta(hours=1))
    for sid in skipped:  # deferred, not lost: checked in the next collection
        assert later[sid][0] == "passed", later[sid]
    assert len(feed_server.requests) == sent + len(later)


def test_host_ceilings_from_the_environment_and_a_bad_value_named() -> None:
    def ceilings(value: str) -> HostCeilings:
        return FetchSettings.of(
            Settings.from_env({"RADAR_HOST_MAX_IN_FLIGHT": value})
        ).host_ceilings

    assert ceilings("") == HostCeilings(8)
    assert ceilings("GitHub.com=4") == HostCeilings(8, (("github.com", 4),))
    assert ceilings("3, a.org=1").of("https://a.org") == 1
    assert ceilings("3, a.org=1").of("http://b.org:8080") == 3
    for bad in ("0", "x", "a.org=0", "=2", "a.org=many"):
        with pytest.raises(ConfigError, match="RADAR_HOST_MAX_IN_FLIGHT"):
            ceilings(bad)


class CountingServer(FeedServer):
    """A FeedServer that counts the TCP connections it accepted."""

    def __init__(self) -> None:
        super().__init__()
        self.connections = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections += 1  # the accept loop is one thread
        super().process_request(request, client_address)


def test_connections_to_a_host_are_kept_for_200s_and_304s_alike(
    allow_loopback: None, tmp_path: Path
) -> None:
    server = CountingServer().start()
    try:
        handle = conditional(BODY, '"v1"', "Mon, 30 Nov 2026 10:00:00 GMT")
        server.add("/feed.xml", handler=handle)
        first = [FetchRequest(f"s{n}", server.url(f"/feed.xml?n={n}"), "rss") for n in range(6)]
        again = [replace(r, etag='"v1"') for r in first]
        settings = replace(FetchSettings.of(Settings.from_env()), host_ceilings=HostCeilings(1))
        assert _outcomes(_fetch(settings, tmp_path, first)) == ["ok"] * 6
        assert _outcomes(_fetch(settings, tmp_path, again)) == ["not-modified"] * 6
        # One connection a fetch_many (each has its own client), not one a request.
        assert server.connections == 2
    finally:
        server.stop()
