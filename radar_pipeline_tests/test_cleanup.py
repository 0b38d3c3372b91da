"""The weekly close empties Temporary Content and provably touches nothing else.

Every case checksums `Site Content/`, the rest of the vault and a folder outside the vault
before and after, so "untouched" is measured, not assumed.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from radar_pipeline.core.errors import CleanupRefused
from radar_pipeline.core.layout import TEMPORARY_DIR
from radar_pipeline.core.vault.cleanup import (
    CleanupResult,
    close_temporary_content,
    temporary_inventory,
)

TEMP_FILES = {
    "openai-news/2026-11-30-full-text.md": b"full third-party text " * 50,
    "openai-news/nested/deeper/page.html": b"<html>" + b"x" * 4000 + b"</html>",
    "react-blog/post.md": b"react text",
    "note.md": b"same name as a published file",
    ".gitkeep": b"",
}
SITE_FILES = {
    "note.md": b"published, never touched",
    "blog/2026-11-30-full-text.md": b"published post with a temporary-looking name",
    "blog/index.mdx": b"# Blog",
}


def _write(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def tree_digest(root: Path, exclude: Path | None = None) -> str:
    """sha256 over every entry under root: paths, kinds, file bytes, link targets; no following."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        dirnames.sort()
        if exclude is not None:
            dirnames[:] = [d for d in dirnames if here / d != exclude]
        for name in sorted(dirnames + filenames):
            path = here / name
            if exclude is not None and path == exclude:
                continue
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                digest.update(f"L {rel} -> {os.readlink(path)}\n".encode())
            elif path.is_dir():
                digest.update(f"D {rel}\n".encode())
            else:
                digest.update(f"F {rel} {os.lstat(path).st_mode:o}\n".encode())
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


class Vault:
    """A real vault in tmp_path plus a folder outside it, with checksums of what must stay."""

    def __init__(self, base: Path) -> None:
        self.root = base / "vault"
        self.outside = base / "outside"
        self.temp = self.root / TEMPORARY_DIR
        self.site = self.root / "Site Content"
        _write(self.root / "Radar" / "Sources", {"openai-news.md": b"---\nid: openai-news\n---\n"})
        _write(self.root / "Radar" / "Signals", {"20261130T010203Z-abcd.md": b"signal"})
        _write(self.site, SITE_FILES)
        _write(self.outside, {"keep.txt": b"outside the vault"})

    def fill_temporary(self) -> None:
        _write(self.temp, TEMP_FILES)

    def snapshot(self) -> tuple[str, str, str]:
        return (
            tree_digest(self.site),
            tree_digest(self.root, exclude=self.temp),
            tree_digest(self.outside),
        )


@pytest.fixture
def vault(tmp_path: Path) -> Vault:
    return Vault(tmp_path)


