"""Every error the Radar raises, by stage.

    RadarError                  base; `stage` names where it happened, the message says the fix
    ├── ConfigError             bad environment or settings (stage "config")
    ├── RegistryError           a Source file cannot become a Source (stage "registry")
    ├── FetchError              the fetch stage refused or failed (stage "fetch");
    │                           `error_class` is one of FETCH_ERROR_CLASSES
    ├── ParseError              the bytes are not a usable feed, page or answer (stage "parse");
    │                           `error_class` is one of PARSE_ERROR_CLASSES
    ├── VaultError              a vault path or file is unsafe or unwritable (stage "vault")
    ├── CleanupRefused          the weekly close refuses to touch a path (stage "cleanup")
    ├── StoreError              the DuckDB store failed or stayed locked too long (stage "store")
    └── CollectionError         a collection could not run or report (stage "collect")

Library errors (httpx, duckdb, yaml, OS) are translated at one boundary with `raise ... from exc`.
"""

from __future__ import annotations

FETCH_ERROR_CLASSES = (
    "timeout",
    "network",
    "http-4xx",
    "http-5xx",
    "rate-limited",
    "challenge",
    "gone",
    "too-large",
    "not-a-feed",
    "not-a-page",
    "invalid-xml",
    "not-html",
    "not-json",
    "policy",
)

# Why a fetched body yields no items. `not-a-feed`/`invalid-xml`: an RSS, Atom or JSON Feed
# Source's body; `not-html`/`not-json`: an html/json Source's body is not that format at all;
# `extraction`: the page or answer is intact but the Source's selectors or paths match nothing
# (its markup changed), never "0 items, passed".
PARSE_ERROR_CLASSES = ("not-a-feed", "invalid-xml", "not-html", "not-json", "extraction")

# Failure classes whose backoff is the publisher's own request (Retry-After, a challenge):
# honoured even by explicit runs, like minIntervalSeconds.
PUBLISHER_WAITS = frozenset({"rate-limited", "challenge", "page-blocked"})
# The Source's error state after its page pass met a 403, a 429 or a challenge page: its feed
# check passed, its backoff holds every check (and so every page fetch) back until it ends.
PAGE_BLOCKED = "page-blocked"


class RadarError(Exception):
    """Base of every Radar error."""

    stage = "radar"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return f"{self.stage}: {self.message}"


class ConfigError(RadarError):
    stage = "config"


class RegistryError(RadarError):
    stage = "registry"


class FetchError(RadarError):
    """A fetch failed; `error_class` is one of FETCH_ERROR_CLASSES."""

    stage = "fetch"

    def __init__(
        self, error_class: str, message: str, *, retry_after_s: float | None = None
    ) -> None:
        if error_class not in FETCH_ERROR_CLASSES:
            raise ValueError(f"unknown fetch error class {error_class!r}")
        super().__init__(message)
        self.error_class = error_class
        self.retry_after_s = retry_after_s

    def __str__(self) -> str:
        return f"fetch: {self.error_class}: {self.message}"


class ParseError(RadarError):
    """The body yields no items; `error_class` is one of PARSE_ERROR_CLASSES."""

    stage = "parse"

    def __init__(self, error_class: str, message: str) -> None:
        if error_class not in PARSE_ERROR_CLASSES:
            raise ValueError(f"unknown parse error class {error_class!r}")
        super().__init__(message)
        self.error_class = error_class

    def __str__(self) -> str:
        return f"parse: {self.error_class}: {self.message}"


class VaultError(RadarError):
    stage = "vault"


class CleanupRefused(RadarError):
    stage = "cleanup"


class StoreError(RadarError):
    stage = "store"


class CollectionError(RadarError):
    """A collection run could not start, failed as a whole, or left no report."""

    stage = "collect"
