"""Helpers for the evidence tests: feeds with full content, tree checksums, running `radar`."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from radar_pipeline.cli import main

RADAR = str(Path(sys.executable).parent / "radar")


def content_rss(items: list[tuple[str, str, str]]) -> bytes:
    """RSS 2.0 whose items (guid, title, full text) carry `content:encoded` full text."""
    parts = "".join(
        f"<item><title>{title}</title><link>https://example.com/{guid}</link>"
        f'<guid isPermaLink="false">{guid}</guid><description>Summary of {title}.</description>'
        f"<content:encoded><![CDATA[<p>{text}</p>]]></content:encoded></item>"
        for guid, title, text in items
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0" '
        'xmlns:content="http://purl.org/rss/1.0/modules/content/"><channel><title>t</title>'
        f"<link>https://example.com/</link><description>d</description>{parts}</channel></rss>"
    ).encode()


def tree_digest(root: Path) -> str:
    """sha256 over every entry under root (paths, kinds, bytes, link targets), never following
    a link; a missing root has its own digest."""
    digest = hashlib.sha256()
    if not root.exists() and not root.is_symlink():
        return "missing"
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = here / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                digest.update(f"L {rel} -> {os.readlink(path)}\n".encode())
            elif path.is_dir():
                digest.update(f"D {rel}\n".encode())
            else:
                digest.update(f"F {rel} {hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()


def file_digests(folder: Path) -> dict[str, str]:
    """name -> sha256 of each file directly in folder."""
    if not folder.is_dir():
        return {}
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def radar_process(*args: str, env: dict[str, Path]) -> subprocess.CompletedProcess[str]:
    """`radar ARGS` as a user runs it: a real process with the test's vault, DB and home."""
    environ = {
        **os.environ,
        "RADAR_VAULT": str(env["vault"]),
        "RADAR_DB": str(env["db"]),
        "DAGSTER_HOME": str(env["home"]),
    }
    return subprocess.run([RADAR, *args], capture_output=True, text=True, env=environ, timeout=240)


def radar_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    """`radar ARGS --json` through the same entry point, in this process (the environment comes
    from the `radar_env` fixture): (exit code, parsed stdout, stderr)."""
    capsys.readouterr()
    code = main([*args, "--json"])
    out = capsys.readouterr()
    return code, (json.loads(out.out) if out.out.strip() else None), out.err
