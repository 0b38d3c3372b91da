"""Signal files in the vault: rendering, atomic creation, reading back.

A Signal file is created once and never rewritten (people annotate Signals). Creation is
`core/files.create_once` in its batch form (`collect/signal_files.py`): a temp file in the
Signals folder, made durable, then a hard link to the target name: the link fails if the
target exists, so two writers can never both create it and no reader ever sees a partial file.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from radar_pipeline.core.contract.notes import PROVENANCE_FIELDS as PROVENANCE_FIELDS
from radar_pipeline.core.contract.notes import SIGNAL_ID_RE as SIGNAL_ID_RE
from radar_pipeline.core.contract.notes import SignalNote
from radar_pipeline.core.contract.outcomes import FileOutcome
from radar_pipeline.core.errors import VaultError
from radar_pipeline.core.files import fsync_dir, read_temp_name
from radar_pipeline.core.layout import SIGNALS_DIR, WRITTEN_DIRS
from radar_pipeline.core.text import (
    inert_markdown,
    inert_property,
    link_destination,
    one_line,
    wikilink,
)

# Properties that hold a link the pipeline made (`[[<note name>]]`), never feed text: the only
# values written with `[[`; a value that is not exactly one such link is made inert like any other.
LINK_FIELDS = frozenset({"source", "duplicateCandidateOf"})
_ONE_LINK = re.compile(r"\[\[([^\[\]]+)\]\]")
# The reference-style link to the original sits after the trailer: Obsidian renders it as the
# link in the body's first line, and the rendered body (what the audits measure) stays the
# title, the summary and the trailer, however long the address.
ORIGINAL_LINK_LABEL = "original"

CreateOutcome = FileOutcome  # what became of one Signal file: created, or reused


@dataclass(frozen=True)
class SignalDocument:
    """What goes into one Signal file: frontmatter (flat) and the inert summary body.

    A new note's frontmatter is a `SignalNote`'s (`of`); the document carries it as the plain
    mapping it writes, so the collection's workers render it on other cores as a plain value."""

    signal_id: str
    frontmatter: dict[str, Any]
    summary: str

    @classmethod
    def of(cls, note: SignalNote, summary: str) -> SignalDocument:
        """The document of a new note: its frontmatter as the model writes it."""
        return cls(note.id, note.frontmatter(), summary)

    def fields(self) -> dict[str, Any]:
        """The frontmatter as written: string values made inert (`render` reads them back)."""
        return {k: _inert_field(k, v) for k, v in self.frontmatter.items()}

    def render(self) -> str:
        fields = self.fields()
        header = _dump_yaml(fields, allow_unicode=True)
        if yaml.load(header, Loader=_StringTimestampLoader) != fields:
            # PyYAML writes U+0085 (NEL) raw inside single quotes, where every reader folds it
            # into a space (found by the fault suite's fuzzing); the all-escaped ASCII form
            # reads back exactly.
            header = _dump_yaml(fields, allow_unicode=False)
        title = inert_markdown(one_line(str(self.frontmatter.get("title") or ""), 300))
        body = inert_markdown(self.summary) if self.summary else "_No summary in the feed._"
        # The link a person clicks is the item's URL as the publisher wrote it (an http-only
        # site stays http); the canonical form is for identity only.
        original = str(
            self.frontmatter.get("itemUrl") or self.frontmatter.get("canonicalUrl") or ""
        )
        url = link_destination(original)
        opening = f"# {title}\n\n"
        reference = ""
        if url is not None:
            host = inert_markdown(one_line(_host(original), 100, html=False))
            opening += f"[Read the original at {host}][{ORIGINAL_LINK_LABEL}]\n\n"
            reference = f"\n[{ORIGINAL_LINK_LABEL}]: {url}\n"
        return (
            f"---\n{header}---\n\n{opening}{body}\n\n"
            f"*Collected by Radar from `{inert_markdown(str(self.frontmatter['sourceId']))}`; "
            f"the text above is the feed's summary, kept as data.*\n{reference}"
        )


def link_target(value: Any) -> str | None:
    """The note a link property names (`[[x]]` -> `x`); a plain value as it is (Signals written
    before the links); None when empty."""
    if value is None or value == "":
        return None
    text = str(value)
    match = _ONE_LINK.fullmatch(text)
    return match.group(1) if match else text


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or "the publisher"
    except ValueError:
        return "the publisher"


def _inert_field(key: str, value: Any) -> Any:
    if isinstance(value, str):
        if key in LINK_FIELDS and _ONE_LINK.fullmatch(value) and wikilink(value[2:-2]):
            return value
        return inert_property(value)
    if isinstance(value, list):
        return [inert_property(v) if isinstance(v, str) else v for v in value]
    return value


