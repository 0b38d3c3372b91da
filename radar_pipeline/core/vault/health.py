"""The Source files' health mirror: after each check, its health and HTTP keys are written into
the Source's own frontmatter (atomically, every other byte kept), so a person sees in Obsidian
what DuckDB holds. DuckDB is the record; a mirror that fails is retried by the next check."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from radar_pipeline.core.errors import RegistryError
from radar_pipeline.core.frontmatter import update_frontmatter_keys
from radar_pipeline.core.models import FetchResult
from radar_pipeline.core.registry.sources import remember_written

# Threads overlap the fsyncs of the files (the YAML work is small).
WRITE_THREADS = 8


@dataclass(frozen=True)
class HealthUpdate:
    """The health keys to set in one Source file."""

    source_id: str
    path: Path
    record_path: str  # the file's vault path, for messages
    fields: dict[str, str | int | None]


@dataclass(frozen=True)
class HealthFailure:
    """A Source file whose mirror was not written, and why."""

    source_id: str
    record_path: str
    error: str


def write_health(updates: Sequence[HealthUpdate]) -> list[HealthFailure]:
    """Mirror each update into its Source file; returns the files that failed."""

    def one(update: HealthUpdate) -> HealthFailure | None:
        try:
            written = update_frontmatter_keys(update.path, update.fields)
        except (RegistryError, OSError) as exc:
            return HealthFailure(update.source_id, update.record_path, str(exc))
        # The checks after a collection read the registry again: the file's new text is read
        # from the mapping the update was proven with, not parsed a second time.
        remember_written(written.text, written.frontmatter)
        return None

    if not updates:
        return []
    with ThreadPoolExecutor(max_workers=WRITE_THREADS, thread_name_prefix="radar-health") as tp:
        return [f for f in tp.map(one, updates) if f is not None]


# The Source-file keys of the feed manners, for the commit to merge into a check's
# health update: where a permanent redirect leads (a person updates `url`), and for a 410 a
# `blockedReason` that stops the Source until a person decides.
PERMANENT_REDIRECT_KEY = "permanentRedirect"
# When the schedule checks the Source next (ISO-8601 UTC; empty for a `manual` Source): the
# report's `nextAttemptAt`, written after every check and after a collection that failed as a
# whole (core/plan/collection.py, `next_attempts_of`; core/collect/run_failure.py).
NEXT_ATTEMPT_KEY = "nextAttemptAt"
GONE_REASON = "gone: the publisher answered 410 Gone; update url or disable this Source"


def manners_fields(fetch: FetchResult) -> dict[str, str | int | None]:
    """`permanentRedirect` (the new URL, or empty once the Source's URL answers directly) and,
    after a 410, `blockedReason`. Nothing for a check whose request never got an answer."""
    if fetch.status is None:
        return {}
    fields: dict[str, str | int | None] = {PERMANENT_REDIRECT_KEY: fetch.permanent_redirect}
    if fetch.permanently_gone:
        fields["blockedReason"] = GONE_REASON
    return fields
