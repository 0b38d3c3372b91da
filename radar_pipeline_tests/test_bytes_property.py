"""Property: a Signal's `sourceItemId` occurs in its item's text and its link is one the item
carries (docs/architecture.md, "Faithful to the bytes"), for any id, link, feed format,
`xml:base` and feed URL directory."""

from __future__ import annotations

import html
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urljoin
from xml.sax.saxutils import escape, quoteattr

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radar_pipeline.core.identity.keys import canonicalize_url
from radar_pipeline.core.parse.feed import parse_feed
from radar_pipeline.core.parse.items import is_absolute_http

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
_TEXT = st.text(
    alphabet=st.sampled_from("abcXYZ019_-:./#?=&<>\"' é日"), min_size=1, max_size=24
).filter(lambda s: s.strip())
_HOST = st.sampled_from(["example.com", "Blog.Example.org", "127.0.0.1:8080"])
_PATH = st.text(alphabet=st.sampled_from("abc019-_/"), max_size=12)
_FRAGMENT = st.one_of(st.just(""), _TEXT.map(lambda s: "#" + s.replace(" ", "")))
_ABSOLUTE = st.builds(
    lambda scheme, host, path, fragment: f"{scheme}://{host}/{path}{fragment}",
    st.sampled_from(["http", "https", "HTTP"]),
    _HOST,
    _PATH,
    _FRAGMENT,
)
_RELATIVE = st.builds(lambda p: p or "x", _PATH)


@dataclass(frozen=True)
class Item:
    item_id: str | None
    link: str | None
    permalink: bool | None  # RSS isPermaLink: None leaves it out (the default is true)


_ITEMS = st.lists(
    st.builds(
        Item,
        st.one_of(st.none(), _TEXT, _ABSOLUTE, _RELATIVE),
        st.one_of(st.none(), _ABSOLUTE, _RELATIVE),
        st.one_of(st.none(), st.booleans()),
    ),
    min_size=1,
    max_size=6,
    unique_by=(lambda i: (i.item_id or "").strip(), lambda i: i.link or ""),
)


def _rss(items: list[Item], xml_base: str | None) -> tuple[bytes, list[str]]:
    chunks = []
    for n, item in enumerate(items):
        parts = [f"<title>item {n}</title>"]
        if item.link is not None:
            parts.append(f"<link>{escape(item.link)}</link>")
        if item.item_id is not None:
            attr = "" if item.permalink is None else f' isPermaLink="{str(item.permalink).lower()}"'
            parts.append(f"<guid{attr}>{escape(item.item_id)}</guid>")
        chunks.append("<item>" + "".join(parts) + "</item>")
    base = f" xml:base={quoteattr(xml_base)}" if xml_base else ""
    doc = f'<rss version="2.0"><channel{base}><title>t</title>{"".join(chunks)}</channel></rss>'
    return doc.encode("utf-8"), chunks


def _atom(items: list[Item], xml_base: str | None) -> tuple[bytes, list[str]]:
    chunks = []
    for n, item in enumerate(items):
        parts = [f"<title>item {n}</title>"]
        if item.link is not None:
            parts.append(f"<link href={quoteattr(item.link)}/>")
        if item.item_id is not None:
            parts.append(f"<id>{escape(item.item_id)}</id>")
        chunks.append("<entry>" + "".join(parts) + "</entry>")
    base = f" xml:base={quoteattr(xml_base)}" if xml_base else ""
    doc = (
        f'<feed xmlns="http://www.w3.org/2005/Atom"{base}><title>t</title>{"".join(chunks)}</feed>'
    )
    return doc.encode("utf-8"), chunks


def _canonical(url: str) -> str | None:
    try:
        return canonicalize_url(url)
    except ValueError:
        return None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=_ITEMS,
    atom=st.booleans(),
    xml_base=st.one_of(st.none(), st.just("http://base.example/dir/")),
    feed_dir=_PATH,
)
def test_source_item_id_is_in_the_item_and_its_link_is_the_items(
    items: list[Item], atom: bool, xml_base: str | None, feed_dir: str
) -> None:
    body, chunks = (_atom if atom else _rss)(items, xml_base)
    base_url = f"http://127.0.0.1:8000/{feed_dir}/feed.xml"
    parsed = parse_feed(
        "prop", body, base_url=base_url, content_type=None, now=NOW, window_from=None
    )
    assert len(parsed.candidates) + len(parsed.rejections) == len(items)
    bases = [base_url] + ([urljoin(base_url, xml_base)] if xml_base else [])
    for cand in parsed.candidates:
        item, text = items[cand.position], html.unescape(chunks[cand.position])
        written_id = (item.item_id or "").strip()
        if written_id:
            assert cand.source_item_id == written_id
            assert cand.source_item_id in text
        else:
            assert cand.source_item_id == cand.canonical_url
        carried = {_canonical(urljoin(b, item.link)) for b in bases if item.link is not None}
        if is_absolute_http(written_id):
            carried.add(_canonical(written_id))
        assert _canonical(cand.link) in carried, (cand.link, item)
    for rejection in parsed.rejections:
        assert rejection.position is not None
        item = items[rejection.position]
        written_id = (item.item_id or "").strip()
        assert not is_absolute_http(written_id)
        assert rejection.reason in ("no-link", "unidentifiable", "invalid-item")
