"""OPML in and out of the Source Registry: `radar sources import FILE` and `radar sources export`.

Import turns each feed outline (an `outline` with an `xmlUrl`) into a new Source note with
`legalAssessment: pending`, so nothing is fetched until a person approves it. The id comes from
the outline's title (unique in the registry), the folder outlines above it (or a `category`
attribute) become tags. A URL already registered, repeated in the file, or not an http(s) URL
is skipped with a reason; no file is ever overwritten (a new file is linked to its name, which
fails if the name exists). Export writes OPML 2.0 of every valid Source.

The OPML is parsed by expat into xml.etree elements with the care of defusedxml: a document
type declaration (where entities, and so entity expansion bombs, would live) is refused, no
external resource is ever read, and the file is bounded in size.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from xml.parsers import expat

import yaml

from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.errors import RegistryError
from radar_pipeline.core.files import create_once
from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline.core.jsontypes import Frontmatter, JsonObject
from radar_pipeline.core.layout import SOURCES_DIR
from radar_pipeline.core.registry.sources import (
    RegistrySnapshot,
    http_url_problem,
    validate_source,
)
from radar_pipeline.core.text import inert_markdown, inert_property, one_line

MAX_OPML_BYTES = 5_000_000
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}$")
_TAG_PART = re.compile(r"[^a-z0-9_-]+")


# ---- parsing ----------------------------------------------------------------------------------


def parse_opml(data: bytes) -> ET.Element:
    """The OPML document as an element tree; RegistryError for anything that is not safe,
    well-formed OPML."""
    if len(data) > MAX_OPML_BYTES:
        raise RegistryError(f"import: the OPML file is over {MAX_OPML_BYTES} bytes")
    builder = ET.TreeBuilder()
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)

    def refuse(*_: Any) -> None:
        raise RegistryError("import: the OPML declares a DOCTYPE or entities; refused")

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.ExternalEntityRefHandler = refuse  # type: ignore[assignment]
    parser.StartElementHandler = lambda tag, attrs: builder.start(tag, attrs)
    parser.EndElementHandler = lambda tag: builder.end(tag)
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise RegistryError(f"import: the file is not well-formed XML ({exc})") from exc
    root = builder.close()
    if root.tag != "opml" or root.find("body") is None:
        raise RegistryError("import: the file is not OPML (no <opml> with a <body>)")
    return root


@dataclass(frozen=True)
class FeedOutline:
    """One feed outline: what the OPML says about it, as given."""

    url: str
    title: str
    html_url: str
    kind: str  # the outline's `type` (rss, atom, ...), lowercased
    folders: tuple[str, ...]  # the folder outlines above it, outermost first, and categories


def feed_outlines(root: ET.Element) -> Iterator[FeedOutline]:
    """Every outline with an `xmlUrl`, in document order, with its folders."""
    body = root.find("body")
    if body is not None:
        yield from _walk(body, ())


def _walk(parent: ET.Element, folders: tuple[str, ...]) -> Iterator[FeedOutline]:
    for outline in parent.findall("outline"):
        attrs = outline.attrib
        label = (attrs.get("title") or attrs.get("text") or "").strip()
        if "xmlUrl" in attrs:
            categories = tuple(
                part.strip()
                for group in attrs.get("category", "").split(",")
                for part in group.split("/")
                if part.strip()
            )
            yield FeedOutline(
                url=attrs["xmlUrl"].strip(),
                title=label,
                html_url=attrs.get("htmlUrl", "").strip(),
                kind=attrs.get("type", "").strip().lower(),
                folders=folders + categories,
            )
        yield from _walk(outline, folders + ((label,) if label and "xmlUrl" not in attrs else ()))


# ---- import -----------------------------------------------------------------------------------


@dataclass
class ImportResult:
    """The `radar sources import --json` object: what was created and what was skipped."""

    imported: list[dict[str, str]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> JsonObject:
        return {"imported": self.imported, "skipped": self.skipped}


def import_opml(
    vault: Path, data: bytes, snapshot: RegistrySnapshot, now: datetime, origin: str
) -> ImportResult:
    """One new pending Source note per new, valid feed outline of `data` (see the module)."""
    root = parse_opml(data)
    folder = vault / SOURCES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    known_urls, taken_ids = _registered(vault, snapshot)
    result = ImportResult()
    for outline in feed_outlines(root):
        problem = http_url_problem(outline.url) if outline.url else "the outline has no xmlUrl"
        if not problem and inert_property(outline.url) != outline.url:
            problem = "holds characters Obsidian would act on ([[, ]], <)"
        key = url_key(outline.url)
        if problem:
            result.skipped.append({"url": outline.url, "reason": f"invalid URL: {problem}"})
            continue
        if key in known_urls:
            result.skipped.append({"url": outline.url, "reason": known_urls[key]})
            continue
        source_id = _unique_id(outline, taken_ids)
        text = source_note(source_id, outline, now, origin)
        fm, _ = split_frontmatter(text)
        _, problems = validate_source(fm)
        if problems:  # a guard: what we write must be a valid Source
            reason = "; ".join(f"{k}: {m}" for k, m in problems)
            result.skipped.append({"url": outline.url, "reason": f"invalid Source: {reason}"})
            continue
        path = folder / f"{source_id}.md"
        if not create_once(path, text):
            taken_ids.add(source_id)
            result.skipped.append({"url": outline.url, "reason": f"{path.name} already exists"})
            continue
        taken_ids.add(source_id)
        known_urls[key] = f"already imported from this file as {source_id}"
        relative = (SOURCES_DIR / path.name).as_posix()
        result.imported.append({"id": source_id, "path": relative, "url": outline.url})
    return result


def url_key(url: str) -> str:
    """The form two URLs of one feed share: scheme and host lowercased, default port, empty
    path and fragment dropped (the same feed written twice must not make two Sources)."""
    try:
        parts = urlsplit(url.strip())
        host = (parts.hostname or "").rstrip(".")
        port = parts.port
    except ValueError:
        return url.strip()
    scheme = parts.scheme.lower()
    netloc = host if port in (None, 80 if scheme == "http" else 443) else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))


def _registered(vault: Path, snapshot: RegistrySnapshot) -> tuple[dict[str, str], set[str]]:
    """The URLs already in the registry (with the reason to give) and the ids and file names
    taken, from every Source file, valid or not."""
    urls: dict[str, str] = {}
    ids: set[str] = set()
    for record in snapshot.sources:
        ids.add(record.source.id)
        urls[url_key(record.source.url)] = f"already registered as {record.source.id}"
    folder = vault / SOURCES_DIR
    for entry in sorted(folder.glob("*.md")):
        ids.add(entry.stem.lower())
        with contextlib.suppress(OSError, UnicodeDecodeError, RegistryError):
            fm, _ = split_frontmatter(entry.read_text(encoding="utf-8"))
            if isinstance(fm.get("url"), str):
                key = url_key(fm["url"])
                urls.setdefault(key, f"already in {SOURCES_DIR.as_posix()}/{entry.name}")
            if isinstance(fm.get("id"), str):
                ids.add(fm["id"])
    return urls, ids


def slug(text: str, limit: int = 48) -> str:
    """Lowercase ASCII words joined by '-' (accents dropped), at most `limit` characters."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    out = "-".join(words)[:limit].strip("-")
    return out


