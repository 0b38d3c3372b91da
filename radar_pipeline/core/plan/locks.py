"""Per-Source locks across processes: one lock file per Source under the vault's `.radar/locks/`."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import filelock


class LockBook:
    """Per-Source locks across processes (flock on a file per Source in the vault).

    Held from planning until the Source's results are committed; a second collection of the
    same Source, in any process, reports it `skipped` with reason `locked`.
    """

    _held: ClassVar[dict[tuple[str, str], filelock.FileLock]] = {}

    def __init__(self, locks_dir: Path) -> None:
        self.locks_dir = locks_dir

    def try_acquire(self, collection_id: str, source_id: str) -> bool:
        if (collection_id, source_id) in LockBook._held:
            return True  # re-planning under a lock this collection already holds
        self.locks_dir.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(
            self.locks_dir / f"{source_id}.lock", timeout=0, thread_local=False
        )
        try:
            lock.acquire()
        except filelock.Timeout:
            return False
        LockBook._held[(collection_id, source_id)] = lock
        return True

    @classmethod
    def release(cls, collection_id: str, source_id: str) -> None:
        lock = cls._held.pop((collection_id, source_id), None)
        if lock is not None:
            lock.release()

    @classmethod
    def release_all(cls, collection_id: str) -> None:
        for key in [k for k in cls._held if k[0] == collection_id]:
            cls.release(*key)
