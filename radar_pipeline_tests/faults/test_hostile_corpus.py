"""The feedparser test corpus served over loopback HTTP with its `Header:` lines, as Sources.

Invariant 7 (docs/architecture.md) (one Source failing never stops the others; every failure
has a class) and "never a silent drop" (invariant 14): every item the feed holds is a Signal,
a duplicate, deferred, outside the window, or a rejection with a reason.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import feedparser
import pytest

from radar_pipeline.core.collect.collector import Collector
from radar_pipeline.core.config import Settings
from radar_pipeline.core.errors import FETCH_ERROR_CLASSES
from radar_pipeline.core.layout import SIGNALS_DIR
from radar_pipeline.core.plan.collection import CollectionSpec
from radar_pipeline.core.vault.signals import read_signal_frontmatter
from radar_pipeline_tests.conftest import CORPUS_FEEDPARSER, collect_stages, new_collection_id
from radar_pipeline_tests.faults.farm import FULL, db_rows, record_figures, seeded
from radar_pipeline_tests.feedserver import FeedServer
from radar_pipeline_tests.vaultkit import write_source

BATCH = 100
_HEADER = re.compile(r"Header:\s*([A-Za-z][A-Za-z0-9-]*):[ \t]*([^\r\n]*)")


def corpus_files() -> list[Path]:
    return sorted(
        p
        for p in CORPUS_FEEDPARSER.rglob("*")
        if p.is_file() and p.name != "LICENSE" and p.suffix != ".md"
    )


def declared_headers(data: bytes) -> dict[str, str]:
    """The `Header: Name: value` comment lines, decoded whatever the file's encoding."""
    texts = [data.decode("latin-1"), data.replace(b"\x00", b"").decode("latin-1")]
    for codec in ("utf-16", "utf-32"):
        with contextlib.suppress(UnicodeDecodeError):
            texts.append(data.decode(codec))
    for text in texts:
        found = _HEADER.findall(text)
        if found:
            headers = {name.strip(): value.strip() for name, value in found}
            break
    else:
        headers = {}
    if not any(k.lower() == "content-type" for k in headers):
        headers["Content-Type"] = "text/xml"  # what the upstream suite's server defaults to
    return headers


def json_feed_items(data: bytes) -> int:
    """The items of a JSON Feed, which feedparser 6.0 does not read (Radar reads it with its
    own parser on any feed method, core/parse/dispatch.py); 0 for any other body."""
    try:
        document = json.loads(data)
    except ValueError:
        return 0
    version = document.get("version") if isinstance(document, dict) else None
    if not isinstance(version, str) or not version.startswith("https://jsonfeed.org/version/"):
        return 0
    items = document.get("items")
    return len(items) if isinstance(items, list) else 0


def _known_class(error_class: str | None) -> bool:
    return error_class in FETCH_ERROR_CLASSES


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_hostile_corpus_over_http(
    radar_env: dict[str, Path], feed_server: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = corpus_files()
    assert len(files) > 600
    if not FULL:
        files = sorted(seeded("corpus").sample(files, BATCH))
    vault = radar_env["vault"]
    expected: dict[str, int] = {}
    names: dict[str, str] = {}
    for n, path in enumerate(files):
        data = path.read_bytes()
        headers = {k: v for k, v in declared_headers(data).items() if k.lower() != "content-length"}
        sid = f"fp-{n:04d}"
        names[sid] = str(path.relative_to(CORPUS_FEEDPARSER))
        url = feed_server.add(f"/fp/{n:04d}/{path.name}", data, headers=headers)
        lowered = {k.lower(): v for k, v in headers.items()}
        lowered.setdefault("content-location", url)
        parsed = feedparser.parse(io.BytesIO(data), response_headers=lowered)
        expected[sid] = len(parsed.get("entries", [])) or json_feed_items(data)
    sids = sorted(expected)
    collector = Collector(Settings.from_env())
    outcomes: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    items: Counter[str] = Counter()
    violations: list[str] = []
    for start in range(0, len(sids), BATCH):
        batch = sids[start : start + BATCH]
        for sid in batch:
            n = int(sid[3:])
            write_source(vault, sid, feed_server.url(f"/fp/{n:04d}/{files[n].name}"))
        spec = CollectionSpec(new_collection_id(), "explicit", datetime.now(UTC), tuple(batch))
        report = collect_stages(
            collector, spec
        ).json_object()  # a crash here is the failure this test exists for
        rows = db_rows(
            radar_env["db"],
            "SELECT outcome, signal_id, reason, source_id FROM item_observations "
            f"WHERE collection_id = '{spec.collection_id}'",
        )
        obs = Counter(str(r[3]) for r in rows)
        for row in rows:
            outcome, signal_id, reason, sid = row
            items[str(outcome)] += 1
            if outcome in ("rejected", "outside-window"):
                if not reason:
                    violations.append(f"{names[sid]}: rejection without a reason")
            elif outcome == "deferred":
                continue  # decided by a later check; it has no Signal yet
            elif not signal_id:
                violations.append(f"{names[sid]}: {outcome} item without a Signal")
        for src in report["sources"]:
            sid, outcome = src["id"], src["outcome"]
            outcomes[outcome] += 1
            if outcome == "failed":
                failures[str(src["errorClass"])] += 1
                if not _known_class(src["errorClass"]) or not src["error"]:
                    violations.append(f"{names[sid]}: failure not classed: {src}")
            elif outcome == "passed" and obs[sid] != expected[sid]:
                violations.append(
                    f"{names[sid]}: feedparser sees {expected[sid]} entries, "
                    f"{obs[sid]} were accounted for"
                )
            elif outcome not in ("passed", "not-modified"):
                violations.append(f"{names[sid]}: outcome {outcome} ({src['error']})")
    signals = sorted((vault / SIGNALS_DIR).glob("*.md"))
    for path in signals:
        try:
            read_signal_frontmatter(path)
        except Exception as exc:  # the judge reports, it does not crash
            violations.append(f"{path.name} does not parse back: {exc}")
    record_figures(
        "hostile-corpus",
        {
            "files": len(files),
            "outcomes": dict(outcomes),
            "failure_classes": dict(failures),
            "items": dict(items),
            "signals": len(signals),
            "violations": violations,
        },
    )
    assert not violations, "\n".join(violations[:40])