def _unique_id(outline: FeedOutline, taken: set[str]) -> str:
    base = slug(outline.title)
    if len(base) < 2:
        base = slug(urlsplit(outline.url).hostname or "") or "feed"
    if len(base) < 2:
        base = "feed"
    candidate, n = base, 2
    while candidate in taken or not _ID_RE.fullmatch(candidate):
        candidate = f"{base[:56]}-{n}"
        n += 1
    return candidate


def source_note(source_id: str, outline: FeedOutline, now: datetime, origin: str) -> str:
    """A pending Source note for one outline: the contract's keys, then a body for people."""
    name = inert_property(one_line(outline.title, 200, html=False)) or source_id
    tags = ["radar/source", "radar/imported"]
    tags += [f"radar/folder/{t}" for t in (_tag(f) for f in outline.folders) if t]
    fm: Frontmatter = {
        "entityType": "source",
        "schemaVersion": 1,
        "id": source_id,
        "name": name,
        "url": outline.url,
        "role": "discovery",
        "sourceType": "community",
        "authorityScore": 0.5,
        "legalAssessment": "pending",
        "priority": "normal",
        "collectionMethod": "atom" if outline.kind == "atom" else "rss",
        "enabled": True,
        "cadence": "P1D",
        "minIntervalSeconds": 3600,
        "fullText": "none",
        "tags": list(dict.fromkeys(tags)),
        "lastAttemptAt": None,
        "lastSuccessAt": None,
        "errorState": None,
        "blockedReason": None,
        "httpStatus": None,
        "etag": None,
        "lastModified": None,
        "lastResponseAt": None,
    }
    header = yaml.safe_dump(fm, sort_keys=False, allow_unicode=True, width=10_000)
    header = header.replace(": null\n", ":\n")
    lines = [
        f"# {inert_markdown(name)}",
        "",
        f"Imported from {inert_markdown(origin)} on {format_utc(now)} by `radar sources import`.",
        "",
        "**Not collected yet**: `legalAssessment: pending`. Read the publisher's terms, then set",
        "`legalAssessment: approved` (or `rejected`) and review the role, priority and cadence.",
    ]
    if outline.folders:
        folders = " / ".join(inert_markdown(one_line(f, 100, html=False)) for f in outline.folders)
        lines += ["", f"Folder in the feed reader: {folders}"]
    if outline.html_url and not http_url_problem(outline.html_url):
        lines += ["", f"Site: {inert_markdown(one_line(outline.html_url, 500, html=False))}"]
    return f"---\n{header}---\n\n" + "\n".join(lines) + "\n"


