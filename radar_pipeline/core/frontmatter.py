"""YAML frontmatter of vault notes: read it, and update single keys without touching other bytes.

People edit Source files in Obsidian; the pipeline only rewrites the values of a few health
and HTTP keys. So an update replaces exactly the characters of those values (located by the
YAML parser's own marks, not by regex) and leaves comments, blank lines, key order, quoting,
line endings and the Markdown body byte-for-byte as they were.
"""

from __future__ import annotations

import functools
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from radar_pipeline.core.errors import RegistryError
from radar_pipeline.core.files import replace_with, write_temp

_BOM = "\ufeff"
_DELIMITER = "---"

# YAML 1.2 core booleans only: YAML 1.1's `yes`/`no`/`on`/`off` must stay strings so that a
# strict boolean field can reject them instead of silently reading `enabled: yes` as true.
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_BOOL_FIRST = "tTfF"


def _resolvers(base: type[yaml.SafeLoader]) -> dict[Any, list[tuple[str, re.Pattern[str]]]]:
    """The SafeLoader resolver table without timestamps and with YAML 1.2 booleans."""
    table: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}
    for first, entries in base.yaml_implicit_resolvers.items():
        kept = [
            (tag, rx)
            for tag, rx in entries
            if tag not in ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:bool")
        ]
        if kept:
            table[first] = kept
    for first in _BOOL_FIRST:
        table.setdefault(first, []).insert(0, ("tag:yaml.org,2002:bool", _BOOL_RE))
    return table


class _FrontmatterLoader(yaml.SafeLoader):
    """Pure-Python loader: its marks are character offsets, which the updater relies on."""

    yaml_implicit_resolvers = _resolvers(yaml.SafeLoader)


def _construct_mapping_unique(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    # A key written twice is ambiguous (PyYAML keeps the last silently); refuse it instead.
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if isinstance(key, list | dict):
            continue  # construct_mapping below reports an unhashable key
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} appears twice", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node)


_FrontmatterLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping_unique)

_CSafeLoader: type[yaml.SafeLoader] | None = getattr(yaml, "CSafeLoader", None)
if _CSafeLoader is not None:

    class _FastLoader(_CSafeLoader):  # type: ignore[valid-type,misc]
        """libyaml parser, same resolvers: reading the registry is the hot path."""

        yaml_implicit_resolvers = _FrontmatterLoader.yaml_implicit_resolvers

    _FastLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping_unique)
    _READ_LOADER: type[yaml.SafeLoader] = _FastLoader
    _STOCK_LOADER: type[yaml.SafeLoader] = _CSafeLoader
else:  # pragma: no cover - PyYAML built without libyaml
    _READ_LOADER = _FrontmatterLoader
    _STOCK_LOADER = yaml.SafeLoader


@dataclass(frozen=True)
class _Parts:
    """One note cut into its pieces; `prefix + yaml_text + suffix + body` is the whole text."""

    prefix: str  # optional BOM and the opening `---` line
    yaml_text: str  # the lines between the delimiters, each with its own line ending
    suffix: str  # the closing `---` line
    body: str
    newline: str  # the line ending of the opening delimiter: "\n" or "\r\n"


def _split_lines(text: str) -> list[str]:
    # Only "\n" ends a line here; str.splitlines would also split on \x0c, \u2028 and others.
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def _is_delimiter(line: str) -> bool:
    return line.rstrip(" \t\r\n") == _DELIMITER


def _cut(text: str) -> _Parts:
    lines = _split_lines(text)
    first = lines[0] if lines else ""
    if not _is_delimiter(first.removeprefix(_BOM)) or not first.endswith("\n"):
        raise RegistryError("no frontmatter: the file must start with a `---` line")
    for index in range(1, len(lines)):
        if _is_delimiter(lines[index]):
            return _Parts(
                prefix=first,
                yaml_text="".join(lines[1:index]),
                suffix=lines[index],
                body="".join(lines[index + 1 :]),
                newline="\r\n" if first.endswith("\r\n") else "\n",
            )
    raise RegistryError("no frontmatter: the opening `---` line has no closing `---` line")


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    # +2: marks count from 0 inside the YAML, which starts on the file's second line.
    where = f" (line {mark.line + 2}, column {mark.column + 1})" if mark else ""
    return " ".join(f"{problem}{where}".split())


