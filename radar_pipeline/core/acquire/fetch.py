"""The fetch stage: one bounded HTTP request (or fixture read) per Source check.

This is the trust boundary between the internet and the vault. Every problem a publisher, the
network or the address policy can cause becomes a ``FetchResult`` with ``outcome="failed"``, an
``error_class`` from ``errors.FETCH_ERROR_CLASSES`` and a redacted one-line message such as
``fetch: rate-limited (429), retry after 120 s``; nothing of that kind is raised.

Split as Miniflux's fetcher is: ``request.py`` sends (the client, headers, timeouts, redirects
re-checked by ``address_policy``, the body streamed under its cap) and ``response.py``
interprets (status classes, content type, 304, challenges, Retry-After, the result value).
This module runs one check under its overall deadline (``address_policy.deadline_at``) and is
the one place where httpx's errors become ``FetchError``.
"""

from __future__ import annotations

import logging
import mimetypes
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from types import TracebackType

import httpx

from radar_pipeline.core.acquire.address_policy import deadline_at
from radar_pipeline.core.acquire.pacing import Answer, PacedQueue, paced_origin
from radar_pipeline.core.acquire.request import (
    BoundedClient,
    CheckProgress,
    FetchSettings,
    user_agent,
)
from radar_pipeline.core.acquire.response import (
    POLITE_DELAY_CAP_S,
    cache_max_age,
    conclude,
    deferred,
    failed,
    looks_like_feed,
    polite_delay_s,
    success,
    validate_body,
)
from radar_pipeline.core.errors import FetchError
from radar_pipeline.core.models import FetchRequest, FetchResult

# The fetch stage's public names, wherever they are defined: callers import them from here.
__all__ = [
    "POLITE_DELAY_CAP_S",
    "FetchSettings",
    "Fetcher",
    "cache_max_age",
    "fetch_many",
    "looks_like_feed",
    "polite_delay_s",
    "user_agent",
]

log = logging.getLogger(__name__)
# One INFO record per Source fetched, carrying `radar_progress = ("fetch", None, total)` (None:
# one more done); silent unless a handler listens (the CLI's progress bar on a terminal).
progress_log = logging.getLogger("radar_pipeline.progress")


