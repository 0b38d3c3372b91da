"""The durable write (core/files.py): files are created with the process umask, never replaced
when created once, and their temp names are the ones the stale-temp cleanup recognises."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from radar_pipeline.core.errors import VaultDiskFault, explain
from radar_pipeline.core.files import (
    BatchSync,
    create_once,
    link_staged,
    read_temp_name,
    replace,
    stage_once,
    temp_path,
)
from radar_pipeline.core.layout import SIGNALS_VIEW, SOURCES_DIR, SOURCES_VIEW, TEMPORARY_DIR
from radar_pipeline.core.vault.signals import remove_stale_temp_files
from radar_pipeline_tests.evidencekit import content_rss
from radar_pipeline_tests.vaultkit import signal_files, write_fixture_source

RADAR = str(Path(sys.executable).parent / "radar")

OPML = b"""<?xml version="1.0" encoding="UTF-8"?>
<opml version="2.0"><head><title>feeds</title></head><body>
<outline text="Example" type="rss" xmlUrl="https://example.com/feed.xml"/>
</body></opml>
"""


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _radar(umask: int, *args: str, env: dict[str, Path]) -> None:
    environ = {
        **os.environ,
        "RADAR_VAULT": str(env["vault"]),
        "RADAR_DB": str(env["db"]),
        "DAGSTER_HOME": str(env["home"]),
    }
    proc = subprocess.run(
        [RADAR, *args], capture_output=True, text=True, env=environ, timeout=180, umask=umask
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("umask", "expected"), [(0o022, 0o644), (0o077, 0o600)])
def test_created_files_have_the_process_umask(
    radar_env: dict[str, Path], umask: int, expected: int
) -> None:
    vault = radar_env["vault"]
    write_fixture_source(
        vault, "full", content_rss([("a1", "First", "Full text.")]), fullText="feed-content"
    )
    opml = radar_env["root"] / "feeds.opml"
    opml.write_bytes(OPML)
    _radar(umask, "sources", "import", str(opml), env=radar_env)
    _radar(umask, "collect", "--all", env=radar_env)

    imported = [p for p in (vault / SOURCES_DIR).glob("*.md") if p.name != "full.md"]
    created = {
        "the imported Source": imported,
        "the Signal": signal_files(vault),
        "the Temporary Content": sorted((vault / TEMPORARY_DIR).glob("*.md")),
        "the views": [vault / SIGNALS_VIEW, vault / SOURCES_VIEW],
    }
    modes = {what: [oct(_mode(p)) for p in paths] for what, paths in created.items()}
    assert modes == {what: [oct(expected)] * len(paths) for what, paths in created.items()}
    assert all(len(paths) >= 1 for paths in created.values()), modes


def test_create_once_keeps_an_existing_file_and_replace_keeps_a_given_mode(
    tmp_path: Path,
) -> None:
    target = tmp_path / "note.md"
    assert create_once(target, "first")
    assert not create_once(target, "second")
    assert target.read_text() == "first"
    replace(target, b"third", mode=0o640)
    assert (target.read_bytes(), _mode(target)) == (b"third", 0o640)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["note.md"]  # no temp file left


def test_temp_names_carry_the_writer_and_are_what_the_cleanup_removes(tmp_path: Path) -> None:
    target = tmp_path / SOURCES_DIR / "s.md"
    temp = temp_path(target)
    assert temp.parent == target.parent and temp.name.startswith(".s.md.")
    assert read_temp_name(temp.name) is not None
    assert read_temp_name(temp.name).pid == os.getpid()  # type: ignore[union-attr]
    assert read_temp_name("s.md") is None and read_temp_name(".s.md") is None
    target.parent.mkdir(parents=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    leftover = target.with_name(temp.name.replace(f".{os.getpid()}-", f".{dead.pid}-"))
    leftover.write_text("x")
    temp.write_text("x")  # a live writer's file in flight
    assert remove_stale_temp_files(tmp_path) == 1
    assert not leftover.exists() and temp.exists()


def test_a_staged_file_gets_its_name_only_if_the_name_is_still_free(tmp_path: Path) -> None:
    """The batch form of `create_once`: staged without an fsync, synced together, linked; a
    name that appeared between staging and linking is kept, and no temp file is left."""
    free, taken, there = tmp_path / "free.md", tmp_path / "taken.md", tmp_path / "there.md"
    there.write_text("a person's note")
    assert stage_once(there, b"ours", durable=False) is None
    temps = [stage_once(free, b"new", durable=False), stage_once(taken, b"ours", durable=False)]
    assert all(temps)
    staged = [t for t in temps if t is not None]
    with BatchSync(tmp_path, os.open(tmp_path, os.O_RDONLY), group_min=1) as group:
        group.sync(staged)  # one syncfs (on Linux 5.8+), else an fsync each
    taken.write_text("written meanwhile")
    assert link_staged(staged[0], free)
    assert not link_staged(staged[1], taken)
    assert free.read_bytes() == b"new"
    assert taken.read_text() == "written meanwhile"
    assert there.read_text() == "a person's note"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["free.md", "taken.md", "there.md"]


def test_a_batch_is_synced_together_only_where_that_is_as_strong_as_an_fsync(
    tmp_path: Path,
) -> None:
    """`BatchSync.open` gives a batch sync on this machine's local file system (ext4, xfs,
    btrfs or tmpfs on Linux 5.8+) and None elsewhere, where each file is fsynced instead."""
    from radar_pipeline.core import files

    kind = files._filesystem_type(tmp_path)
    group = BatchSync.open(tmp_path, group_min=2)
    expected = files._SYNCFS is not None and kind in files.SYNCFS_FILESYSTEMS
    assert (group is not None) == expected, kind
    if group is not None:
        with group:
            temps = [stage_once(tmp_path / f"{i}.md", b"x", durable=False) for i in range(3)]
            group.sync([t for t in temps if t is not None])


def test_a_read_only_folder_refuses_a_write_as_a_vault_disk_fault_naming_the_file(
    tmp_path: Path,
) -> None:
    """The OS's EROFS (a real read-only bind mount) is translated where the write is made:
    VaultDiskFault with the file, still an OSError, and the line names both."""
    folder = tmp_path / "vault"
    folder.mkdir()
    bound = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True)
    if bound.returncode != 0:
        pytest.skip(f"`mount --bind` refused: {bound.stderr.decode().strip()}")
    try:
        remounted = subprocess.run(
            ["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True
        )
        if remounted.returncode != 0:
            pytest.skip(f"`mount -o remount,bind,ro` refused: {remounted.stderr.decode()}")
        with pytest.raises(VaultDiskFault) as raised:
            create_once(folder / "note.md", "body")
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
    fault = raised.value
    assert isinstance(fault, OSError) and fault.errno == errno.EROFS
    assert fault.path.startswith(f"{folder}/.note.md.") and fault.path.endswith(".tmp")
    why = explain(fault)
    assert why.error_class == "read-only"
    assert why.line.startswith(f"read-only file system: {fault.path}; make it writable")
    assert not list(folder.iterdir())
