"""A new Source note that waits for a person: the one layout `radar sources import` (opml.py)
and `radar sources add` (new_source.py) write.

Every note starts `legalAssessment: pending` with the conservative defaults below (daily, an
hour between requests, no full text), every health key present and empty, and a body that
says what a person must do before it is collected. The callers give only what they know: the
id, the name, the URL, the method and their own keys and lines.
"""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from radar_pipeline.core.jsontypes import Frontmatter
from radar_pipeline.core.text import inert_markdown

# The health and HTTP recovery keys the pipeline writes; empty until the first check.
_EMPTY_STATE = (
    "lastAttemptAt",
    "lastSuccessAt",
    "errorState",
    "blockedReason",
    "httpStatus",
    "etag",
    "lastModified",
    "lastResponseAt",
    "nextAttemptAt",
)


def pending_note(
    source_id: str,
    name: str,
    url: str,
    method: str,
    tags: Sequence[str],
    body: Sequence[str],
    *,
    method_keys: Frontmatter | None = None,
    extra_keys: Frontmatter | None = None,
) -> str:
    """The note's text: the contract's keys in the registry's order (`method_keys` right after
    `collectionMethod`, `extra_keys` after the tags), then `# name` and the body's lines.
    `name` must already be inert as a property (the heading makes it inert as Markdown), and
    so must the body's lines: text a publisher wrote stays text."""
    fm: Frontmatter = {
        "entityType": "source",
        "schemaVersion": 1,
        "id": source_id,
        "name": name,
        "url": url,
        "role": "discovery",
        "sourceType": "community",
        "authorityScore": 0.5,
        "legalAssessment": "pending",
        "priority": "normal",
        "collectionMethod": method,
        **(method_keys or {}),
        "enabled": True,
        "cadence": "P1D",
        "minIntervalSeconds": 3600,
        "fullText": "none",
        "tags": list(tags),
        **(extra_keys or {}),
        **dict.fromkeys(_EMPTY_STATE),
    }
    header = yaml.safe_dump(fm, sort_keys=False, allow_unicode=True, width=10_000)
    header = header.replace(": null\n", ":\n")
    return f"---\n{header}---\n\n" + "\n".join([f"# {inert_markdown(name)}", "", *body]) + "\n"
