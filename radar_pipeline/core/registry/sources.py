"""The Source Registry: `Radar/Sources/*.md` validated into one immutable snapshot.

A file that cannot become a Source is an issue with a code and a one-line fix, never an
exception and never an active Source. Two files declaring one id are both left out.
"""

from __future__ import annotations

import re
import stat
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel, to_snake
from pydantic_core import PydanticCustomError

from radar_pipeline.core.clock import parse_cadence
from radar_pipeline.core.contract.sources import RegisteredSource, RegistryIssue, ValidateOutput
from radar_pipeline.core.errors import RegistryError
from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline.core.jsontypes import Frontmatter
from radar_pipeline.core.layout import SOURCES_DIR
from radar_pipeline.core.parse.spec import ExtractionSpec, HtmlSpec, JsonSpec
from radar_pipeline.core.registry.extraction import EXTRACTION_KEYS, extraction_issues
from radar_pipeline.core.registry.filters import FILTER_KEYS, ItemFilter, filter_issues
from radar_pipeline.core.registry.issues import (
    fixture_path_problem,
    issue_for,
    one_line,
)

# Re-exported: OPML import checks feed URLs with the registry's own rule.
from radar_pipeline.core.registry.issues import http_url_problem as http_url_problem

MAX_SOURCE_FILE_BYTES = 1_000_000  # a Source note is a few hundred bytes; refuse anything absurd
# How many Source file texts keep their reading in a process (a registry of thousands: an LRU
# smaller than the registry would miss on every file of a full read), and up to what size a
# text is kept (a Source note is about 1 KB; at most 4,096 x 16 KB = 64 MB held).
READINGS_KEPT = 4096
READING_KEPT_CHARS = 16_384

_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}$")
_ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Which Sources the Radar's own figures cover: `production` Sources are what it collects for
# people; `fixture` Sources are local files in the vault (the shipped examples, test feeds),
# counted apart (`fixtureSources` in `radar report --json`).
Scope = Literal["production", "fixture"]
SCOPES: tuple[Scope, ...] = ("production", "fixture")


def source_scope(source_type: str | None, collection_method: str | None) -> Scope:
    """A Source's scope, decided here and nowhere else: `fixture` when its sourceType or its
    collectionMethod says so, else `production`. Everything a fixture Source does otherwise
    follows from it (`Source.reads_vault`): its `url` is a vault-relative file, read without
    any network, and its collectionMethod still names the parser (`fixture` alone: a feed)."""
    return "fixture" if "fixture" in (source_type, collection_method) else "production"


DEFAULT_PAGE_BUDGET = 10


