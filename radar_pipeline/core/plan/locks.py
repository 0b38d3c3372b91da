"""Per-Source locks across processes: one lock file per Source under the vault's `.radar/locks/`."""

from __future__ import annotations

from pathlib import Path

import filelock


class LockBook:
    """The Source locks one collection holds (flock on a file per Source).

    Taken while planning and held until the Source's results are committed; a second
    collection of the same Source, in any process, reports it `skipped` with reason `locked`.
    One LockBook belongs to one Collector, so what it holds is that collection's and nobody
    else's; `release_all` is safe to call more than once.
    """

    def __init__(self, locks_dir: Path) -> None:
        self.locks_dir = locks_dir
        self._held: dict[tuple[str, str], filelock.FileLock] = {}

    def try_acquire(self, collection_id: str, source_id: str) -> bool:
        if (collection_id, source_id) in self._held:
            return True  # re-planning under a lock this collection already holds
        self.locks_dir.mkdir(parents=True, exist_ok=True)
        lock = filelock.FileLock(
            self.locks_dir / f"{source_id}.lock", timeout=0, thread_local=False
        )
        try:
            lock.acquire()
        except filelock.Timeout:
            return False
        self._held[(collection_id, source_id)] = lock
        return True

    def release_all(self, collection_id: str | None = None) -> None:
        """Release the locks of one collection (all of them when None)."""
        for key in [k for k in self._held if collection_id is None or k[0] == collection_id]:
            self._held.pop(key).release()
