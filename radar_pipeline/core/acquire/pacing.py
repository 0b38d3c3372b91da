"""Per-origin pacing of feed fetches: as fast as a publisher shows it can go, never faster.

A wave of due Sources is fetched by a pool of threads (`fetch_many`), and a registry often
holds several Sources of one publisher (one blog's category feeds, a code host's release
feeds). Per origin (scheme, host, port: the scope one robots.txt governs) the number of
requests in flight adapts to what the origin answers, as TCP's congestion window and Scrapy's
AutoThrottle do (`HostLimit`):

- it starts at `START_IN_FLIGHT` (2) and grows by one with each prompt 2xx/304 answer until
  the first sign of strain (slow start: it doubles per round trip), then by 1/limit per answer
  (one more per round trip), up to the origin's ceiling (`DEFAULT_HOST_CEILING`, 8, or the
  host's own in `RADAR_HOST_MAX_IN_FLIGHT`);
- it halves on a 429, a 503, a timeout, or an answer whose wait for its headers grew past
  `LATENCY_GROWTH` times the origin's fastest of this collection (plus `LATENCY_SLACK_S`), at
  most once per round trip (only answers to requests started after the last cut count);
- it never goes below one, and no gap is put between request starts: toward one origin we are
  never slower than a sequential client;
- a Retry-After (on a 429 or 503) defers the origin's requests not yet sent to the next
  collection: `take` hands them out as deferred, with the reason, and they are not sent.

The limits act within one collection. Between checks the publisher's own signals
(Retry-After, Cache-Control max-age, RSS <ttl>) act through each Source's backoff and polite
wait. Pages and robots.txt are paced apart from this (extract/pages.HostPacer, robots.txt's
Crawl-delay).

The queue hands a free thread the first waiting request (in the order given: recovery
priority) whose origin may start now, so threads do not sit idle behind one busy origin while
another has work. Requests without an origin (fixture and vault reads) are never paced.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, NamedTuple, TypeVar
from urllib.parse import urlsplit

import httpx

from radar_pipeline.core.models import FetchRequest, FetchResult

START_IN_FLIGHT = 2
# Eight, as newsboat's reload threads and what browsers keep per host (six to eight): enough
# for a fast host to answer a hundred Sources in a few round trips, few enough that a small
# publisher never sees more than a busy reader does. RADAR_HOST_MAX_IN_FLIGHT changes it.
DEFAULT_HOST_CEILING = 8
LATENCY_GROWTH = 2.0
LATENCY_SLACK_S = 0.025  # loopback and LAN jitter is not strain
SLOW_DOWN_STATUSES = frozenset({429, 503})

T = TypeVar("T")


def origin_of(url: str) -> str:
    """`scheme://host[:port]` (the port only when it is not the scheme's default): the scope
    one robots.txt governs, and the one fetches are paced by. A URL httpx cannot read (a host
    IDNA refuses) is its own origin, its network location as written: the fetch then fails
    that one check with its reason, as any unreadable URL does, and no other check."""
    try:
        parsed = httpx.URL(url)
        default = 443 if parsed.scheme == "https" else 80
        port = f":{parsed.port}" if parsed.port and parsed.port != default else ""
        return f"{parsed.scheme}://{parsed.host}{port}"  # .host decodes IDNA: inside the try
    except (httpx.InvalidURL, UnicodeError, ValueError):
        return f"unreadable://{urlsplit(url).netloc.lower()}"


def host_of_origin(origin: str) -> str:
    """The host of an `origin_of` value (what RADAR_HOST_MAX_IN_FLIGHT names)."""
    netloc = origin.split("://", 1)[-1]
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def paced_origin(request: FetchRequest) -> str | None:
    """The origin a request is paced by; None for a vault read (no publisher)."""
    if request.from_vault:
        return None
    return origin_of(request.url)


@dataclass(frozen=True)
class Answer:
    """What one finished request tells its origin's pacing."""

    started: float  # monotonic time the request was taken
    wait_s: float | None  # from sending to the answer's headers; None: no answer
    slow_down: bool  # a 429, a 503 or a timeout
    retry_after_s: float | None  # the origin's Retry-After, when it sent one
    status: int | None = None

    @classmethod
    def of(cls, result: FetchResult, started: float) -> Answer:
        """The pacing signal of a fetch result."""
        slow = result.status in SLOW_DOWN_STATUSES or result.error_class == "timeout"
        prompt = result.outcome in ("ok", "not-modified")
        retry = result.retry_after_s if result.status in SLOW_DOWN_STATUSES else None
        wait = result.response_wait_s if prompt else None
        return cls(started, wait, slow, retry, result.status)


@dataclass
class HostLimit:
    """One origin's adaptive limit on requests in flight (additive increase, multiplicative
    decrease), and whether it asked us to stop for this collection."""

    ceiling: int
    limit: float = START_IN_FLIGHT
    threshold: float = math.inf  # below it the limit grows by one an answer (slow start)
    in_flight: int = 0
    fastest_s: float | None = None  # the quickest wait for headers seen this collection
    cut_at: float = -math.inf  # when the limit was last cut
    deferred: str | None = None  # why its requests not yet sent wait for the next collection
    most_in_flight: int = 0
    cuts: int = 0

    def __post_init__(self) -> None:
        self.limit = float(min(self.limit, self.ceiling))

    def may_start(self) -> bool:
        return self.in_flight < math.floor(self.limit)

    def answered(self, answer: Answer, origin: str) -> None:
        """Grow on a prompt 2xx/304, cut on strain, defer the rest on a Retry-After."""
        # Retry-After: 0 asks for no wait: strain, but nothing to defer.
        if answer.retry_after_s and self.deferred is None:
            self.deferred = (
                f"rate-limited: {origin} answered {answer.status} with Retry-After "
                f"{answer.retry_after_s:g} s; deferred to the next collection, not sent"
            )
        strained = answer.slow_down or (
            answer.wait_s is not None
            and self.fastest_s is not None
            and answer.wait_s > LATENCY_GROWTH * self.fastest_s + LATENCY_SLACK_S
        )
        if strained:
            if answer.started >= self.cut_at:  # one cut per round trip
                self.limit = max(1.0, self.limit / 2)
                self.threshold = self.limit
                self.cut_at = time.monotonic()
                self.cuts += 1
            return
        if answer.wait_s is None:
            return  # another failure (404, a parse-less error): no news about load
        self.fastest_s = min(answer.wait_s, self.fastest_s or answer.wait_s)
        step = 1.0 if self.limit < self.threshold else 1.0 / self.limit
        self.limit = min(float(self.ceiling), self.limit + step)


class Taken(NamedTuple, Generic[T]):
    """An item handed out by `PacedQueue.take`: send it, or (deferred) record why not."""

    position: int
    item: T
    origin: str | None
    deferred: str | None = None


@dataclass(frozen=True)
class HostCeilings:
    """The most requests in flight per host: `default`, or the host's own (lower-case host
    names, as RADAR_HOST_MAX_IN_FLIGHT gives them)."""

    default: int = DEFAULT_HOST_CEILING
    hosts: tuple[tuple[str, int], ...] = ()

    def of(self, origin: str) -> int:
        """The ceiling of `origin`'s host."""
        host = host_of_origin(origin)
        return next((n for name, n in self.hosts if name == host), self.default)


class PacedQueue(Generic[T]):
    """The work of one `fetch_many`: `take` blocks until some item may start (or none is
    left), `done` frees its origin and feeds it the answer. Thread-safe; items keep their
    index for the results."""

    def __init__(
        self,
        items: Sequence[T],
        origin: Callable[[T], str | None],
        ceilings: HostCeilings | None = None,
    ) -> None:
        self._waiting = [(n, item, origin(item)) for n, item in enumerate(items)]
        self._ceilings = ceilings or HostCeilings()
        if self._ceilings.default < 1 or any(n < 1 for _, n in self._ceilings.hosts):
            raise ValueError("a host's ceiling must be 1 or more")
        self.origins: dict[str, HostLimit] = {}
        self._cond = threading.Condition()

    def take(self) -> Taken[T] | None:
        """The first waiting item whose origin may start (marked started), or one whose
        origin deferred it; None when every item was taken."""
        with self._cond:
            while self._waiting:
                busy: set[str] = set()
                for k, (n, item, origin) in enumerate(self._waiting):
                    if origin is None:
                        del self._waiting[k]
                        return Taken(n, item, None)
                    if origin in busy:
                        continue
                    state = self._state(origin)
                    if state.deferred is not None:
                        del self._waiting[k]
                        return Taken(n, item, origin, state.deferred)
                    if state.may_start():
                        del self._waiting[k]
                        state.in_flight += 1
                        state.most_in_flight = max(state.most_in_flight, state.in_flight)
                        return Taken(n, item, origin)
                    busy.add(origin)
                self._cond.wait()  # every origin with work is full: wait for a `done`
            return None

    def done(self, origin: str | None, answer: Answer | None) -> None:
        """The request to `origin` ended (`answer`: what it said; None: no request was
        sent, or it ended in our own error): its origin may take another."""
        if origin is None:
            return
        with self._cond:
            state = self.origins[origin]
            state.in_flight -= 1
            if answer is not None:
                state.answered(answer, origin)
            self._cond.notify_all()

    def _state(self, origin: str) -> HostLimit:
        state = self.origins.get(origin)
        if state is None:
            state = self.origins[origin] = HostLimit(self._ceilings.of(origin))
        return state
