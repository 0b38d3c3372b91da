"""`radar sources add URL`: the feed a URL offers (registry/discovery.py) as one new, pending
Source note. Never overwrites a file (it is created once, by a hard link), never adds a URL the
registry already holds, and writes nothing when nothing usable was found."""

from __future__ import annotations

import contextlib
import re
from datetime import datetime
from pathlib import Path

from radar_pipeline.core.acquire.fetch import Fetcher
from radar_pipeline.core.clock import format_utc
from radar_pipeline.core.contract.sources import AddedSource, AddOutput, FeedCandidate
from radar_pipeline.core.errors import RegistryError
from radar_pipeline.core.files import create_once
from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline.core.layout import SOURCES_DIR
from radar_pipeline.core.registry.discovery import COMMON_PATHS, WORDPRESS_SPEC, discover
from radar_pipeline.core.registry.issues import http_url_problem
from radar_pipeline.core.registry.opml import unique_id, url_key
from radar_pipeline.core.registry.pending import pending_note
from radar_pipeline.core.registry.sources import load_registry, validate_source
from radar_pipeline.core.text import inert_markdown, inert_property

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}$")
# The keys of a WordPress posts Source (the documented REST paths).
WORDPRESS_KEYS = {
    "itemsPath": WORDPRESS_SPEC.items_path,
    "titlePath": WORDPRESS_SPEC.title_path,
    "linkPath": WORDPRESS_SPEC.link_path,
    "idPath": WORDPRESS_SPEC.id_path,
    "datePath": WORDPRESS_SPEC.date_path,
    "summaryPath": WORDPRESS_SPEC.summary_path,
}


def add_source(
    vault: Path, url: str, requested_id: str | None, fetcher: Fetcher, now: datetime
) -> AddOutput:
    """Find the feeds `url` offers and write the first as a pending Source note."""
    problem = http_url_problem(url)
    if problem:
        return _nothing_added((), f"{url} is not a usable URL: it {problem}")
    if requested_id is not None and not _ID_RE.fullmatch(requested_id):
        return _nothing_added((), f"--id {requested_id!r} must be 2-63 of a-z, 0-9 and '-'")
    registered = registered_urls(vault)
    if url_key(url) in registered:
        return _nothing_added((), f"{url} is {registered[url_key(url)]}")
    found = discover(fetcher, url, now)
    if found.problem:
        return _nothing_added((), f"cannot read {url}: {found.problem}")
    if not found.candidates:
        paths = ", ".join(p for p, _ in COMMON_PATHS)
        return _nothing_added(
            (),
            f"no feed found at {url}: its head advertises no RSS, Atom or JSON Feed and no "
            f"WordPress REST API, and none of {paths} answered with a feed",
        )
    chosen = found.candidates[0]
    if url_key(chosen.url) in registered:
        reason = registered[url_key(chosen.url)]
        return _nothing_added(found.candidates, f"its feed {chosen.url} is {reason}")
    taken = _taken_ids(vault)
    if requested_id and requested_id.lower() in taken:
        # Another file may declare the id under another name: a second declaration would make
        # both Sources inactive (a duplicate id), so it is refused like an existing file.
        return _nothing_added(found.candidates, f"a Source with id {requested_id} already exists")
    source_id = requested_id or unique_id(chosen.title, chosen.url, taken)
    path = vault / SOURCES_DIR / f"{source_id}.md"
    text = source_note(source_id, chosen, url, now)
    _, problems = validate_source(split_frontmatter(text)[0])
    if problems:  # a guard: what we write must be a valid Source
        listed = "; ".join(f"{code}: {message}" for code, message in problems)
        return _nothing_added(found.candidates, f"the note would be invalid: {listed}")
    if not create_once(path, text):
        return _nothing_added(
            found.candidates, f"{SOURCES_DIR.as_posix()}/{path.name} already exists"
        )
    added = AddedSource(
        id=source_id, path=(SOURCES_DIR / path.name).as_posix(), url=chosen.url, kind=chosen.kind
    )
    return AddOutput(added=added, candidates=found.candidates)


def _nothing_added(candidates: tuple[FeedCandidate, ...], problem: str) -> AddOutput:
    return AddOutput(added=None, candidates=candidates, problem=problem)


def registered_urls(vault: Path) -> dict[str, str]:
    """The URL keys of every Source file (valid or not), each with the reason to give."""
    urls = {
        url_key(r.source.url): f"already registered as {r.source.id}"
        for r in load_registry(vault).sources
    }
    for entry in sorted((vault / SOURCES_DIR).glob("*.md")):
        with contextlib.suppress(OSError, UnicodeDecodeError, RegistryError):
            fm, _ = split_frontmatter(entry.read_text(encoding="utf-8"))
            if isinstance(fm.get("url"), str):
                where = f"already in {SOURCES_DIR.as_posix()}/{entry.name}"
                urls.setdefault(url_key(fm["url"]), where)
    return urls


def _taken_ids(vault: Path) -> set[str]:
    folder = vault / SOURCES_DIR
    taken = {entry.stem.lower() for entry in folder.glob("*.md")} if folder.is_dir() else set()
    return taken | {r.source.id for r in load_registry(vault).sources}


def source_note(source_id: str, candidate: FeedCandidate, asked: str, now: datetime) -> str:
    """A pending Source note for one discovered feed: the contract's keys, then a body."""
    name = inert_property(candidate.title) or source_id
    lines = [
        f"Added on {format_utc(now)} by `radar sources add` from {inert_markdown(asked)}: "
        f"{candidate.kind}, {candidate.items} items when found.",
        "",
        "**Not collected yet**: `legalAssessment: pending`. Read the publisher's terms, try it",
        f"with `radar sources try {source_id}`, then set `legalAssessment: approved` (or",
        "`rejected`) and review the role, priority and cadence.",
    ]
    method_keys = WORDPRESS_KEYS if candidate.kind == "json" else None
    tags = ["radar/source", "radar/added"]
    return pending_note(
        source_id, name, candidate.url, candidate.kind, tags, lines, method_keys=method_keys
    )
