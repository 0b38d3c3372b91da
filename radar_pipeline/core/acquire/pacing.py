"""Per-origin pacing of feed fetches: a publisher never sees all its Sources at once.

A wave of due Sources is fetched by a pool of threads (`fetch_many`), and a registry often
holds several Sources of one publisher (one blog's category feeds, a code host's release
feeds). Per origin (scheme, host, port: the scope one robots.txt governs) at most
`MAX_IN_FLIGHT` requests are in flight and two request starts are at least `MIN_GAP_S`
apart, so N Sources of one origin take at least (N - 1) * `MIN_GAP_S` and never all start
in the same second once there are more than 1 / `MIN_GAP_S` of them. The limits are ours, not
the publisher's: its own signals (Retry-After, Cache-Control max-age, RSS <ttl>) act through
the Source's backoff and polite wait, between checks.

The queue hands a free thread the first waiting request (in the order given: recovery
priority) whose origin may start now, so threads do not sit idle behind one busy origin while
another has work. Requests without an origin (fixture and vault reads) are never paced.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import urlsplit

import httpx

from radar_pipeline.core.models import FetchRequest

MAX_IN_FLIGHT = 2
MIN_GAP_S = 0.25

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


def paced_origin(request: FetchRequest) -> str | None:
    """The origin a request is paced by; None for a fixture or vault read (no publisher)."""
    if request.from_vault or request.collection_method == "fixture":
        return None
    return origin_of(request.url)


@dataclass
class _Origin:
    in_flight: int = 0
    next_start: float = 0.0  # monotonic time before which no request to it may start


class PacedQueue(Generic[T]):
    """The work of one `fetch_many`: `take` blocks until some item may start (or none is
    left), `done` frees its origin. Thread-safe; items keep their index for the results."""

    def __init__(
        self,
        items: Sequence[T],
        origin: Callable[[T], str | None],
        max_in_flight: int = MAX_IN_FLIGHT,
        min_gap_s: float = MIN_GAP_S,
    ) -> None:
        if max_in_flight < 1 or min_gap_s < 0:
            raise ValueError("max_in_flight must be >= 1 and min_gap_s >= 0")
        self._waiting = [(n, item, origin(item)) for n, item in enumerate(items)]
        self._origins: dict[str, _Origin] = {}
        self._max = max_in_flight
        self._gap = min_gap_s
        self._cond = threading.Condition()

    def take(self) -> tuple[int, T, str | None] | None:
        """The first waiting item whose origin is free and past its gap, marked started;
        None when every item was taken."""
        with self._cond:
            while self._waiting:
                now = time.monotonic()
                wake: float | None = None
                busy: set[str] = set()
                for k, (n, item, origin) in enumerate(self._waiting):
                    if origin is None:
                        del self._waiting[k]
                        return n, item, origin
                    if origin in busy:
                        continue
                    state = self._origins.setdefault(origin, _Origin())
                    if state.in_flight < self._max and now >= state.next_start:
                        del self._waiting[k]
                        state.in_flight += 1
                        state.next_start = now + self._gap
                        return n, item, origin
                    busy.add(origin)
                    if state.in_flight < self._max:
                        wake = state.next_start if wake is None else min(wake, state.next_start)
                # Nothing may start: wait for the earliest gap to pass, or for a `done`.
                self._cond.wait(None if wake is None else max(0.0, wake - now))
            return None

    def done(self, origin: str | None) -> None:
        """The request to `origin` ended: the origin may take another (after its gap)."""
        if origin is None:
            return
        with self._cond:
            self._origins[origin].in_flight -= 1
            self._cond.notify_all()
