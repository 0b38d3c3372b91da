"""Build temp vaults for tests: Source files written the way people write them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

SOURCE_DEFAULTS: dict[str, Any] = {
    "entityType": "source",
    "schemaVersion": 1,
    "role": "primary",
    "sourceType": "official",
    "authorityScore": 0.9,
    "legalAssessment": "approved",
    "priority": "normal",
    "collectionMethod": "rss",
    "enabled": "true",
    "cadence": "PT6H",
    "minIntervalSeconds": 0,
    "fullText": "none",
    "lastAttemptAt": "",
    "lastSuccessAt": "",
    "errorState": "",
    "blockedReason": "",
    "httpStatus": "",
    "etag": "",
    "lastModified": "",
    "lastResponseAt": "",
}


def source_text(source_id: str, url: str, **overrides: Any) -> str:
    fields = {
        "entityType": "source",
        "schemaVersion": 1,
        "id": source_id,
        "name": f"Test {source_id}",
        "url": url,
    }
    fields.update({k: v for k, v in SOURCE_DEFAULTS.items() if k not in fields})
    fields.update(overrides)
    lines = [f"{k}: {v}" if v != "" else f"{k}:" for k, v in fields.items() if v is not None]
    return "---\n" + "\n".join(lines) + f"\n---\n\n# {source_id}\n\nTest Source.\n"


def write_source(vault: Path, source_id: str, url: str, **overrides: Any) -> Path:
    folder = vault / "Radar" / "Sources"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{source_id}.md"
    path.write_text(source_text(source_id, url, **overrides), encoding="utf-8")
    return path


def write_fixture_source(vault: Path, source_id: str, feed: bytes, **overrides: Any) -> Path:
    rel = f"Radar/Fixtures/{source_id}.xml"
    (vault / "Radar" / "Fixtures").mkdir(parents=True, exist_ok=True)
    (vault / rel).write_bytes(feed)
    return write_source(
        vault,
        source_id,
        rel,
        sourceType="fixture",
        collectionMethod="fixture",
        cadence="manual",
        **overrides,
    )


def signal_files(vault: Path) -> list[Path]:
    folder = vault / "Radar" / "Signals"
    return sorted(folder.glob("*.md")) if folder.is_dir() else []


def rss(items: list[dict[str, str]], title: str = "Test feed") -> bytes:
    """A small RSS 2.0 document; each item dict may have title, link, guid, pubDate, description."""
    parts = []
    for item in items:
        fields = "".join(
            f"<{k}>{v}</{k}>"
            for k, v in item.items()
            if k in ("title", "link", "pubDate", "description")
        )
        guid = f'<guid isPermaLink="false">{item["guid"]}</guid>' if "guid" in item else ""
        parts.append(f"<item>{fields}{guid}</item>")
    return (
        '<?xml version="1.0" encoding="UTF-8"?><rss version="2.0"><channel>'
        f"<title>{title}</title><link>https://example.com/</link><description>t</description>"
        + "".join(parts)
        + "</channel></rss>"
    ).encode()
