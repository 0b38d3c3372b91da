"""Full third-party text, written only under `Radar/Temporary Content/` (invariant 10)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from radar_pipeline.core.errors import VaultError
from radar_pipeline.core.files import replace
from radar_pipeline.core.layout import TEMPORARY_DIR
from radar_pipeline.core.text import inert_markdown, inert_property
from radar_pipeline.core.vault.signals import SIGNAL_ID_RE

# What marks a file as temporary content (the header `write_temporary_text` writes), looked for
# in a file's first `TEMPORARY_HEAD_BYTES` bytes: the retention audit's test for full text
# outside Temporary Content.
TEMPORARY_MARKER = "entityType: temporary-content"
TEMPORARY_HEAD_BYTES = 256


def marks_temporary_text(head: bytes) -> bool:
    """Whether a file beginning with `head` is marked as temporary content: a frontmatter that
    names the marker within its first `TEMPORARY_HEAD_BYTES` bytes."""
    text = head[:TEMPORARY_HEAD_BYTES].decode("utf-8", errors="replace")
    return text.startswith("---\n") and TEMPORARY_MARKER in text


def write_temporary_text(
    vault: Path,
    signal_id: str,
    title: str,
    text: str,
    provenance: Mapping[str, str] | None = None,
) -> int:
    """Write one Signal's full text to Temporary Content; returns bytes written.

    `provenance`: more header keys saying where the text came from (page extraction names the
    page URL, the fetch time and the extractor); each value is written as a quoted string.

    Refuses when the folder is a symlink or resolves outside the vault, so full text can never
    land anywhere else.
    """
    if not SIGNAL_ID_RE.fullmatch(signal_id):
        raise VaultError(f"refusing temporary text for malformed Signal id {signal_id!r}")
    folder = vault / TEMPORARY_DIR
    folder.mkdir(parents=True, exist_ok=True)
    if folder.is_symlink() or not folder.resolve().is_relative_to(vault.resolve()):
        raise VaultError(f"{folder} is a link or lies outside the vault; no full text written")
    extra = "".join(
        f"{key}: {json.dumps(inert_property(value))}\n" for key, value in (provenance or {}).items()
    )
    data = (
        f"---\nentityType: temporary-content\nsignal: {signal_id}\n{extra}---\n\n"
        f"# {inert_markdown(title)}\n\n{inert_markdown(text)}\n"
    ).encode()
    replace(folder / f"{signal_id}.md", data)
    return len(data)