class Source(BaseModel):
    """One Source file's frontmatter, validated. Aliases are the contract's camelCase keys."""

    model_config = ConfigDict(
        frozen=True, populate_by_name=True, alias_generator=to_camel, extra="ignore"
    )

    entity_type: Literal["source"]
    schema_version: Literal[1]
    # The shape is checked by `_id_shape` (its message says the fix); the pattern is for the
    # published schema (docs/schema/source-note.schema.json).
    id: Annotated[str, Field(json_schema_extra={"pattern": _ID_RE.pattern})]
    name: Annotated[str, Strict(), Field(min_length=1)]
    role: Literal["primary", "discovery", "engineering-blog", "research"]
    source_type: Literal["official", "community", "fixture"]
    authority_score: Annotated[float, Strict(), Field(ge=0, le=1)]
    legal_assessment: Literal["approved", "pending", "rejected"]
    priority: Literal["critical", "high", "normal", "low"]
    collection_method: Literal["rss", "atom", "jsonfeed", "html", "json", "fixture"]
    # After source_type and collection_method, so the url check can see which url it needs.
    url: str
    enabled: Annotated[bool, Strict()]
    cadence: str
    min_interval_seconds: Annotated[int, Strict(), Field(ge=0)] = 0
    full_text: Literal["none", "feed-content", "page-extraction"] = "none"
    # Pages fetched per check for `fullText: page-extraction` (None: DEFAULT_PAGE_BUDGET).
    page_budget: Annotated[int, Strict(), Field(ge=0)] | None = None
    auth_token_env: str | None = None
    last_attempt_at: datetime | None = None
    last_success_at: datetime | None = None
    last_response_at: datetime | None = None
    # When the schedule checks it next (written by the pipeline; empty for `manual`).
    next_attempt_at: datetime | None = None
    error_state: str | None = None
    blocked_reason: str | None = None
    http_status: Annotated[int, Strict(), Field(ge=100, le=599)] | None = None
    etag: str | None = None
    last_modified: str | None = None
    permanent_redirect: str | None = None  # where a 301/308 led (written by the pipeline)
    # html: CSS selectors; json: JMESPath paths (checked by registry/extraction.py).
    item_selector: str | None = None
    title_selector: str | None = None
    link_selector: str | None = None
    date_selector: str | None = None
    summary_selector: str | None = None
    items_path: str | None = None
    title_path: str | None = None
    link_path: str | None = None
    id_path: str | None = None
    date_path: str | None = None
    summary_path: str | None = None
    # Rules a person keeps or drops items by (registry/filters.py checks them).
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @property
    def is_eligible(self) -> bool:
        """Enabled, not blocked and legally approved (cadence is the gate's business)."""
        return self.enabled and not self.blocked_reason and self.legal_assessment == "approved"

    @property
    def pages_per_check(self) -> int:
        """At most this many page requests per check (page extraction's budget)."""
        return DEFAULT_PAGE_BUDGET if self.page_budget is None else self.page_budget

    @property
    def scope(self) -> Scope:
        """`production` or `fixture` (`source_scope`): which of the Radar's figures count it."""
        return source_scope(self.source_type, self.collection_method)

    @property
    def reads_vault(self) -> bool:
        """Its `url` is a vault-relative file, read without any network (no publisher to pace
        or to spare, no pages to extract, nothing to export as a feed): a fixture Source."""
        return self.scope == "fixture"

    @property
    def extraction_spec(self) -> ExtractionSpec | None:
        """The selectors of an html Source or the paths of a json Source (None otherwise)."""
        if self.collection_method == "html":
            assert self.item_selector and self.title_selector and self.link_selector
            return HtmlSpec(
                self.item_selector,
                self.title_selector,
                self.link_selector,
                self.date_selector,
                self.summary_selector,
            )
        if self.collection_method == "json":
            assert self.items_path and self.title_path and self.link_path
            return JsonSpec(
                self.items_path,
                self.title_path,
                self.link_path,
                self.id_path,
                self.date_path,
                self.summary_path,
            )
        return None

    @property
    def item_filter(self) -> ItemFilter:
        """The compiled `include` / `exclude` rules (accepted by the registry already)."""
        return ItemFilter.of(self.include, self.exclude)

    @field_validator("include", "exclude", mode="before")
    @classmethod
    def _rules_list(cls, value: Any) -> Any:
        return () if value is None else [value] if isinstance(value, str) else value

    @field_validator("schema_version", mode="before")
    @classmethod
    def _schema_version_is_int(cls, value: Any) -> Any:
        if isinstance(value, bool):  # True == 1 in Python; `schemaVersion: true` is a typo
            raise PydanticCustomError("invalid_value", "must be the number 1, not a boolean")
        return value

    @field_validator("id", mode="before")
    @classmethod
    def _id_shape(cls, value: Any) -> Any:
        if not isinstance(value, str) or not _ID_RE.fullmatch(value):
            raise PydanticCustomError(
                "invalid_id", "must be 2-63 of a-z, 0-9 and '-', starting with a letter or digit"
            )
        return value

    @field_validator("url", mode="before")
    @classmethod
    def _url_shape(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            raise PydanticCustomError("invalid_url", "must be text")
        method = info.data.get("collection_method")
        if source_scope(info.data.get("source_type"), method) == "fixture":
            problem = fixture_path_problem(value)
        elif method is not None:
            problem = http_url_problem(value)
        else:  # collectionMethod is itself invalid (reported apart); accept either form
            problem = http_url_problem(value) and fixture_path_problem(value)
        if problem:
            raise PydanticCustomError("invalid_url", problem)
        return value

    @field_validator("cadence", mode="before")
    @classmethod
    def _cadence_shape(cls, value: Any) -> Any:
        try:
            if isinstance(value, str):
                parse_cadence(value)
                return value
        except ValueError:
            pass
        raise PydanticCustomError(
            "invalid_value", "is not a duration in weeks, days, hours, minutes or seconds"
        )

    @field_validator(
        "auth_token_env",
        "error_state",
        "blocked_reason",
        "etag",
        "last_modified",
        *(to_snake(key) for key in EXTRACTION_KEYS),
        mode="before",
    )
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return None
        if value is not None and not isinstance(value, str):
            raise PydanticCustomError("invalid_value", "must be text (quote it)")
        return value

    @field_validator("auth_token_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_RE.fullmatch(value):
            raise PydanticCustomError("invalid_value", "must be an environment variable name")
        return value

    @field_validator("http_status", mode="before")
    @classmethod
    def _empty_status(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator(
        "last_attempt_at", "last_success_at", "last_response_at", "next_attempt_at", mode="before"
    )
    @classmethod
    def _utc_timestamp(cls, value: Any) -> datetime | None:
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        try:
            parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
        except ValueError:
            parsed = None
        if parsed is None or parsed.tzinfo is None:
            raise PydanticCustomError("invalid_value", "is not an ISO-8601 time with a time zone")
        return parsed.astimezone(UTC)


@dataclass(frozen=True)
class SourceRecord:
    """A valid Source and the file it came from."""

    source: Source
    path: Path  # absolute path of the file (symlinks inside the vault resolved)
    record_path: str  # vault-relative POSIX path, as cited in Signals


@dataclass(frozen=True)
class RegistrySnapshot:
    """The registry at one moment: valid Sources (sorted by id) and every issue found."""

    sources: tuple[SourceRecord, ...]
    issues: tuple[RegistryIssue, ...]

    def by_id(self, source_id: str) -> SourceRecord | None:
        """The valid Source with this id, or None."""
        return next((r for r in self.sources if r.source.id == source_id), None)

    def validation(self) -> ValidateOutput:
        """What `radar sources validate` shows of it: each valid Source and every issue."""
        return ValidateOutput(
            sources=tuple(
                RegisteredSource(id=r.source.id, path=r.record_path, active=r.source.is_eligible)
                for r in self.sources
            ),
            issues=self.issues,
        )


def validate_source(data: Frontmatter) -> tuple[Source | None, list[tuple[str, str]]]:
    """A Source from one frontmatter mapping, or the (code, message) of every problem."""
    entity = data.get("entityType")
    if entity is not None and entity != "source":
        return None, [
            (
                "wrong-entity-type",
                f"`entityType` is {one_line(entity)}: only `entityType: source` notes "
                "belong in Radar/Sources; move this note or fix the key",
            )
        ]
    # The selectors and paths are checked apart, one code per problem (registry/extraction.py);
    # pydantic's own complaint about the same key would only repeat it.
    problems = extraction_issues(data) + filter_issues(data)
    checked_apart = (*EXTRACTION_KEYS, *FILTER_KEYS)
    try:
        source = Source.model_validate(data)
    except ValidationError as exc:
        errors = [e for e in exc.errors() if not (e["loc"] and e["loc"][0] in checked_apart)]
        return None, [issue_for(error) for error in errors] + problems
    if problems:
        return None, problems
    return source, _policy_issues(source)


def _policy_issues(source: Source) -> list[tuple[str, str]]:
    """Problems of a valid Source that do not stop it: a key its policy makes meaningless."""
    if source.page_budget is not None and source.full_text != "page-extraction":
        return [
            (
                "page-budget-unused",
                f"`pageBudget` is {source.page_budget} but `fullText` is {source.full_text}: "
                "pages are fetched only under `fullText: page-extraction`; remove `pageBudget` "
                "or set that policy if the publisher allows it",
            )
        ]
    return []


@dataclass(frozen=True)
class _Parsed:
    """One file's outcome before duplicate ids are resolved."""

    record_path: str
    path: Path
    declared_id: str | None
    source: Source | None


def _read_source_file(entry: Path, vault: Path) -> tuple[Path, str]:
    """The resolved path and the text of one Source file; RegistryError says why it cannot be
    read."""
    try:
        real = entry.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise RegistryError("cannot be resolved (broken symlink?); fix or remove it") from exc
    if not real.is_relative_to(vault):
        raise RegistryError("is a symlink that points outside the vault; replace it with a file")
    try:
        info = real.stat()
        if not stat.S_ISREG(info.st_mode):
            raise RegistryError("is not a regular file; a Source is one Markdown file")
        if info.st_size > MAX_SOURCE_FILE_BYTES:
            raise RegistryError(f"is larger than {MAX_SOURCE_FILE_BYTES} bytes; trim it")
        return real, real.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RegistryError(f"is not UTF-8 text ({exc.reason}); save it as UTF-8") from exc
    except OSError as exc:
        raise RegistryError(f"cannot be read ({exc.strerror}); check its permissions") from exc


def _parse_file(entry: Path, vault: Path, issues: list[RegistryIssue]) -> _Parsed:
    record_path = entry.relative_to(vault).as_posix()
    parsed = _Parsed(record_path, entry, None, None)
    try:
        real, text = _read_source_file(entry, vault)
    except RegistryError as exc:
        issues.append(
            RegistryIssue(
                path=record_path, code="unreadable", message=f"{record_path} {exc.message}"
            )
        )
        return parsed
    reading = _READINGS.reading(text)
    issues.extend(
        RegistryIssue(path=record_path, code=code, message=message)
        for code, message in reading.problems
    )
    if reading.unparsed:
        return parsed
    return _Parsed(record_path, real, reading.declared_id, reading.source)


@dataclass(frozen=True)
class _Reading:
    """What one Source file's text says: its Source (None when invalid), the id it declares,
    and each (code, message) problem; `unparsed` when it has no readable frontmatter."""

    source: Source | None
    declared_id: str | None
    problems: tuple[tuple[str, str], ...]
    unparsed: bool = False


def _read_text(text: str) -> _Reading:
    """The reading of a Source file's text: a function of the text alone, so a process that
    reads the registry again and again (the code server's schedule and sensors, each minute)
    keeps it (`_Readings`) and parses only the files whose text changed; a changed byte is
    another key."""
    try:
        data, _body = split_frontmatter(text)
    except RegistryError as exc:
        code = (
            "no-frontmatter" if exc.message.startswith("no frontmatter") else "broken-frontmatter"
        )
        fix = "start the file with `---`, the keys, then `---`"
        if code == "broken-frontmatter":
            fix = "fix the YAML between the `---` lines"
        return _Reading(None, None, ((code, f"{exc.message}: {fix}"),), unparsed=True)
    return _reading_of(data)


def _reading_of(data: Frontmatter) -> _Reading:
    source, problems = validate_source(data)
    declared = data.get("id") if data.get("entityType", "source") == "source" else None
    return _Reading(source, declared if isinstance(declared, str) else None, tuple(problems))


class _Readings:
    """The readings of the last `size` Source file texts this process read or wrote, keyed
    by the whole text (thread-safe). A text the pipeline wrote itself (the health mirror) is
    kept with the frontmatter its writer parsed to prove the edit (`remember_written`): its
    reading is validated from that mapping when first asked for, without a second YAML
    parse. Texts longer than READING_KEPT_CHARS are read each time."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._kept: OrderedDict[str, _Reading | Frontmatter] = OrderedDict()
        self._lock = threading.Lock()

    def reading(self, text: str) -> _Reading:
        if len(text) > READING_KEPT_CHARS:
            return _read_text(text)
        with self._lock:
            kept = self._kept.get(text)
            if kept is not None:
                self._kept.move_to_end(text)
        if isinstance(kept, _Reading):
            return kept
        reading = _read_text(text) if kept is None else _reading_of(kept)
        self._keep(text, reading)
        return reading

    def remember(self, text: str, frontmatter: Frontmatter) -> None:
        if len(text) <= READING_KEPT_CHARS:
            self._keep(text, frontmatter)

    def _keep(self, text: str, value: _Reading | Frontmatter) -> None:
        with self._lock:
            if isinstance(self._kept.get(text), _Reading):
                return  # already read: the reading stays
            self._kept[text] = value
            self._kept.move_to_end(text)
            while len(self._kept) > self._size:
                self._kept.popitem(last=False)


_READINGS = _Readings(READINGS_KEPT)


def remember_written(text: str, frontmatter: Frontmatter) -> None:
    """A Source file's text as the pipeline just wrote it, with its frontmatter as the writer
    parsed it (`FrontmatterUpdate`): the next registry read of that text validates the
    mapping instead of parsing the YAML again (a collection rewrites every checked Source's
    health keys, and the checks after it read the registry)."""
    _READINGS.remember(text, frontmatter)


def _duplicate_issues(parsed: Iterable[_Parsed]) -> tuple[set[str], list[RegistryIssue]]:
    """Record paths whose id is declared more than once, and an issue for each of them."""
    by_id: dict[str, list[str]] = {}
    for item in parsed:
        if item.declared_id is not None:
            by_id.setdefault(item.declared_id, []).append(item.record_path)
    clashing: set[str] = set()
    issues: list[RegistryIssue] = []
    for source_id, paths in by_id.items():
        if len(paths) < 2:
            continue
        clashing.update(paths)
        first, *later = paths
        others = ", ".join(later)
        issues.append(
            RegistryIssue(
                path=first,
                code="duplicate-id",
                message=f"`id` {source_id!r} is also declared in {others}; give each Source its "
                "own id (none of them is active until then)",
            )
        )
        issues.extend(
            RegistryIssue(
                path=path,
                code="duplicate-id",
                message=f"`id` {source_id!r} is already declared in {first}; give this Source "
                "its own id or remove one file",
            )
            for path in later
        )
    return clashing, issues


def load_sources(vault_root: Path, record_paths: Sequence[str]) -> RegistrySnapshot:
    """Read and validate the Source files `record_paths` (vault-relative) alone: a part of a
    registry `load_registry` read whole (its duplicate ids are known then); a file gone
    since is left out. Never raises for a bad file."""
    vault = vault_root.resolve()
    issues: list[RegistryIssue] = []
    parsed = [_parse_file(vault / p, vault, issues) for p in record_paths if (vault / p).is_file()]
    records = [
        SourceRecord(item.source, item.path, item.record_path)
        for item in parsed
        if item.source is not None
    ]
    return RegistrySnapshot(
        sources=tuple(sorted(records, key=lambda r: r.source.id)),
        issues=tuple(sorted(issues, key=lambda i: i.path)),
    )


def load_registry(vault_root: Path) -> RegistrySnapshot:
    """Read and validate every `Radar/Sources/*.md`; never raises for a bad file."""
    vault = vault_root.resolve()
    folder = vault / SOURCES_DIR
    issues: list[RegistryIssue] = []
    try:
        entries = sorted(p for p in folder.iterdir() if p.name.endswith(".md"))
    except OSError as exc:
        message = f"{SOURCES_DIR.as_posix()} cannot be listed ({exc.strerror}); create the folder"
        issue = RegistryIssue(path=SOURCES_DIR.as_posix(), code="unreadable", message=message)
        return RegistrySnapshot((), (issue,))
    # Our own atomic writes use `.<name>.<random>.tmp`, so a half-written file never matches.
    parsed = [_parse_file(e, vault, issues) for e in entries]
    clashing, duplicates = _duplicate_issues(parsed)
    issues.extend(duplicates)
    records = [
        SourceRecord(item.source, item.path, item.record_path)
        for item in parsed
        if item.source is not None and item.record_path not in clashing
    ]
    return RegistrySnapshot(
        sources=tuple(sorted(records, key=lambda r: r.source.id)),
        issues=tuple(sorted(issues, key=lambda i: i.path)),
    )
