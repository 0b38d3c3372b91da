"""The links and ids of the items of one document, as identity reads them.

`DocumentLinks` canonicalizes each distinct URL of a document once; `unique_item_id` gives a
repeated id its deterministic suffix. Every identity rule (the current one in parse/items.py,
the one before it in identity/legacy.py) reads links and ids through these two, so both look
at an item alike and pay for a URL once.
"""

from __future__ import annotations

from urllib.parse import urljoin

from radar_pipeline.core.identity.keys import canonicalize_url

ItemKey = tuple[str, str]  # (canonical URL, source item id): what identity_hash reads


class DocumentLinks:
    """`canonicalize_url` for the items of one document, each distinct URL worked once.

    The identity rules look at the same links (~0.2 ms a call, most of it `url_normalize`); a
    link is canonicalized against the base URL, and later again as the absolute URL that gave;
    and an item's id often is its link (`identity_hash`'s item key): each would be worked two
    to four times."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self._canonical: dict[tuple[str, bool], str | None] = {}

    def canonical(self, url: str, *, resolved: bool = False) -> str | None:
        """`canonicalize_url(url)` (`resolved`: against the base URL), None where it raises."""
        key = (url, resolved)
        if key not in self._canonical:
            try:
                found: str | None = canonicalize_url(url, self.base_url if resolved else None)
            except ValueError:
                found = None
            self._canonical[key] = found
        return self._canonical[key]

    def link(self, url: str) -> str:
        """The canonical form of an absolute link; raises ValueError as `canonicalize_url`."""
        return self.canonical(url) or canonicalize_url(url)  # the second call says why not

    def absolute_http(self, href: str) -> str | None:
        """`href` resolved against the base URL if it is then an http(s) URL with a host."""
        href = href.strip()
        if not href:
            return None
        found = self.canonical(href, resolved=True)
        if found is None:
            return None
        link = urljoin(self.base_url, href)
        if link == link.strip() and self.base_url == self.base_url.strip():
            # `canonicalize_url(link)` works on the very string the resolved one did
            # (`urljoin(base.strip(), href.strip())`): the same result, not worked again.
            self._canonical.setdefault((link, False), found)
        return link


def unique_item_id(item_id: str, canonical_url: str, seen: dict[str, int]) -> str:
    """`item_id`, or for an id already in `seen` (this document's ids so far, updated here) a
    deterministic suffix: `id#canonical_url`, then `id#canonical_url#n`."""
    count = seen.get(item_id, 0) + 1
    seen[item_id] = count
    if count == 1:
        return item_id
    candidate = f"{item_id}#{canonical_url}"
    counter = 2
    while candidate in seen:
        counter += 1
        candidate = f"{item_id}#{canonical_url}#{counter}"
    seen[candidate] = 1
    return candidate
