"""The durable write: every file the pipeline creates or replaces goes through this module
(docs/architecture.md, invariant 4: a reader sees a file complete or not at all).

- `create_once`: a file a person may own (a Source note, a `.base` view; Signals in the batch
  form below) is written to a temp file, fsynced and hard-linked to its name; the link fails
  if the name exists, so an existing file (a person's, another process's) is never
  overwritten and never partial.
- `replace`: a file the pipeline owns (Temporary Content, an OPML export, `dagster.yaml`) is
  written to a temp file, fsynced and renamed over its name (`os.replace`, atomic).
- `write_temp` + `replace_with`: the same replace in two steps, for a caller that must check
  the target between them (a Source note a person may be saving meanwhile).
- `fsync_dir`: a new or renamed name is durable only once its folder is fsynced.
- `stage_once` + `BatchSync` + `link_staged`: `create_once` for a batch of new files (a
  collection's Signals) in three steps: every temp file written, then made durable together
  (one `syncfs` of their file system instead of an fsync each, where that is as strong),
  then each linked to its name. A name still appears only once its content is durable.

Every write, link and rename here runs inside `naming`, the translation boundary of the OS's
errors: a disk fault (full, read-only, permission) leaves as `VaultDiskFault` naming the file.

Temp files are named `.<target name>.<pid>-<random>.tmp` in the target's own folder (a link
or rename never crosses a file system): dot-led and not `*.md`, so neither Obsidian nor the
registry reads a half-written file, and the pid lets `read_temp_name` tell a killed writer's
leftover (SIGKILL skips every `finally`) from a live writer's file in flight.

Modes: a temp file is created with `os.open(..., 0o666)`, so the kernel applies the process
umask at creation, as for any file an editor saves (typically 0644): nothing reads or sets the
umask (`os.umask` sets it process-wide while reading it, a race with other threads), and a
file is never tighter than the vault's own files. `mkstemp` would make every file 0600.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import secrets
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from radar_pipeline.core.errors import DISK_FAULTS, VaultDiskFault

# What `temp_path` makes.
_TEMP_NAME = re.compile(r"^\.[^/]+\.(\d+)-[0-9a-f]{16}\.tmp$")
# The names earlier versions gave temp files, still recognised so their leftovers are counted
# and cleaned: `.tmp-signal-<pid>-<random>.md` (Signals), `.tmp-<pid>-<random>.md` (Temporary
# Content), `.<name>.md.<pid>-<random>.tmp` (Sources; first without the pid: only its age
# condemns such a file).
_EARLIER_TEMP_NAMES = (
    re.compile(r"^\.tmp-(?:signal-)?(?:(\d+)-)?[^/]*\.md$"),
    re.compile(r"^\.[^/]+\.md\.(?:(\d+)-)?[^/]*\.tmp$"),
)
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE_ATTEMPTS = 16  # a clash of 64 random bits is not expected even once


@dataclass(frozen=True)
class TempName:
    """A temp file's name read back: the writing process, when the name carries it."""

    pid: int | None


def temp_path(target: Path) -> Path:
    """A fresh temp file name for writing `target` (in the same folder; see the module doc)."""
    return target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(8)}.tmp")


def read_temp_name(name: str) -> TempName | None:
    """The temp file convention read back from a file name; None when `name` is not a temp."""
    for pattern in (_TEMP_NAME, *_EARLIER_TEMP_NAMES):
        match = pattern.match(name)
        if match is not None:
            return TempName(int(match.group(1)) if match.group(1) else None)
    return None


def is_temp_name(name: str) -> bool:
    """Whether `name` is a writer's temp file (this convention or an earlier one)."""
    return read_temp_name(name) is not None


def write_temp(target: Path, data: bytes, mode: int | None = None, *, durable: bool = True) -> Path:
    """Write `data` to a new temp file beside `target`, fsynced unless `durable=False`; returns
    its path.

    `mode`: the permission bits to give it (an existing file's, kept on replace); None: the
    process umask applied to 0o666 (the module doc). `durable=False`: the caller makes it
    durable (`BatchSync`) before linking it. The caller removes the temp file if it does not
    link or rename it.
    """
    for _ in range(_CREATE_ATTEMPTS):
        temp = temp_path(target)
        try:
            with naming(temp):
                fd = os.open(temp, _CREATE_FLAGS, 0o666)
        except FileExistsError:
            continue
        break
    else:
        raise FileExistsError(errno.EEXIST, "no free temp file name", str(target.parent))
    try:
        with naming(target), os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if mode is not None:
                os.fchmod(handle.fileno(), mode)
            if durable:
                os.fsync(handle.fileno())
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


@contextlib.contextmanager
def naming(path: Path) -> Iterator[None]:
    """The translation boundary of the OS's write errors: a disk fault (ENOSPC, EDQUOT, EROFS,
    EACCES, EPERM) leaves as VaultDiskFault naming its file (the OS's, else `path`: a write or
    fsync on a descriptor names none); any other OSError without a file name leaves naming
    `path`. Either way the line a person reads says which file could not be written."""
    try:
        yield
    except VaultDiskFault:
        raise
    except OSError as exc:
        named = str(exc.filename) if exc.filename is not None else str(path)
        if exc.errno in DISK_FAULTS:
            raise VaultDiskFault(exc.errno, exc.strerror or os.strerror(exc.errno), named) from exc
        if exc.filename is not None:
            raise
        raise OSError(exc.errno, exc.strerror, named) from exc