def _dump_yaml(data: dict[str, Any], *, allow_unicode: bool) -> str:
    # libyaml's emitter when PyYAML has it: 8x cheaper than the pure-Python one (1.3 ms of a
    # Signal's 1.6 ms render), the same safe representer; `render` reads every header back.
    return yaml.dump(
        data,
        Dumper=_SafeDumper,
        sort_keys=False,
        allow_unicode=allow_unicode,
        default_flow_style=False,
        width=10_000,
    )


_SafeDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def signal_path(vault: Path, signal_id: str) -> Path:
    if not SIGNAL_ID_RE.fullmatch(signal_id):
        raise VaultError(f"refusing Signal id {signal_id!r}: it is not <timestamp>-<16 hex>")
    return vault / SIGNALS_DIR / f"{signal_id}.md"


# Temp files every writer of the vault makes carry the writer's pid (core/files.py), so a
# cleaner can tell a dead writer's leftovers (SIGKILL skips every `finally`) from a live
# writer's file in flight.
STALE_TEMP_AGE_S = 3600.0  # any temp file this old is stale, whatever its pid says (pid reuse)


def _writer_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return True


def remove_stale_temp_files(
    vault: Path, now: float | None = None, skip_signals: bool = False
) -> int:
    """Delete temp files killed writers left in the folders the pipeline writes (Signals,
    Temporary Content, Sources, the views' `Radar/`).

    A temp file is stale when the process named in its name is gone, or when it is older than
    STALE_TEMP_AGE_S; a live writer's file in flight is kept (removing it would make that
    writer fail). Returns how many were removed. `skip_signals`: the Signals folder is known
    to hold none (folder_state.holds_no_temp_files), so it is not listed.
    """
    now = time.time() if now is None else now
    removed = 0
    for sub in WRITTEN_DIRS:
        folder = vault / sub
        if skip_signals and sub == SIGNALS_DIR:
            continue
        if not folder.is_dir():
            continue
        for entry in os.scandir(folder):
            temp = read_temp_name(entry.name)
            if temp is None or not entry.is_file(follow_symlinks=False):
                continue
            try:
                age = now - entry.stat(follow_symlinks=False).st_mtime
            except FileNotFoundError:
                continue
            pid = temp.pid
            dead = pid is not None and pid != os.getpid() and not _writer_alive(pid)
            if dead or age > STALE_TEMP_AGE_S:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.path)
                    removed += 1
    return removed


def list_signal_ids(vault: Path) -> set[str]:
    """The ids of every Signal file in the vault (the vault is the truth for Signals)."""
    folder = vault / SIGNALS_DIR
    if not folder.is_dir():
        return set()
    ids: set[str] = set()
    for entry in os.scandir(folder):
        name = entry.name
        if name.endswith(".md") and SIGNAL_ID_RE.fullmatch(name[:-3]):
            ids.add(name[:-3])
    return ids


def read_signal_frontmatter(path: Path) -> dict[str, Any]:
    """Parse a Signal file's frontmatter; VaultError if it is truncated or not a Signal."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise VaultError(f"cannot read Signal {path.name}: {exc}") from exc
    return parse_signal_frontmatter(text, path)


def model_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """(key, reason) for each problem a note model found: the key as the note spells it."""
    return [
        (".".join(str(part) for part in error["loc"]) or "(frontmatter)", _reason(error))
        for error in exc.errors(include_url=False)
    ]


def _reason(error: ErrorDetails) -> str:
    if error["type"] == "missing":
        return "is missing"
    value = error.get("input")
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    message = error["msg"].removeprefix("Value error, ")
    return f"{message} (found {shown})"


def parse_signal_frontmatter(text: str, path: Path) -> dict[str, Any]:
    """`read_signal_frontmatter` of a file's text already read."""
    if not text.startswith("---\n"):
        raise VaultError(f"Signal {path.name} has no frontmatter")
    end = text.find("\n---\n", 4)
    if end < 0:
        raise VaultError(f"Signal {path.name} has an unterminated frontmatter (truncated?)")
    try:
        data = yaml.load(text[4 : end + 1], Loader=_StringTimestampLoader)
    except yaml.YAMLError as exc:
        raise VaultError(f"Signal {path.name} has broken frontmatter: {exc}") from exc
    if not isinstance(data, dict) or data.get("entityType") != "signal":
        raise VaultError(f"{path.name} is not a Signal (entityType is not 'signal')")
    return data


# libyaml's parser when PyYAML has it (the lock's wheels do): reading a Signal's frontmatter is
# then ~10x cheaper, and every collection reads each file it writes back, and the evidence checks
# read every Signal file. Same YAML 1.1 grammar and the same constructor and resolvers.
_SafeLoaderBase: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StringTimestampLoader(_SafeLoaderBase):  # type: ignore[valid-type,misc]
    """SafeLoader that keeps ISO timestamps as the strings we wrote."""


_StringTimestampLoader.yaml_implicit_resolvers = {
    key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def sync_signals_dir(vault: Path) -> None:
    """Make new entries of the Signals folder durable (after a batch of links)."""
    fsync_dir(vault / SIGNALS_DIR)
