"""OPML in and out of the Source Registry: `radar sources import FILE` and `radar sources export`.

Import turns each feed outline (an `outline` with an `xmlUrl`; element and attribute names are
compared without case, as LiveJournal writes `xmlURL`) into a new Source note with
`legalAssessment: pending`, so nothing is fetched until a person approves it. The id comes from
the outline's title (unique in the registry); the folder outlines above it (or a `category`
attribute) become `radar/folder/<name>` tags in any script, and a feed listed in several
folders is one Source with every folder's tag. A URL already registered, repeated in the file,
not an http(s) URL, or one the address policy refuses (a loopback or private address, unless
RADAR_ALLOWED_PRIVATE_HOSTS allows it; judged without a DNS lookup) is skipped with a reason;
no file is ever overwritten (a new file is linked to its name, which fails if the name exists).
The kind is the outline's `type` (`atom`, `jsonfeed`, else `rss`): import never fetches, and an
`rss` Source that answers with a JSON Feed is read as one by the parse stage. Export writes OPML
2.0 of every valid Source, nested by its folder tags, with `htmlUrl` and the kind, so an export
read back gives the same Sources with the same tags.

Reading the file safely (no DOCTYPE, no entities, broken outlines cut out and reported) is
`opml_read.py`'s job.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
import unicodedata
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from datetime import datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from radar_pipeline.core.acquire.address_policy import check_addresses, check_url, normalise_host
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.contract.sources import ImportedSource, ImportOutput, SkippedFeed
from radar_pipeline.core.errors import FetchError, RegistryError
from radar_pipeline.core.files import create_once
from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline.core.jsontypes import Frontmatter
from radar_pipeline.core.layout import SOURCES_DIR
from radar_pipeline.core.registry.opml_read import FeedOutline, feed_outlines, parse_opml
from radar_pipeline.core.registry.pending import pending_note
from radar_pipeline.core.registry.sources import (
    RegistrySnapshot,
    http_url_problem,
    validate_source,
)
from radar_pipeline.core.text import inert_markdown, inert_property, one_line

FOLDER_TAG = "radar/folder/"
# Where import keeps an outline's `htmlUrl` (the site), so that export can write it back.
SITE_KEY = "siteUrl"
FOLDERS_KEY = "folders"
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}$")


# ---- import -----------------------------------------------------------------------------------


def _merged(outlines: Iterable[FeedOutline]) -> dict[str, FeedOutline]:
    """One outline per feed (by url_key), holding every folder it is listed in, in order."""
    merged: dict[str, FeedOutline] = {}
    for outline in outlines:
        key = url_key(outline.url)
        first = merged.get(key)
        if first is None:
            merged[key] = outline
            continue
        merged[key] = FeedOutline(
            url=first.url,
            title=first.title or outline.title,
            html_url=first.html_url or outline.html_url,
            kind=first.kind or outline.kind,
            folders=tuple(dict.fromkeys(first.folders + outline.folders)),
            paths=tuple(dict.fromkeys(first.paths + outline.paths)),
        )
    return merged


def import_opml(
    vault: Path,
    data: bytes,
    snapshot: RegistrySnapshot,
    now: datetime,
    origin: str,
    allowed_private_hosts: Iterable[str] = (),
) -> ImportOutput:
    """One new pending Source note per new, valid feed of `data` (see the module).

    `allowed_private_hosts`: RADAR_ALLOWED_PRIVATE_HOSTS, the hosts the fetch stage may reach
    although they are loopback or private; any other such address is skipped here already.
    """
    root, broken = parse_opml(data)
    folder = vault / SOURCES_DIR
    folder.mkdir(parents=True, exist_ok=True)
    known_urls, taken_ids = _registered(vault, snapshot)
    allowed = frozenset(allowed_private_hosts)
    imported: list[ImportedSource] = []
    skipped = [SkippedFeed(url=b.url, reason=b.reason) for b in broken]
    outlines = list(feed_outlines(root))
    feeds = _merged(outlines)
    for listed in outlines:
        key = url_key(listed.url)
        outline = feeds[key]
        problem = _url_problem(listed.url, allowed)
        if problem:
            skipped.append(SkippedFeed(url=listed.url, reason=problem))
            continue
        if key in known_urls:
            skipped.append(SkippedFeed(url=listed.url, reason=known_urls[key]))
            continue
        source_id = unique_id(outline.title, outline.url, taken_ids)
        text = source_note(source_id, outline, now, origin)
        fm, _ = split_frontmatter(text)
        _, problems = validate_source(fm)
        if problems:  # a guard: what we write must be a valid Source
            reason = "; ".join(f"{k}: {m}" for k, m in problems)
            skipped.append(SkippedFeed(url=listed.url, reason=f"invalid Source: {reason}"))
            continue
        path = folder / f"{source_id}.md"
        if not create_once(path, text):
            taken_ids.add(source_id)
            skipped.append(SkippedFeed(url=listed.url, reason=f"{path.name} already exists"))
            continue
        taken_ids.add(source_id)
        known_urls[key] = (
            f"already imported from this file as {source_id} (each folder it is listed in "
            "is a tag of that Source)"
        )
        relative = (SOURCES_DIR / path.name).as_posix()
        imported.append(ImportedSource(id=source_id, path=relative, url=outline.url))
    return ImportOutput(imported=tuple(imported), skipped=tuple(skipped))


def _url_problem(url: str, allowed: frozenset[str]) -> str | None:
    """Why `url` cannot become a Source (the reason to skip it with), or None."""
    problem = http_url_problem(url) if url else "the outline has no xmlUrl"
    if not problem and inert_property(url) != url:
        problem = "holds characters Obsidian would act on ([[, ]], <)"
    if problem:
        return f"invalid URL: {problem}"
    refused = address_problem(url, allowed)
    if refused:  # a refused private address names RADAR_ALLOWED_PRIVATE_HOSTS itself
        return f"refused by the address policy: {refused} (the fetch would refuse it too)"
    return None


def address_problem(url: str, allowed: Iterable[str]) -> str | None:
    """What the fetch stage's address policy says against `url` without any DNS lookup: an
    IP literal that is loopback, private, link-local or reserved, or `localhost` (RFC 6761:
    always loopback), unless allowed; None otherwise."""
    try:
        parsed = check_url(url, allowed)
        host = normalise_host(parsed.host)
        if host == "localhost" or host.endswith(".localhost"):
            check_addresses(host, [ipaddress.ip_address("127.0.0.1")], allowed)
    except FetchError as exc:
        return exc.message
    return None


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


def unique_id(title: str, url: str, taken: set[str]) -> str:
    """A new Source id from a feed's title (else its host), not in `taken` (`-2`, `-3`, ...)."""
    base = slug(title)
    if len(base) < 2:
        base = slug(urlsplit(url).hostname or "") or "feed"
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
    tags += [f"{FOLDER_TAG}{t}" for t in (folder_tag(f) for f in outline.folders) if t]
    site = bool(outline.html_url) and not http_url_problem(outline.html_url)
    site = site and inert_property(outline.html_url) == outline.html_url
    lines = [
        f"Imported from {inert_markdown(origin)} on {format_utc(now)} by `radar sources import`.",
        "",
        "**Not collected yet**: `legalAssessment: pending`. Read the publisher's terms, then set",
        "`legalAssessment: approved` (or `rejected`) and review the role, priority and cadence.",
    ]
    if outline.folders:
        folders = " / ".join(inert_markdown(one_line(f, 100, html=False)) for f in outline.folders)
        lines += ["", f"Folder in the feed reader: {folders}"]
    if site:
        lines += ["", f"Site: {inert_markdown(one_line(outline.html_url, 500, html=False))}"]
    # The reader's folders as paths (one per placement, "" the top level): export writes them
    # back as nested outlines; the tags alone cannot tell a path from two folders.
    extra = {FOLDERS_KEY: _folders(outline.paths), SITE_KEY: outline.html_url if site else None}
    method = feed_kind(outline.kind)
    tags = list(dict.fromkeys(tags))
    return pending_note(source_id, name, outline.url, method, tags, lines, extra_keys=extra)


