"""The recorded state of a vault folder (`vault_folder_state`): what lets a reader trust the
index and the stored facts without a listing (core/vault/folder_state.py says when)."""

from __future__ import annotations

from radar_pipeline.core.store.connection import Connection

# mtime_ns, entries, fingerprint, verified_at_ns, temp_files
FolderRow = tuple[int, int, int, int, int]


def load_folder_state(con: Connection, folder: str) -> FolderRow | None:
    """The folder's recorded state, if any."""
    row = con.execute(
        "SELECT mtime_ns, entries, fingerprint, verified_at_ns, temp_files FROM vault_folder_state "
        "WHERE folder = $1",
        [folder],
    ).fetchone()
    if row is None:
        return None
    mtime_ns, entries, fingerprint, verified_at_ns, temp_files = (int(v) for v in row)
    return mtime_ns, entries, fingerprint, verified_at_ns, temp_files


def save_folder_state(con: Connection, folder: str, state: FolderRow) -> None:
    """Replace the folder's recorded state."""
    con.execute("DELETE FROM vault_folder_state WHERE folder = $1", [folder])
    con.execute("INSERT INTO vault_folder_state VALUES ($1, $2, $3, $4, $5, $6)", [folder, *state])


def forget_folder_state(con: Connection, folder: str) -> None:
    """Drop the folder's recorded state: the next reader lists it in full."""
    con.execute("DELETE FROM vault_folder_state WHERE folder = $1", [folder])
