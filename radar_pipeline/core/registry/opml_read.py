"""Reading an OPML file safely: expat into xml.etree, no DOCTYPE, no entities, bounded.

This is defusedxml's care without the dependency: a document type declaration (where
entities, and so entity expansion bombs, would live) is refused, no external resource is ever
read, and the file is bounded in size. Element and attribute names are lowercased (LiveJournal
writes `xmlURL`). An outline that is not well-formed (an unescaped `&` or `<`) is cut out and
reported, and the rest is read, as other feed readers do (a broken head is emptied and
reported), also when the outline holds HTML markup with unescaped quotes and angle brackets in
an attribute (its tag ends where the OPML's own markup resumes, `_tag_end`); the file is
refused only when the broken part lies in no outline start tag and not in the head (a
truncated file, text between outlines), or when more than MAX_BROKEN_OUTLINES outlines are
broken (each costs one more parse).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from xml.parsers import expat

from radar_pipeline.core.errors import RegistryError

MAX_OPML_BYTES = 5_000_000
MAX_BROKEN_OUTLINES = 100
_XML_URL = re.compile(rb"""xmlurl\s*=\s*(["'])(.*?)\1""", re.IGNORECASE | re.DOTALL)
_OUTLINE_START = b"<outline"
# What may follow an outline's start tag in OPML (compared lowercased, after blanks).
_AFTER_OUTLINE_TAG = (b"<outline", b"</outline", b"</body", b"<!--")
_LOOKAHEAD = 256  # bytes read past a `>` to see what follows it (blanks, then the next tag)


@dataclass(frozen=True)
class BrokenOutline:
    """An outline cut out because it is not well-formed XML, and why."""

    url: str  # its xmlUrl as written, or "" (a folder, or no address to be read)
    line: int
    problem: str  # expat's words, such as "not well-formed (invalid token)"
    head: bool = False  # the broken part was the <head> (its title, owner, dates), not an outline

    @property
    def reason(self) -> str:
        if self.head:
            return (
                f"broken head (line {self.line}: {self.problem}): the head is ignored, the "
                "outlines are read"
            )
        if self.url:
            return f"broken outline (line {self.line}: {self.problem}): fix it in the OPML"
        return (
            f"broken folder outline (line {self.line}: {self.problem}): the feeds inside it "
            "are imported without its tag"
        )


class _Malformed(Exception):
    def __init__(self, at: int, line: int, problem: str) -> None:
        super().__init__(problem)
        self.at, self.line, self.problem = at, line, problem


def parse_opml(data: bytes) -> tuple[ET.Element, list[BrokenOutline]]:
    """The OPML document as an element tree (element and attribute names lowercased), and the
    outlines that had to be cut out; RegistryError for anything that is not safe OPML, or
    when no broken part can be isolated in one outline."""
    if len(data) > MAX_OPML_BYTES:
        raise RegistryError(f"import: the OPML file is over {MAX_OPML_BYTES} bytes")
    broken: list[BrokenOutline] = []
    while True:
        try:
            root = _parse_xml(data)
            break
        except _Malformed as exc:
            cut = _cut_outline(data, exc.at) if len(broken) < MAX_BROKEN_OUTLINES else None
            head = None if cut or any(b.head for b in broken) else _cut_head(data, exc.at)
            if head is not None:
                data = head
                broken.append(BrokenOutline("", exc.line, exc.problem, head=True))
                continue
            if cut is None:
                where = f"line {exc.line}"
                raise RegistryError(
                    f"import: the file is not well-formed XML ({exc.problem}: {where})"
                ) from exc
            data, url = cut
            broken.append(BrokenOutline(url=url, line=exc.line, problem=exc.problem))
    if root.tag != "opml" or root.find("body") is None:
        raise RegistryError("import: the file is not OPML (no <opml> with a <body>)")
    return root, broken


def _parse_xml(data: bytes) -> ET.Element:
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def refuse(*_: Any) -> None:
        raise RegistryError("import: the OPML declares a DOCTYPE or entities; refused")

    def start(tag: str, attrs: dict[str, str]) -> None:
        lowered: dict[str, str] = {}
        for name, value in attrs.items():
            lowered.setdefault(name.lower(), value)  # the first spelling of a name wins
        builder.start(tag.lower(), lowered)

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse  # type: ignore[assignment]
    parser.StartElementHandler = start
    parser.EndElementHandler = lambda tag: builder.end(tag.lower())
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise _Malformed(parser.ErrorByteIndex, exc.lineno, expat.ErrorString(exc.code)) from exc
    return builder.close()


def _cut_outline(data: bytes, at: int) -> tuple[bytes, str] | None:
    """`data` with the outline start tag holding byte `at` replaced by an empty outline (the
    same lines, so later line numbers hold), and its xmlUrl; None when `at` is in no outline
    start tag (a broken head, a truncated file)."""
    lowered = data.lower()
    start = lowered.rfind(_OUTLINE_START, 0, at + 1)
    if start < 0:
        return None
    after = data[start + len(_OUTLINE_START) : start + len(_OUTLINE_START) + 1]
    end = _tag_end(lowered, start)
    if end is None or end < at or not (after.isspace() or after in (b"/", b">")):
        return None  # no outline tag is open at `at`
    tag = data[start : end + 1]
    closing = b"/>" if tag.endswith(b"/>") else b">"
    empty = _OUTLINE_START + b"\n" * tag.count(b"\n") + closing
    match = _XML_URL.search(tag)
    url = match.group(2).decode("utf-8", errors="replace").strip() if match else ""
    return data[:start] + empty + data[end + 1 :], url


def _tag_end(lowered: bytes, start: int) -> int | None:
    """The `>` that closes the outline start tag at `start`: the first one followed (after
    blanks) by the next outline, the end of a folder or of the body, or the end of the file.
    Not simply the first `>`: a reader may write HTML markup, quotes and all, into an attribute
    (`description="... <a href="https://..." target="_blank">Basecamp</a>. Since 1999."`),
    and the tag only ends where the OPML's own markup resumes."""
    pos = start
    while (end := lowered.find(b">", pos + 1)) >= 0:
        rest = lowered[end + 1 : end + 1 + _LOOKAHEAD].lstrip()
        if not rest or rest.startswith(_AFTER_OUTLINE_TAG):
            return end
        pos = end
    return None


def _cut_head(data: bytes, at: int) -> bytes | None:
    """`data` with the <head> element holding byte `at` emptied (the same lines), or None."""
    lowered = data.lower()
    start = lowered.rfind(b"<head", 0, at + 1)
    close = lowered.find(b"</head>", at)
    after = lowered[start + 5 : start + 6]
    if start < 0 or close < 0 or not (after.isspace() or after == b">"):
        return None
    if lowered.find(b"<body", start, at) >= 0 or lowered.find(b"<outline", start, close) >= 0:
        return None  # the error is not in the head, or the head holds outlines
    end = close + len(b"</head>")
    return (
        data[:start] + b"<head>" + b"\n" * data.count(b"\n", start, end) + b"</head>" + data[end:]
    )


@dataclass(frozen=True)
class FeedOutline:
    """One feed outline: what the OPML says about it, as given."""

    url: str
    title: str
    html_url: str
    kind: str  # the outline's `type` (rss, atom, ...), lowercased
    folders: tuple[str, ...]  # the folder outlines above it, outermost first, and categories
    # Where the reader files it: the folder path above it, then each `category` path (slash-
    # delimited, OPML 2.0); one entry per placement, "" for the top level.
    paths: tuple[str, ...] = ()


def feed_outlines(root: ET.Element) -> Iterator[FeedOutline]:
    """Every outline with an `xmlUrl`, in document order, with its folders."""
    body = root.find("body")
    if body is not None:
        yield from _walk(body, ())


def _walk(parent: ET.Element, folders: tuple[str, ...]) -> Iterator[FeedOutline]:
    for outline in parent.findall("outline"):
        attrs = outline.attrib
        label = (attrs.get("title") or attrs.get("text") or "").strip()
        if "xmlurl" in attrs:
            groups = [
                tuple(part.strip() for part in group.split("/") if part.strip())
                for group in attrs.get("category", "").split(",")
            ]
            groups = [g for g in groups if g]
            yield FeedOutline(
                url=attrs["xmlurl"].strip(),
                title=label,
                html_url=attrs.get("htmlurl", "").strip(),
                kind=attrs.get("type", "").strip().lower(),
                folders=folders + tuple(part for group in groups for part in group),
                paths=tuple(dict.fromkeys("/".join(p) for p in [folders, *groups])),
            )
        yield from _walk(outline, folders + ((label,) if label and "xmlurl" not in attrs else ()))
