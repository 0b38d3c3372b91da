"""The weekly close: empty `Radar/Temporary Content/` and nothing else (docs/architecture.md,
invariant 10).

Full third-party text may live only in Temporary Content; closing the week deletes every entry
in it and the evidence is a verified count of zero left behind. Nothing outside the folder is
ever written, moved or deleted, and links are removed as links, never followed.

How that holds: the path from the (resolved) vault root to the folder is opened one component
at a time with O_NOFOLLOW, then the walk works only through directory file descriptors
(`dir_fd=`), re-reading each entry with lstat right before acting on it. A name swapped for a
symlink mid-walk is therefore either unlinked as a link or refused, never traversed. Sub-folders
on another file system (a bind mount) are refused rather than emptied.

Remaining race, accepted: a directory we already hold open can be *renamed* by another process
to somewhere else (say into `Site Content/`) while we are emptying it; we would then keep
deleting what was inside it, which was Temporary Content when we opened it. Doing that needs a
process that can already write anywhere in the vault, so it grants nothing new.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from radar_pipeline.core.errors import CleanupRefused
from radar_pipeline.core.layout import TEMPORARY_DIR
from radar_pipeline.core.models import CleanupResult

# Entries renamed or added by another process mid-walk are picked up by a further pass.
_MAX_PASSES = 3

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

logger = logging.getLogger(__name__)


@dataclass
class _Tally:
    device: int
    deleted: int = 0
    bytes: int = 0
    refused: list[str] = field(default_factory=list)

    def refuse(self, rel: PurePosixPath, reason: str) -> None:
        logger.warning("cleanup kept %s: %s", rel, reason)
        self.refused.append(f"{rel}: {reason}")


def close_temporary_content(vault_root: Path) -> CleanupResult:
    """Delete everything under `Radar/Temporary Content/`, keep the folder, report the count.

    A missing folder means nothing to do (nothing is created). Raises CleanupRefused, having
    deleted nothing, if the folder or `Radar/` is a symlink, is not a directory, or resolves
    outside the vault. `retained` is a fresh count of the folder that was emptied; it must be 0.
    """
    fd = _open_temporary(vault_root)
    if fd is None:
        return CleanupResult(deleted=0, bytes=0, retained=0)
    try:
        tally = _Tally(device=os.fstat(fd).st_dev)
        retained = 0
        for _ in range(_MAX_PASSES):
            deleted_before = tally.deleted
            _empty_dir(fd, PurePosixPath("."), tally)
            retained, _ = _count_dir(fd)
            if retained == 0 or tally.deleted == deleted_before:
                break
    finally:
        os.close(fd)
    refused = tuple(dict.fromkeys(tally.refused))  # a later pass may refuse the same entry
    return CleanupResult(tally.deleted, tally.bytes, retained, refused)


def temporary_inventory(vault_root: Path) -> tuple[int, int]:
    """Count (files, bytes) under Temporary Content; links count as files and are not followed.

    Bytes are the sizes of regular files only. Raises CleanupRefused on an unsafe layout,
    like the close itself, rather than counting somewhere else.
    """
    fd = _open_temporary(vault_root)
    if fd is None:
        return 0, 0
    try:
        return _count_dir(fd)
    finally:
        os.close(fd)


def _open_temporary(vault_root: Path) -> int | None:
    """Check the layout, then open Temporary Content without following any link in it."""
    _require_platform_support()
    root = vault_root.resolve()
    if not _check_layout(root):
        return None
    fd = os.open(root, _DIR_FLAGS & ~os.O_NOFOLLOW)
    try:
        for part in TEMPORARY_DIR.parts:
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                return None
            except OSError as exc:  # ELOOP / ENOTDIR: swapped for a link since the check
                raise CleanupRefused(
                    f"{root / TEMPORARY_DIR} changed while opening it ({exc.strerror}); "
                    "nothing was deleted, check the vault layout and retry"
                ) from exc
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_layout(root: Path) -> bool:
    """False when there is nothing to close; raise CleanupRefused when the layout is unsafe."""
    path = root
    for part in TEMPORARY_DIR.parts:
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return False
        except NotADirectoryError as exc:
            raise CleanupRefused(f"{path.parent} is not a folder; nothing was deleted") from exc
        if stat.S_ISLNK(mode):
            target = path.resolve()
            where = "inside" if target.is_relative_to(root) else "outside"
            raise CleanupRefused(
                f"{path} is a symlink to {target}, {where} the vault root; the weekly close "
                "never follows links and deleted nothing: replace it with a real folder"
            )
        if not stat.S_ISDIR(mode):
            raise CleanupRefused(f"{path} is not a folder; nothing was deleted")
    if not (root / TEMPORARY_DIR).resolve().is_relative_to(root):  # belt and braces
        raise CleanupRefused(f"{root / TEMPORARY_DIR} resolves outside the vault root {root}")
    return True


def _require_platform_support() -> None:
    needed_dir_fd = {os.open, os.stat, os.unlink, os.rmdir}  # os.stat covers lstat
    if not needed_dir_fd <= os.supports_dir_fd or os.scandir not in os.supports_fd:
        raise CleanupRefused(
            "this platform lacks dir_fd file operations, so the weekly close cannot guarantee "
            "it never follows a link; nothing was deleted"
        )


def _entry_names(dir_fd: int) -> list[str]:
    # Listed up front so the directory is not modified while being iterated.
    with os.scandir(dir_fd) as entries:
        return [entry.name for entry in entries]


def _empty_dir(dir_fd: int, rel: PurePosixPath, tally: _Tally) -> None:
    for name in _entry_names(dir_fd):
        try:
            _remove_entry(dir_fd, name, rel / name, tally)
        except FileNotFoundError:
            continue  # renamed or removed by someone else meanwhile; a later pass looks again
        except OSError as exc:
            tally.refuse(rel / name, exc.strerror or type(exc).__name__)


def _remove_entry(parent_fd: int, name: str, rel: PurePosixPath, tally: _Tally) -> None:
    try:
        info = os.lstat(name, dir_fd=parent_fd)  # re-read right before acting, never followed
    except FileNotFoundError:
        return  # removed by someone else meanwhile
    if not stat.S_ISDIR(info.st_mode):
        # A regular file, a link (to a file, a folder, or nothing) or a special file:
        # unlink removes the name itself and never touches a link's target.
        os.unlink(name, dir_fd=parent_fd)
        tally.deleted += 1
        if stat.S_ISREG(info.st_mode):
            tally.bytes += info.st_size
        return
    if info.st_dev != tally.device:
        tally.refuse(rel, "on another file system (a mount); not emptied")
        return
    child = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)  # ELOOP if swapped for a link
    try:
        opened = os.fstat(child)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            tally.refuse(rel, "replaced by another folder during the close")
            return
        _empty_dir(child, rel, tally)
    finally:
        os.close(child)
    os.rmdir(name, dir_fd=parent_fd)


def _count_dir(dir_fd: int) -> tuple[int, int]:
    files = size = 0
    for name in _entry_names(dir_fd):
        try:
            info = os.lstat(name, dir_fd=dir_fd)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            files += 1
            size += info.st_size if stat.S_ISREG(info.st_mode) else 0
            continue
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            continue
        except OSError:  # swapped for a link or file since the lstat: one entry, not entered
            files += 1
            continue
        try:
            sub_files, sub_size = _count_dir(child)
        finally:
            os.close(child)
        files += sub_files
        size += sub_size
    return files, size