def _folders(paths: tuple[str, ...]) -> list[str] | None:
    """The `folders` value: None for a feed only at the top level."""
    if not any(paths):
        return None
    return [inert_property(one_line(p, 300, html=False)) for p in paths]


# An OPML outline's `type` for a feed, and the collectionMethod it becomes. Readers write
# `rss` for every feed (NetNewsWire's JSON Feeds too: the parse stage reads those as JSON Feeds).
KIND_BY_TYPE = {"atom": "atom", "jsonfeed": "jsonfeed", "json": "jsonfeed"}


def feed_kind(outline_type: str) -> str:
    """The collectionMethod of a feed outline of this `type` (rss unless it says otherwise)."""
    return KIND_BY_TYPE.get(outline_type, "rss")


def folder_tag(folder: str) -> str:
    """A folder's name as one Obsidian tag segment: letters and digits of any script (NFKC,
    lowercased), `_` and `-`; everything else (spaces, `/`, `#`, punctuation) becomes `-`."""
    text = unicodedata.normalize("NFKC", folder).lower()
    kept = "".join(ch if ch in "_-" or unicodedata.category(ch)[0] in "LMN" else "-" for ch in text)
    return re.sub(r"-{2,}", "-", kept).strip("-")[:60].strip("-")


# ---- export -----------------------------------------------------------------------------------

