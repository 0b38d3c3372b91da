"""The baseline: the script a user would write instead of Radar.

A sequential loop: fetch each URL (urllib), `feedparser.parse(bytes)` with its defaults, one
Markdown file per entry named by a hash of its id, skipped when the file already exists. No
validators, no concurrency, no provenance, no fsync: that is what makes it a fair "naive".

    python -m benchmarks.naive OUT_DIR URL [URL ...]

Prints one JSON line: {"feeds", "entries", "written", "skipped", "errors"}.
"""

from __future__ import annotations

import hashlib
import json
import sys
import urllib.request
from pathlib import Path

import feedparser


def collect(urls: list[str], out: Path) -> dict[str, int]:
    """Fetch and parse every URL in turn, writing one file per entry not seen before."""
    out.mkdir(parents=True, exist_ok=True)
    counts = {"feeds": 0, "entries": 0, "written": 0, "skipped": 0, "errors": 0}
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                data = response.read()
        except OSError:
            counts["errors"] += 1
            continue
        feed = feedparser.parse(data)
        counts["feeds"] += 1
        for entry in feed.entries:
            counts["entries"] += 1
            key = str(entry.get("id") or entry.get("link") or entry.get("title") or "")
            path = out / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.md"
            if path.exists():
                counts["skipped"] += 1
                continue
            path.write_text(
                f"---\ntitle: {json.dumps(str(entry.get('title', '')))}\n"
                f"link: {json.dumps(str(entry.get('link', '')))}\n"
                f"published: {json.dumps(str(entry.get('published', '')))}\n"
                f"feed: {json.dumps(url)}\n---\n\n{entry.get('summary', '')}\n",
                encoding="utf-8",
            )
            counts["written"] += 1
    return counts


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: python -m benchmarks.naive OUT_DIR URL [URL ...]\n")
        return 1
    counts = collect(argv[1:], Path(argv[0]))
    sys.stdout.write(json.dumps(counts) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