def fsync_dir(folder: Path) -> None:
    """Make the folder's new and renamed entries durable. A file system that cannot fsync a
    folder (EINVAL, ENOTSUP) is let be: it offers nothing stronger."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
    finally:
        os.close(fd)


def create_once(target: Path, data: str | bytes, *, sync_dir: bool = True) -> bool:
    """Write `data` (str: UTF-8) to `target` unless a file or link of that name exists; True
    if written.

    A name that appears meanwhile (a person, another process) wins: it is kept. `sync_dir=False`:
    the caller fsyncs the folder itself after a batch, before recording any of it.
    """
    with naming(target.parent):
        target.parent.mkdir(parents=True, exist_ok=True)
    temp = stage_once(target, data.encode("utf-8") if isinstance(data, str) else data)
    if temp is None or not link_staged(temp, target):
        return False
    if sync_dir:
        fsync_dir(target.parent)
    return True


def stage_once(target: Path, data: bytes, *, durable: bool = True) -> Path | None:
    """The first step of `create_once`: None if `target` exists (a file or a link), else the
    temp file holding `data`, fsynced unless `durable=False` (then `BatchSync.sync` must run
    before `link_staged`). The folder must exist."""
    if os.path.lexists(target):  # a file, or a link (even a dangling one)
        return None
    return write_temp(target, data, durable=durable)


def link_staged(temp: Path, target: Path) -> bool:
    """The last step of `create_once`: give the staged `temp` the name `target` unless that
    name appeared meanwhile (False); the temp file is removed either way."""
    try:
        with naming(target):
            os.link(temp, target)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    return True


class BatchSync:
    """Makes the temp files `stage_once(..., durable=False)` wrote in one folder durable, all
    at once: one `syncfs(2)` of the file system holding them, a journal commit and one device
    flush for the batch where an fsync each costs a commit each (4,000 Signal-sized files:
    1.1 s of wall and 1.5 s of CPU fsynced on eight threads, 0.55 s and 0.6 s this way;
    docs/performance.md). It also flushes whatever else that file system holds unwritten, so
    a batch smaller than `group_min` is fsynced file by file instead.

    `open` it before the batch's files are written: `syncfs` reports the write-back errors
    of the file system since its descriptor was opened, so an error another process's sync
    saw first still fails this batch. `open` gives None where one `syncfs` is not as strong
    as an fsync of each file: off Linux, before Linux 5.8 (no error reported), and on a file
    system outside SYNCFS_FILESYSTEMS (FUSE, 9p or CIFS do not ask their server to flush);
    the caller then fsyncs each file as it writes it (`durable=True`)."""

    def __init__(self, folder: Path, fd: int, group_min: int) -> None:
        self.folder, self._fd, self.group_min = folder, fd, group_min

    @classmethod
    def open(cls, folder: Path, group_min: int) -> BatchSync | None:
        if _SYNCFS is None or _filesystem_type(folder) not in SYNCFS_FILESYSTEMS:
            return None
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return cls(folder, fd, group_min)

    def __enter__(self) -> BatchSync:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)

    def sync(self, temps: Sequence[Path]) -> None:
        """Make `temps` (files of this folder) durable; only then may they be linked."""
        if len(temps) >= self.group_min and _SYNCFS is not None:
            if _SYNCFS(self._fd) == 0:
                return
            code = ctypes.get_errno()
            if code not in _SYNCFS_UNSUPPORTED:
                raise OSError(code, f"syncfs: {os.strerror(code)}", str(self.folder))
        for temp in temps:  # a small batch, or a sandbox that refuses syncfs (nothing linked yet)
            fd = os.open(temp, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


# File systems whose `syncfs` writes back and commits all they hold, as their fsync does for
# one file. Elsewhere a batch is fsynced file by file.
SYNCFS_FILESYSTEMS = frozenset({"ext4", "xfs", "btrfs", "tmpfs"})
# A kernel or sandbox without the call (seccomp, gVisor): fsync each file instead.
_SYNCFS_UNSUPPORTED = frozenset({errno.ENOSYS, errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP})


def _syncfs() -> Callable[[int], int] | None:
    """libc's `syncfs(2)` on Linux 5.8 or later (earlier kernels do not report write-back
    errors through it). Python's `os` does not wrap it, so it is called through ctypes, the
    standard library's C interface."""
    release = re.match(r"(\d+)\.(\d+)", os.uname().release) if sys.platform == "linux" else None
    if release is None or (int(release[1]), int(release[2])) < (5, 8):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).syncfs
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int]
    function.restype = ctypes.c_int
    return function


def _filesystem_type(folder: Path) -> str:
    """The type of the file system `folder` lives on: that of the longest mount point holding
    it in /proc/self/mounts (which writes a space in a mount point as `\\040`)."""
    target, best, kind = str(folder.resolve()), "", ""
    try:
        mounts = Path("/proc/self/mounts").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return kind
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), fields[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind


_SYNCFS = _syncfs()


def replace_with(temp: Path, target: Path) -> None:
    """Rename the temp file `write_temp` made over `target`, atomically and durably."""
    with naming(target):
        os.replace(temp, target)
        fsync_dir(target.parent)


def replace(target: Path, data: bytes, mode: int | None = None) -> None:
    """Write `data` to `target`, replacing any file of that name atomically (a reader sees the
    old or the new content, never a mix), then make it durable. `mode` as in `write_temp`."""
    temp = write_temp(target, data, mode)
    try:
        replace_with(temp, target)
    finally:
        temp.unlink(missing_ok=True)
