"""What each item of an RSS/Atom document says in its bytes: its id and its text links.

feedparser resolves an item's `id` (RSS `guid`, Atom `id`) as a relative URI against the
document's base (`xml:base`, or the content location), so an opaque id like `t3_glvkc5` comes
back as `http://<host>/<dir>/t3_glvkc5`; it also copies a permalink guid into `link`
(`guidislink`) and prefers a `uri`/`url` attribute over a link element's text. None of that
can be switched off through its public API (`xml:base` resolves even without a content
location), so the id and the link texts are read here from the same bytes with lxml, a strict
XML parser (libxml2: no network, no DTD, no entity expansion), and matched to feedparser's
entries by position. When the document is not well-formed XML, libxml2's recovery mode reads
it instead, and an id taken from a recovered or a feedparser reading counts only if it occurs
in the document's text as written (entities decoded).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import cached_property
from html.entities import html5

from lxml import etree

# The namespaces feedparser reads an item's elements in (none: RSS 0.9x/2.0).
_FEED_NAMESPACES = frozenset(
    {
        "",
        "http://www.w3.org/2005/Atom",
        "http://purl.org/atom/ns#",
        "http://purl.org/rss/1.0/",
        "http://my.netscape.com/rdf/simple/0.9/",
        "http://backend.userland.com/rss2",
        "http://blogs.law.harvard.edu/tech/rss",
    }
)
_RDF_ABOUT = "{http://www.w3.org/1999/02/22-rdf-syntax-ns#}about"
_ITEM_NAMES = frozenset({"item", "entry"})
# HTML's named entities (`&nbsp;`) make a feed ill-formed XML, and feedparser's loose parser
# reads them anyway: outside CDATA sections they are decoded before the strict reading. XML's
# own five are never matched (escaped HTML holds thousands of `&lt;`, each a Python call), and
# none of their characters can start a match, so skipping them changes nothing.
_CDATA_OR_ENTITY = re.compile(
    rb"<!\[CDATA\[.*?\]\]>|&(?!(?:amp|lt|gt|quot|apos);)([A-Za-z][A-Za-z0-9]{1,31});", re.DOTALL
)
_ID_NAMES = frozenset({"guid", "id"})


@dataclass(frozen=True)
class ItemBytes:
    """One item as its bytes say it."""

    item_id: str | None  # the id element's text (None: the item has no id element)
    link_texts: tuple[str, ...]  # the text of each `<link>` element, in order


@dataclass(frozen=True)
class FeedBytes:
    """The items of a document as written, and how they were read."""

    items: tuple[ItemBytes, ...]
    strict: bool  # True: well-formed XML, read strictly; False: libxml2's recovery read it
    utf8: bytes  # the document as feedparser read it

    @cached_property
    def text(self) -> str:
        """The document's text with entities decoded (what an id must occur in); decoded only
        when a reading needs the check, never for a well-formed feed."""
        return html.unescape(self.utf8.decode("utf-8", errors="replace"))

    def id_as_written(self, position: int, feedparser_id: str) -> str:
        """The item's id as the bytes wrote it, or "" when no reading can vouch for one.

        A strict reading is the bytes by construction. A recovered reading, or feedparser's
        (its loose parser leaves entities as written), counts only if it occurs in the text."""
        found = self.items[position].item_id if position < len(self.items) else None
        if found is not None and (self.strict or found.strip() in self.text):
            return found
        decoded = html.unescape(feedparser_id).strip()
        if decoded and decoded in self.text:
            return decoded
        return ""

    def link_texts(self, position: int) -> tuple[str, ...]:
        return self.items[position].link_texts if position < len(self.items) else ()


def read_feed_bytes(utf8: bytes, entries: int) -> FeedBytes:
    """Read the items of `utf8` (the UTF-8 bytes feedparser read), expecting `entries` items.

    The items are usable by position only when the reading finds exactly as many items as
    feedparser did; otherwise none are, and only the text check remains."""
    for recover in (False, True):
        items = _items(_decode_html_entities(utf8), recover=recover)
        if items is not None and len(items) == entries:
            return FeedBytes(items, strict=not recover, utf8=utf8)
    return FeedBytes((), strict=False, utf8=utf8)


def _decode_html_entities(utf8: bytes) -> bytes:
    def decode(match: re.Match[bytes]) -> bytes:
        name = match.group(1)
        if name is None:
            return match.group(0)
        char = html5.get(name.decode("ascii") + ";")
        if char is None:
            return match.group(0)  # unknown: left for the parser to refuse
        return html.escape(char, quote=False).encode("utf-8")

    return _CDATA_OR_ENTITY.sub(decode, utf8)


def _items(utf8: bytes, *, recover: bool) -> tuple[ItemBytes, ...] | None:
    parser = etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        recover=recover,
        remove_comments=True,
        remove_pis=True,
    )
    try:
        root = etree.fromstring(utf8, parser)
    except etree.XMLSyntaxError:
        return None
    if root is None:
        return None
    return tuple(_item(element) for element in root.iter() if _is(element, _ITEM_NAMES))


def _is(element: etree._Element, names: frozenset[str]) -> bool:
    tag = element.tag
    if not isinstance(tag, str):
        return False  # comments, processing instructions, entities
    # "{namespace}local", or "local"; recovery keeps an undeclared prefix ("itunes:x"): no match
    namespace, _, local = tag[1:].partition("}") if tag.startswith("{") else ("", "", tag)
    return local in names and namespace in _FEED_NAMESPACES


def _item(element: etree._Element) -> ItemBytes:
    # feedparser takes rdf:about (RSS 1.0) first, and a later id element replaces it.
    item_id: str | None = element.get(_RDF_ABOUT)
    links: list[str] = []
    for child in element:
        if _is(child, _ID_NAMES):
            item_id = "".join(child.itertext()).strip()
        elif _is(child, frozenset({"link"})):
            text = "".join(child.itertext()).strip()
            if text:
                links.append(text)
    return ItemBytes(item_id, tuple(links))
