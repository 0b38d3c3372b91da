"""The identity rule before ids were read as written: the one place it lives.

Vaults collected before that change hold Signals whose identities this rule gave their items:
it read feedparser's ids (resolved against the feed's URL) and links (a permalink guid copied
in), let any such id stand in for a link, and knew an item without an id by its canonical URL.
No Signal in such a vault may get a second one (docs/architecture.md, "Vaults collected
before"), and only the feed's bytes can say which item a Signal was (the vault keeps the hash,
not its inputs), so the rule is applied again at every parse instead of once to the vault.

The rest of the pipeline knows only an item's *earlier key*: parse/items.py calls
`legacy_keys` once per document and hashes each key into `ItemCandidate.earlier_identity`
where it differs from the identity; dedupe looks it up beside the identity, and an item found
by it has its identity recorded as an alias of that Signal (`identity_aliases`).
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from radar_pipeline.core.identity.links import DocumentLinks, ItemKey, unique_item_id


def legacy_keys(
    items: Sequence[tuple[str, Sequence[str]]], links: DocumentLinks
) -> list[ItemKey | None]:
    """Per item of one document, in order, its key under the rule before ids were read as
    written, or None when that rule could not identify it. `items`: each item's id and links
    as feedparser resolved them (for other parsers: as written, the same thing)."""
    seen: dict[str, int] = {}  # repeated ids took the same suffixes as now
    keys: list[ItemKey | None] = []
    for item_id, hrefs in items:
        try:
            keys.append(_legacy_key(item_id.strip(), hrefs, links, seen))
        except Exception:  # the rule could not identify it either: nothing to find
            keys.append(None)
    return keys


def _legacy_key(
    guid: str, hrefs: Sequence[str], links: DocumentLinks, seen: dict[str, int]
) -> ItemKey | None:
    link = next((a for h in hrefs if (a := links.absolute_http(h)) is not None), None)
    if link is None and urlsplit(guid).scheme.lower() in ("http", "https"):
        link = links.absolute_http(guid)
    if link is None:
        return None
    canonical = links.link(link)
    return canonical, unique_item_id(guid or canonical, canonical, seen)