def _tag(folder: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", folder).encode("ascii", "ignore").decode()
    return _TAG_PART.sub("-", ascii_text.lower()).strip("-")[:60]


# ---- export -----------------------------------------------------------------------------------

EXPORTED_AS_FEEDS = frozenset({"rss", "atom", "jsonfeed"})


def export_opml(snapshot: RegistrySnapshot, now: datetime) -> bytes:
    """OPML 2.0 of every valid Source with an http(s) URL (fixtures live in the vault), grouped
    by the Source's role. A feed (rss, atom, jsonfeed) is an `rss` outline with its `xmlUrl`; a
    page or JSON answer read with selectors or paths is a `link` outline with its `url`, which
    no feed reader (nor our import) mistakes for a feed."""
    root = ET.Element("opml", version="2.0")
    head = ET.SubElement(root, "head")
    ET.SubElement(head, "title").text = "Radar Sources"
    ET.SubElement(head, "dateCreated").text = format_datetime(now, usegmt=True)
    ET.SubElement(head, "docs").text = "https://opml.org/spec2.opml"
    body = ET.SubElement(root, "body")
    groups: dict[str, ET.Element] = {}
    for record in _exportable(snapshot.sources):
        src = record.source
        group = groups.get(src.role)
        if group is None:
            group = groups[src.role] = ET.SubElement(body, "outline", text=src.role, title=src.role)
        address = {"type": "link", "url": src.url}
        if src.collection_method in EXPORTED_AS_FEEDS:
            address = {"type": "rss", "xmlUrl": src.url}
        ET.SubElement(group, "outline", text=src.name, title=src.name, **address)
    ET.indent(root)
    text = ET.tostring(root, encoding="unicode")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + text + "\n").encode("utf-8")


def _exportable(records: Sequence[Any]) -> list[Any]:
    return [r for r in records if not r.source.is_fixture]