EXPORTED_AS_FEEDS = frozenset({"rss", "atom", "jsonfeed"})


def export_opml(snapshot: RegistrySnapshot, now: datetime) -> bytes:
    """OPML 2.0 of every valid Source with an http(s) URL (fixtures live in the vault).

    A Source sits in the folder outlines its `radar/folder/...` tags name, nested in the order
    of its tags (how import wrote them), so import reads back the same tags. A feed (rss, atom,
    jsonfeed) is an outline of `type` its collectionMethod with its `xmlUrl` and, when import
    kept one, its `htmlUrl`; a page or JSON answer read with selectors or paths is a `link`
    outline with its `url`, which no feed reader (nor our import) mistakes for a feed."""
    root = ET.Element("opml", version="2.0")
    head = ET.SubElement(root, "head")
    ET.SubElement(head, "title").text = "Radar Sources"
    ET.SubElement(head, "dateCreated").text = format_datetime(now, usegmt=True)
    ET.SubElement(head, "docs").text = "https://opml.org/spec2.opml"
    body = ET.SubElement(root, "body")
    folders: dict[tuple[str, ...], ET.Element] = {(): body}
    for record in _exportable(snapshot.sources):
        src = record.source
        fm = _frontmatter(record.path)
        address = {"type": "link", "url": src.url}
        if src.collection_method in EXPORTED_AS_FEEDS:
            address = {"type": src.collection_method, "xmlUrl": src.url}
            site = fm.get(SITE_KEY)
            if isinstance(site, str) and site and not http_url_problem(site):
                address["htmlUrl"] = site
        for path in placements(fm):
            for depth in range(1, len(path) + 1):
                if path[:depth] not in folders:
                    name = path[depth - 1]
                    parent = folders[path[: depth - 1]]
                    folders[path[:depth]] = ET.SubElement(parent, "outline", text=name, title=name)
            ET.SubElement(folders[path], "outline", text=src.name, title=src.name, **address)
    ET.indent(root)
    text = ET.tostring(root, encoding="unicode")
    return ('<?xml version="1.0" encoding="UTF-8"?>\n' + text + "\n").encode("utf-8")


def placements(fm: Frontmatter) -> list[tuple[str, ...]]:
    """The folder paths a Source is exported in: its `folders` as import wrote them, else one
    path of its `radar/folder/<name>` tags in the order listed (a hand-written Source)."""
    listed = fm.get(FOLDERS_KEY)
    if isinstance(listed, list) and listed and all(isinstance(p, str) for p in listed):
        paths = [tuple(part for part in p.split("/") if part.strip()) for p in listed]
        return list(dict.fromkeys(paths))
    tags = fm.get("tags")
    if not isinstance(tags, list):
        return [()]
    names = (t[len(FOLDER_TAG) :] for t in tags if isinstance(t, str) and t.startswith(FOLDER_TAG))
    return [tuple(dict.fromkeys(n for n in names if n))]


def _frontmatter(path: Path) -> Frontmatter:
    """The Source file's frontmatter, for the keys the Source model does not carry (tags, the
    site); empty when the file went away or changed since the registry was read."""
    with contextlib.suppress(OSError, UnicodeDecodeError, RegistryError):
        fm, _ = split_frontmatter(path.read_text(encoding="utf-8"))
        return fm
    return {}


def _exportable(records: Sequence[Any]) -> list[Any]:
    return [r for r in records if not r.source.reads_vault]