@pytest.fixture
def switch_interval() -> Iterator[None]:
    """Let two threads interleave finely, so a race has many chances to happen."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def _temp_bytes() -> int:
    return sum(len(data) for data in TEMP_FILES.values())


def test_normal_close_empties_everything_and_counts(vault: Vault) -> None:
    vault.fill_temporary()
    before = vault.snapshot()
    assert temporary_inventory(vault.root) == (len(TEMP_FILES), _temp_bytes())

    result = close_temporary_content(vault.root)

    assert result == CleanupResult(deleted=len(TEMP_FILES), bytes=_temp_bytes(), retained=0)
    assert vault.temp.is_dir()
    assert list(vault.temp.iterdir()) == []  # sub-folders and .gitkeep gone too
    assert temporary_inventory(vault.root) == (0, 0)
    assert vault.snapshot() == before


def test_second_close_is_a_no_op(vault: Vault) -> None:
    vault.fill_temporary()
    close_temporary_content(vault.root)
    before = vault.snapshot()
    assert close_temporary_content(vault.root) == CleanupResult(0, 0, 0)
    assert vault.snapshot() == before


def test_missing_folder_is_nothing_to_do_and_creates_nothing(vault: Vault, tmp_path: Path) -> None:
    before = vault.snapshot()
    assert close_temporary_content(vault.root) == CleanupResult(0, 0, 0)
    assert not vault.temp.exists()
    assert temporary_inventory(vault.root) == (0, 0)
    assert vault.snapshot() == before
    assert close_temporary_content(tmp_path / "no-such-vault") == CleanupResult(0, 0, 0)
    assert not (tmp_path / "no-such-vault").exists()


def test_vault_root_given_through_a_symlink_is_resolved(vault: Vault, tmp_path: Path) -> None:
    vault.fill_temporary()
    alias = tmp_path / "vault-alias"
    alias.symlink_to(vault.root)
    before = vault.snapshot()
    assert close_temporary_content(alias).retained == 0
    assert temporary_inventory(vault.root) == (0, 0)
    assert vault.snapshot() == before


def test_links_inside_are_removed_as_links_and_targets_untouched(vault: Vault) -> None:
    vault.fill_temporary()
    links = {
        "to-site-file.md": vault.site / "note.md",
        "to-site-folder": vault.site,
        "nested/to-site-blog": vault.site / "blog",
        "to-outside": vault.outside,
        "to-the-vault": vault.root,
        "dangling": vault.root / "no-such-file",
        "relative-up": Path("../../Site Content"),
    }
    for rel, target in links.items():
        (vault.temp / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault.temp / rel).symlink_to(target)
    before = vault.snapshot()
    assert temporary_inventory(vault.root) == (len(TEMP_FILES) + len(links), _temp_bytes())

    result = close_temporary_content(vault.root)

    assert result.deleted == len(TEMP_FILES) + len(links)
    assert result.bytes == _temp_bytes()  # a link's own size is not text we held
    assert result.retained == 0
    assert result.refused == ()
    assert list(vault.temp.iterdir()) == []
    assert vault.snapshot() == before
    assert (vault.site / "note.md").read_bytes() == SITE_FILES["note.md"]


@pytest.mark.parametrize(("target", "where"), [("site", "inside"), ("outside", "outside")])
def test_temporary_content_as_a_symlink_is_refused(vault: Vault, target: str, where: str) -> None:
    destination = vault.site if target == "site" else vault.outside
    vault.temp.parent.mkdir(parents=True, exist_ok=True)
    vault.temp.symlink_to(destination, target_is_directory=True)
    before = vault.snapshot()
    whole_vault = tree_digest(vault.root)

    with pytest.raises(
        CleanupRefused, match=f"is a symlink to .*, {where} the vault root"
    ) as refused:
        close_temporary_content(vault.root)
    with pytest.raises(CleanupRefused):
        temporary_inventory(vault.root)

    assert "deleted nothing" in str(refused.value)
    assert str(refused.value).startswith("cleanup: ")
    assert vault.temp.is_symlink()
    assert vault.snapshot() == before
    assert tree_digest(vault.root) == whole_vault


def test_radar_folder_as_a_symlink_outside_is_refused(vault: Vault) -> None:
    elsewhere = vault.outside / "Radar"
    _write(elsewhere / "Temporary Content", {"x.md": b"not ours to delete"})
    (vault.root / "Radar" / "Sources" / "openai-news.md").unlink()
    for sub in ("Sources", "Signals"):
        for f in (vault.root / "Radar" / sub).iterdir():
            f.unlink()
        (vault.root / "Radar" / sub).rmdir()
    (vault.root / "Radar").rmdir()
    (vault.root / "Radar").symlink_to(elsewhere)
    before = vault.snapshot()

    with pytest.raises(CleanupRefused, match="outside the vault root"):
        close_temporary_content(vault.root)

    assert (elsewhere / "Temporary Content" / "x.md").read_bytes() == b"not ours to delete"
    assert vault.snapshot() == before


def test_temporary_content_as_a_file_is_refused(vault: Vault) -> None:
    vault.temp.parent.mkdir(parents=True, exist_ok=True)
    vault.temp.write_bytes(b"a file where the folder should be")
    before = vault.snapshot()
    with pytest.raises(CleanupRefused, match="not a folder"):
        close_temporary_content(vault.root)
    assert vault.temp.read_bytes() == b"a file where the folder should be"
    assert vault.snapshot() == before


def test_published_file_with_a_temporary_name_is_untouched(vault: Vault) -> None:
    vault.fill_temporary()
    published = vault.site / "blog" / "2026-11-30-full-text.md"
    site_before = tree_digest(vault.site)
    close_temporary_content(vault.root)
    assert published.read_bytes() == SITE_FILES["blog/2026-11-30-full-text.md"]
    assert not (vault.temp / "openai-news").exists()
    assert tree_digest(vault.site) == site_before


def test_folder_swapped_for_a_link_during_the_close_never_leads_outside(
    vault: Vault, switch_interval: None
) -> None:
    """A real race: another thread keeps swapping a sub-folder for a link to Site Content."""
    before = vault.snapshot()
    swaps = swaps_during_close = 0
    for _ in range(12):
        _write(vault.temp / "victim", {f"f{n}.md": b"t" for n in range(100)})
        stop, live = threading.Event(), threading.Event()

        def swap(stop: threading.Event = stop, live: threading.Event = live) -> None:
            nonlocal swaps
            victim, stash = vault.temp / "victim", vault.temp / "stash"
            while not stop.is_set():
                for step in (
                    lambda: victim.rename(stash),
                    lambda: victim.symlink_to(vault.site),
                    lambda: time.sleep(0.001),  # hold the link in place for a moment
                    victim.unlink,
                    lambda: stash.rename(victim),
                ):
                    try:
                        step()
                        swaps += 1  # each successful step changes what the close sees
                        live.set()
                    except OSError:
                        pass

        attacker = threading.Thread(target=swap)
        attacker.start()
        try:
            assert live.wait(10), "the attacking thread never swapped"
            swaps_at_start = swaps
            close_temporary_content(vault.root)
            swaps_during_close += swaps - swaps_at_start
        finally:
            stop.set()
            attacker.join()
        assert vault.snapshot() == before
    assert swaps_during_close > 0  # the race really ran while closing
    close_temporary_content(vault.root)
    assert temporary_inventory(vault.root) == (0, 0)


@pytest.mark.slow  # creating the files takes 5-30 s on a busy disk; the close itself ~0.5 s
def test_closing_ten_thousand_small_files(vault: Vault) -> None:
    for folder in range(100):
        _write(vault.temp / f"src-{folder:03d}", {f"{n:03d}.md": b"0123456789" for n in range(100)})
    before = vault.snapshot()
    started = time.perf_counter()
    result = close_temporary_content(vault.root)
    elapsed = time.perf_counter() - started
    assert result == CleanupResult(deleted=10_000, bytes=100_000, retained=0)
    assert vault.snapshot() == before
    assert elapsed < 60  # a sanity bound, not a benchmark
