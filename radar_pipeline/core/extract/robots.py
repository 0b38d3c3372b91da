"""robots.txt for page extraction: fetched through the same guarded client as every request,
parsed with protego, cached per origin for one collection and in DuckDB until it expires.

What an answer means (RFC 9309, section 2.3.1): a 2xx holds the rules; any other 4xx means
"no robots.txt", every path allowed; a 5xx, a timeout or a network error means "unreachable",
nothing is fetched from that origin in this check (and that verdict is not cached). A 403, a 429
or a challenge page is the publisher refusing us: the page pass stops for the Source.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from protego import Protego

# The scope one robots.txt governs is the scope feed fetches are paced by: one definition.
from radar_pipeline.core.acquire.pacing import origin_of
from radar_pipeline.core.models import FetchResult
from radar_pipeline.core.store.pages import RobotsEntry

ROBOTS_TTL = timedelta(hours=24)  # RFC 9309: a cached robots.txt should not be used longer
ROBOTS_AGENT = "RadarPipeline"  # the product token of our User-Agent
BLOCKING_STATUSES = frozenset({403, 429})


def is_blocking(result: FetchResult) -> bool:
    """A 403, a 429 or a challenge page: the stop rule of page extraction."""
    return result.status in BLOCKING_STATUSES or result.error_class in (
        "challenge",
        "rate-limited",
    )


@dataclass(frozen=True)
class RobotsVerdict:
    """What one origin's robots.txt says for this check."""

    origin: str
    state: str  # rules | allow-all | unreachable | blocked
    body: str = ""
    blocked_by: FetchResult | None = None  # the answer that refused us (state "blocked")
    rules: Protego | None = field(default=None, compare=False)  # `body` parsed, state "rules"

    @classmethod
    def of_rules(cls, origin: str, body: str) -> RobotsVerdict:
        return cls(origin, "rules", body, rules=Protego.parse(body))

    def crawl_delay(self) -> float | None:
        """The origin's `Crawl-delay` for our agent, in seconds, when its robots.txt sets one."""
        delay = self.rules.crawl_delay(ROBOTS_AGENT) if self.rules is not None else None
        return float(delay) if delay is not None else None

    def allows(self, url: str) -> bool:
        if self.state == "allow-all":
            return True
        if self.rules is None:  # unreachable or blocked: nothing is allowed
            return False
        return bool(self.rules.can_fetch(url, ROBOTS_AGENT))


def verdict_of(origin: str, result: FetchResult) -> RobotsVerdict:
    """The verdict a robots.txt fetch result carries."""
    if is_blocking(result):
        return RobotsVerdict(origin, "blocked", blocked_by=result)
    if result.outcome == "ok" and result.body is not None:
        return RobotsVerdict.of_rules(origin, result.body.decode("utf-8", errors="replace"))
    status = result.status
    if status is not None and 400 <= status < 500:
        return RobotsVerdict(origin, "allow-all")
    return RobotsVerdict(origin, "unreachable")


@dataclass
class RobotsBook:
    """One collection's robots.txt verdicts per origin (mutable: filled as origins come up).

    `load` reads a still-valid DuckDB entry, `fetch` requests `/robots.txt` (paced like a page
    request by the caller); cacheable verdicts are kept in `fresh` for the commit to store.
    """

    load: Callable[[str], RobotsEntry | None]
    fetch: Callable[[str], FetchResult]
    now: datetime
    verdicts: dict[str, RobotsVerdict] = field(default_factory=dict)
    fresh: list[RobotsEntry] = field(default_factory=list)
    fetches: int = 0

    def verdict(self, url: str) -> RobotsVerdict:
        origin = origin_of(url)
        known = self.verdicts.get(origin)
        if known is not None:
            return known
        cached = self.load(origin)
        if cached is not None and cached.verdict == "rules":
            verdict = RobotsVerdict.of_rules(origin, cached.body)
        elif cached is not None:
            verdict = RobotsVerdict(origin, cached.verdict)
        else:
            result = self.fetch(f"{origin}/robots.txt")
            self.fetches += 1
            verdict = verdict_of(origin, result)
            if verdict.state in ("rules", "allow-all"):
                expires = self.now + ROBOTS_TTL
                self.fresh.append(
                    RobotsEntry(
                        origin, self.now, expires, result.status, verdict.state, verdict.body
                    )
                )
        self.verdicts[origin] = verdict
        return verdict
