"""`radar vault check`: every note of a vault against its model, read only.

Source notes (`Radar/Sources/*.md`) are read as `registry.sources.Source`, Signal notes
(`Radar/Signals/*.md`) as `contract.notes.SignalNote`: the models the pipeline itself reads
them with, whose JSON Schemas are published under docs/schema/. A note a person edited into a
shape the model refuses is listed with each key and the reason; nothing is ever rewritten
(a person decides how to fix their note). The registry's other rules (duplicate ids, policy
hints) are `radar sources validate`'s business.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from radar_pipeline.core.contract.notes import SignalNote
from radar_pipeline.core.contract.vault import InvalidNote, NoteKind, VaultValidation
from radar_pipeline.core.errors import RegistryError, VaultError
from radar_pipeline.core.files import is_temp_name
from radar_pipeline.core.frontmatter import split_frontmatter
from radar_pipeline.core.layout import SIGNALS_DIR, SOURCES_DIR
from radar_pipeline.core.registry.sources import Source
from radar_pipeline.core.vault.signals import (
    model_problems,
    parse_signal_frontmatter,
)

WHOLE_NOTE = "(frontmatter)"  # the key of a problem that concerns no one key


def check_vault(vault: Path) -> VaultValidation:
    """Each invalid key of each Source and Signal note of `vault`, sorted by path."""
    invalid: list[InvalidNote] = []
    sources = signals = 0
    for path in _notes(vault / SOURCES_DIR):
        sources += 1
        invalid += _problems(vault, path, "source", _source_problems(path))
    for path in _notes(vault / SIGNALS_DIR):
        signals += 1
        invalid += _problems(vault, path, "signal", _signal_problems(path))
    return VaultValidation(
        sources=sources, signals=signals, invalid=tuple(sorted(invalid, key=lambda n: n.path))
    )


def _notes(folder: Path) -> Iterator[Path]:
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.md")):
        if not is_temp_name(path.name) and path.is_file():
            yield path


def _problems(
    vault: Path, path: Path, kind: NoteKind, problems: list[tuple[str, str]]
) -> list[InvalidNote]:
    rel = path.relative_to(vault).as_posix()
    return [InvalidNote(path=rel, kind=kind, key=key, reason=why) for key, why in problems]


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise VaultError(f"is not UTF-8 text ({exc.reason}); save it as UTF-8") from exc
    except OSError as exc:
        raise VaultError(f"cannot be read ({exc.strerror}); check its permissions") from exc


def _source_problems(path: Path) -> list[tuple[str, str]]:
    try:
        data, _body = split_frontmatter(_text(path))
        Source.model_validate(data)
    except (RegistryError, VaultError) as exc:
        return [(WHOLE_NOTE, exc.message)]
    except ValidationError as exc:
        return model_problems(exc)
    return []


def _signal_problems(path: Path) -> list[tuple[str, str]]:
    try:
        fm = parse_signal_frontmatter(_text(path), path)
    except VaultError as exc:
        return [(WHOLE_NOTE, exc.message)]
    try:
        note = SignalNote.model_validate(fm)
    except ValidationError as exc:
        return model_problems(exc)
    if note.id != path.stem:
        return [("id", f"declares {note.id!r} but the file is named {path.name}")]
    return []
