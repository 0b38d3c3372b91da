"""Writing a vault file that a person may also own: created once, atomically, never replaced."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def create_once(target: Path, text: str) -> bool:
    """Write `text` to `target` unless a file (or link) of that name exists; True if written.

    The text goes to a fsynced temp file that is hard-linked to the name, so the file is never
    partial, and a name that appears meanwhile (a person, another process) wins: it is kept.
    """
    if target.exists() or target.is_symlink():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