def _load_mapping(yaml_text: str) -> dict[str, Any]:
    try:
        data = yaml.load(yaml_text, Loader=_READ_LOADER)
    except yaml.YAMLError as exc:
        raise RegistryError(f"broken frontmatter: {_yaml_problem(exc)}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise RegistryError("broken frontmatter: it must be `key: value` lines, not a list or text")
    bad = [key for key in data if not isinstance(key, str)]
    if bad:
        raise RegistryError(f"broken frontmatter: key {bad[0]!r} is not text; quote it")
    return data


def split_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    """Split a note into its frontmatter mapping and its Markdown body.

    Timestamps stay the strings they were written as, and only `true`/`false` are booleans.
    Raises RegistryError ("no frontmatter ..." or "broken frontmatter: ...").
    """
    parts = _cut(text)
    return _load_mapping(parts.yaml_text), parts.body


# --- emitting one scalar -------------------------------------------------------------------

_PLAIN_RE = re.compile(r"^[A-Za-z0-9_(][A-Za-z0-9_ .,/+()=-]*$")
_DOUBLE_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _needs_escape(char: str) -> bool:
    code = ord(char)
    return (
        code < 0x20
        or 0x7F <= code <= 0x9F
        or char in "\u2028\u2029\ufeff\ufffe\uffff"
        or 0xD800 <= code <= 0xDFFF
    )


def _double_quoted(value: str) -> str:
    out = []
    for char in value:
        if char in _DOUBLE_ESCAPES:
            out.append(_DOUBLE_ESCAPES[char])
        elif _needs_escape(char):
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _reads_back_as(candidate: str, value: str) -> bool:
    """True when both our loader and a stock YAML 1.1 reader (Obsidian, scripts) see `value`."""
    try:
        ours = yaml.load(f"k: {candidate}\n", Loader=_READ_LOADER)
        stock = yaml.load(f"k: {candidate}\n", Loader=_STOCK_LOADER)
    except yaml.YAMLError:
        return False
    return bool(ours == {"k": value} and stock == {"k": value})


# A function of its arguments alone: a collection writes the same timestamps into many Source
# files (every check of one second), and proving how a string reads back costs two YAML loads.
@functools.lru_cache(maxsize=4096)
def format_scalar(value: str | int | None, style: str | None = None) -> str:
    """`value` as a one-line YAML scalar: plain when unambiguous, else quoted.

    `style` is the quote character the old value used, kept when it can hold the new one.
    Timestamps are always quoted, so no YAML reader turns them into dates.
    """
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    plain_ok = style not in ("'", '"') and _PLAIN_RE.match(value) and value == value.strip()
    if plain_ok and _reads_back_as(value, value):
        return value
    single = "'" + value.replace("'", "''") + "'"
    if style != '"' and not any(_needs_escape(c) for c in value) and _reads_back_as(single, value):
        return single
    double = _double_quoted(value)
    if not _reads_back_as(double, value):
        raise RegistryError(f"cannot write {value!r} as a one-line frontmatter value")
    return double


# --- updating keys in place ----------------------------------------------------------------

_SEPARATOR_RE = re.compile(r"[ \t]*:[ \t]*")


def _top_level_pairs(yaml_text: str) -> list[tuple[yaml.Node, yaml.Node]]:
    try:
        # libyaml's parser where PyYAML has it (4x cheaper: the health of every checked Source
        # is written through here); its marks count characters, as the pure-Python parser's
        # do, but not a leading byte-order mark, which it skips. `_check_result` re-reads
        # every edit made from them.
        loader = _FrontmatterLoader if yaml_text.startswith("\ufeff") else _READ_LOADER
        root = yaml.compose(yaml_text, Loader=loader)
    except yaml.YAMLError as exc:
        raise RegistryError(f"broken frontmatter: {_yaml_problem(exc)}") from exc
    if root is None:
        return []
    if not isinstance(root, yaml.MappingNode):
        raise RegistryError("broken frontmatter: it must be `key: value` lines, not a list or text")
    return list(root.value)


def _value_edit(
    yaml_text: str, key: yaml.Node, node: yaml.Node, new: str | int | None
) -> tuple[int, int, str]:
    """(start, end, text) that rewrites one top-level value; only one-line scalars qualify."""
    start, end = node.start_mark.index, node.end_mark.index
    between = yaml_text[key.end_mark.index : start]
    old = yaml_text[start:end]
    if (
        not isinstance(node, yaml.ScalarNode)
        or node.style in ("|", ">")
        or start < key.end_mark.index  # an alias: the node lives elsewhere
        or not _SEPARATOR_RE.fullmatch(between)
        or any(c in old for c in "\r\n\x85\u2028\u2029")
        or old.startswith(("&", "*", "!"))
    ):
        raise RegistryError(
            f"cannot update `{key.value}`: its value is not a one-line plain value; "
            f"make it `{key.value}: <value>` on one line"
        )
    # A plain value's style is None from the pure-Python parser, "" from libyaml's.
    text = format_scalar(new, (node.style or None) if old else None)
    if not text:
        # `key: old # note` -> `key: # note`; `key:` stays `key:`.
        return key.end_mark.index + between.index(":") + 1, end, ""
    return start, end, text if old else " " + text


def apply_updates(text: str, updates: Mapping[str, str | int | None]) -> str:
    """Return `text` with the frontmatter values of `updates` replaced or appended."""
    return updated_note(text, updates)[0]


def updated_note(text: str, updates: Mapping[str, str | int | None]) -> tuple[str, dict[str, Any]]:
    """`apply_updates`, and the frontmatter mapping of the new text: what `split_frontmatter`
    reads from it, parsed once here to prove the edit (the mapping is the caller's)."""
    parts = _cut(text)
    before = _load_mapping(parts.yaml_text)
    pairs = {k.value: (k, v) for k, v in _top_level_pairs(parts.yaml_text)}
    edits = sorted(
        (
            _value_edit(parts.yaml_text, *pairs[name], value)
            for name, value in updates.items()
            if name in pairs
        ),
        reverse=True,
    )
    yaml_text = parts.yaml_text
    for start, end, replacement in edits:  # from the end, so earlier offsets stay valid
        yaml_text = yaml_text[:start] + replacement + yaml_text[end:]
    for name, value in updates.items():
        if name not in pairs:
            scalar = format_scalar(value)
            yaml_text += f"{name}:{' ' + scalar if scalar else ''}{parts.newline}"
    # The new YAML has no delimiter line (each edit is one `key: value` line), so the new
    # text cuts into the same parts and `after` is its frontmatter.
    after = _load_mapping(yaml_text)
    _check_result(before, after, updates)
    return parts.prefix + yaml_text + parts.suffix + parts.body, after


def _expected(value: str | int | None) -> Any:
    return None if value in (None, "") else value


def _check_result(
    before: dict[str, Any], after: dict[str, Any], updates: Mapping[str, str | int | None]
) -> None:
    # The edit is textual, so prove it did only what was asked: other keys equal, ours as given.
    want = {**before, **{k: _expected(v) for k, v in updates.items()}}
    if after != want or list(after)[: len(before)] != list(before):
        changed = sorted(k for k in set(want) | set(after) if want.get(k) != after.get(k))
        raise RegistryError(f"update would change other frontmatter keys {changed}; edit by hand")


def _read_text(path: Path) -> tuple[bytes, str]:
    if path.is_symlink():
        raise RegistryError(f"{path.name}: refusing to update a symlink; update the real file")
    try:
        data = path.read_bytes()
        return data, data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RegistryError(f"{path.name}: not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise RegistryError(f"{path.name}: cannot read ({exc.strerror})") from exc


def update_frontmatter_keys(
    path: Path, updates: Mapping[str, str | int | None], *, retries: int = 5
) -> FrontmatterUpdate:
    """Set frontmatter keys of the note at `path` atomically, keeping every other byte; the
    update that took (the note as written, and its frontmatter).

    A key that is missing is appended at the end of the frontmatter; None or "" writes `key:`.
    If the file changes between reading and replacing (a person saving in Obsidian), the update
    is re-applied to the new content (`FrontmatterUpdate`), up to `retries` times; a person's
    edit is never lost. Raises RegistryError when the frontmatter is broken or a key holds a
    multi-line value.
    """
    try:
        for _ in range(retries + 1):
            update = FrontmatterUpdate.read(path, updates)
            if update.apply():
                return update
    except OSError as exc:
        raise RegistryError(
            f"{path.name}: cannot write ({exc.strerror}); check the folder"
        ) from exc
    raise RegistryError(
        f"{path.name}: the file kept changing while updating {sorted(updates)}; try again"
    )


@dataclass(frozen=True)
class FrontmatterUpdate:
    """One read-apply-replace attempt on a note: the bytes read (`original`) and what they
    become with the updates (`new`). `apply` replaces the note only while it still holds the
    bytes read, so a person's save in between is never overwritten."""

    path: Path
    original: bytes
    new: bytes
    text: str  # `new` as text
    frontmatter: dict[str, Any]  # the frontmatter of `text`, as split_frontmatter reads it

    @classmethod
    def read(cls, path: Path, updates: Mapping[str, str | int | None]) -> FrontmatterUpdate:
        """Read the note and apply `updates` to its text (nothing written yet)."""
        original, text = _read_text(path)
        new_text, frontmatter = updated_note(text, updates)
        return cls(path, original, new_text.encode("utf-8"), new_text, frontmatter)

    def apply(self) -> bool:
        """Write the updated note; False when it changed since `read` (nothing written)."""
        if self.new == self.original:
            return True
        # The note keeps its own mode (a person may have chosen it).
        temp = write_temp(self.path, self.new, stat.S_IMODE(self.path.stat().st_mode))
        try:
            # Compare content, not mtime: mtime granularity can hide a quick second save. A
            # save landing between this read and the replace is still possible (no lock binds
            # Obsidian); the window is microseconds, against seconds between a person's saves.
            if self.path.read_bytes() != self.original:
                return False
            replace_with(temp, self.path)
            return True
        finally:
            temp.unlink(missing_ok=True)