class Fetcher:
    """Runs bounded fetches; one httpx.Client shared by all threads. A context manager."""

    def __init__(
        self,
        settings: FetchSettings,
        vault_root: Path,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.vault_root = vault_root
        self._client = BoundedClient(settings, transport)

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the shared HTTP client and its connections."""
        self._client.close()

    def fetch(self, request: FetchRequest, now: datetime) -> FetchResult:
        """Fetch one Source; never raises for publisher, network or policy problems."""
        progress = CheckProgress(final_url=request.url, started=time.monotonic())
        try:
            if request.from_vault:
                return self._read_from_vault(request, now, progress)
            deadline = progress.started + self.settings.deadline_s
            with deadline_at(deadline), self._client.open(request, progress) as response:
                return conclude(request, now, progress, response, self.settings)
        except FetchError as exc:
            return failed(request, now, progress, exc)
        except httpx.HTTPError as exc:
            return failed(request, now, progress, fetch_error_of(exc, self.settings.deadline_s))

    def _read_from_vault(
        self, request: FetchRequest, now: datetime, progress: CheckProgress
    ) -> FetchResult:
        path = _vault_path(self.vault_root, request.url)
        cap = self.settings.max_bytes
        try:
            with path.open("rb") as handle:
                body = handle.read(cap + 1)
        except OSError as exc:
            raise FetchError("network", f"fixture unreadable: {exc.strerror}") from exc
        progress.bytes_received = len(body)
        if len(body) > cap:
            raise FetchError("too-large", f"fixture larger than {cap} bytes")
        progress.status = 200
        progress.content_type = mimetypes.guess_type(path.name)[0]
        # A file has no media type of its own: its bytes decide (a .xml that is no feed fails).
        validate_body(request.collection_method, None, None, body)
        return success(request, now, progress, body)


def fetch_error_of(exc: httpx.HTTPError, deadline_s: float) -> FetchError:
    """httpx's error as the project's FetchError ("timeout" or "network"), naming the host of
    its request and caused by `exc` (the socket's, DNS's or TLS's error stays in its chain,
    for `explain`). The one place httpx's errors are translated."""
    try:
        host: str | None = exc.request.url.host or None
    except RuntimeError:  # httpx raises when the error carries no request
        host = None
    if isinstance(exc, httpx.TimeoutException):
        detail = f"{type(exc).__name__}, deadline {deadline_s:g} s"
        error = FetchError("timeout", detail, host=host)
    else:
        error = FetchError("network", f"{type(exc).__name__}: {exc}", host=host)
    error.__cause__ = exc
    return error


def _vault_path(vault_root: Path, relative: str) -> Path:
    root = vault_root.resolve()
    candidate = Path(relative)
    if candidate.is_absolute() or not relative.strip():
        raise FetchError("policy", "fixture path must be relative to the vault root")
    try:
        target = (root / candidate).resolve()  # follows symlinks: a link out is an escape too
    except (OSError, ValueError) as exc:  # e.g. an embedded NUL byte, a symlink loop
        raise FetchError("policy", "fixture path cannot be resolved") from exc
    if not target.is_relative_to(root):
        raise FetchError("policy", "fixture path escapes the vault root")
    return target


def fetch_many(
    fetcher: Fetcher,
    requests: Sequence[FetchRequest],
    now: datetime,
    max_workers: int = 8,
    on_result: Callable[[FetchResult], None] | None = None,
) -> list[FetchResult]:
    """Fetch concurrently; results in input order; one failure never affects the others.

    Paced per origin (core/acquire/pacing): the requests in flight to one origin adapt to its
    answers, up to its ceiling (`FetchSettings.host_ceilings`); a free thread takes the first
    waiting request whose origin may start, so one busy origin does not idle the others; an
    origin's Retry-After defers its requests not yet sent (each a `skipped` result with the
    reason). Fixture and vault reads are not paced.

    `on_result` sees each result as soon as it is in (in a fetch thread), e.g. to start
    parsing it while the others are still being fetched.
    """
    if not requests:
        return []
    workers = max(1, min(max_workers, len(requests)))
    total = len(requests)
    queue = PacedQueue(requests, paced_origin, fetcher.settings.host_ceilings)
    results: list[FetchResult | None] = [None] * total

    def one(request: FetchRequest, deferred_for: str | None) -> FetchResult:
        if deferred_for is not None:
            result = deferred(request, now, deferred_for)
        else:
            result = _fetch_guarded(fetcher, request, now)
        # A structured event per Source fetched: `radar` turns these into its progress bar.
        progress_log.info(
            "fetched %s: %s",
            request.source_id,
            result.outcome,
            extra={"radar_progress": ("fetch", None, total)},
        )
        if on_result is not None:
            try:
                on_result(result)
            except Exception:  # a hook never costs the fetch its result
                log.exception("fetch result hook failed for %s", request.source_id)
        return result

    def worker() -> None:
        while (taken := queue.take()) is not None:
            if taken.deferred is not None:  # not sent: nothing in flight to free
                results[taken.position] = one(taken.item, taken.deferred)
                continue
            started, answer = time.monotonic(), None
            try:
                results[taken.position] = result = one(taken.item, None)
                answer = Answer.of(result, started)
            finally:
                queue.done(taken.origin, answer)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="radar-fetch") as pool:
        for future in [pool.submit(worker) for _ in range(workers)]:
            future.result()
    done = [r for r in results if r is not None]
    if len(done) != total:  # every worker ran to the end, so every index holds its result
        lost = [requests[n].source_id for n, r in enumerate(results) if r is None]
        raise RuntimeError(f"fetch_many lost the results of {lost}")
    return done


def _fetch_guarded(fetcher: Fetcher, request: FetchRequest, now: datetime) -> FetchResult:
    try:
        return fetcher.fetch(request, now)
    except Exception as exc:  # a bug or library surprise in one worker must not sink the batch
        progress = CheckProgress(final_url=request.url, started=time.monotonic())
        error = FetchError("network", f"internal error {type(exc).__name__}: {exc}")
        return failed(request, now, progress, error)
