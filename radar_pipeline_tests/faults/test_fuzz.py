"""Property fuzzing (hypothesis) of the parse and identity stages and the frontmatter loader.

No unhandled exception (only the documented ParseError / ValueError / RegistryError), and no
Signal that fails to parse back: every candidate the parser yields is rendered as the real
Signal document and read back with the real reader, field for field (docs/architecture.md,
invariant 12).
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from radar_pipeline.core.collect.results import CheckResult
from radar_pipeline.core.collect.signal_files import build_document
from radar_pipeline.core.errors import ParseError, RegistryError
from radar_pipeline.core.frontmatter import split_frontmatter, update_frontmatter_keys
from radar_pipeline.core.identity.keys import canonicalize_url, identity_hash, make_signal_id
from radar_pipeline.core.models import FetchResult
from radar_pipeline.core.parse.feed import parse_feed
from radar_pipeline.core.plan.collection import SourcePlan
from radar_pipeline.core.registry.sources import SourceRecord, load_registry
from radar_pipeline.core.text import inert_property
from radar_pipeline.core.vault.signals import read_signal_frontmatter
from radar_pipeline_tests.conftest import CORPUS_REAL
from radar_pipeline_tests.faults.farm import record_figures, trials
from radar_pipeline_tests.vaultkit import source_text, write_source

NOW = datetime(2025, 3, 3, 12, 0, tzinfo=UTC)
EXAMPLES = trials(40, 3000)
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
COUNTS: Counter[str] = Counter()

# Text that hurts: markup, YAML and Markdown syntax, controls, bidi, surrogate-free astral.
NASTY = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("<>&'\"]]>---:#|*![]()\\\n\r\t \u2028\u2029\u202e\ufeff\x00\x0b")),
        st.characters(codec="utf-8"),
    ),
    max_size=60,
)
URLISH = st.one_of(
    NASTY,
    st.builds(
        lambda scheme, host, path, query: f"{scheme}://{host}/{path}?{query}",
        st.sampled_from(["http", "https", "HTTP", "ftp", "javascript", ""]),
        st.one_of(
            st.sampled_from(["example.com", "EXAMPLE.com:443", "[::1]:80", "xn--bcher-kva.de"]),
            NASTY,
        ),
        NASTY,
        st.one_of(st.just("utm_source=x&a=1"), NASTY),
    ),
)


@pytest.fixture(scope="module", autouse=True)
def _figures() -> Iterator[None]:
    yield
    record_figures("fuzz", {"examples": dict(COUNTS)})


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> SourceRecord:
    vault = tmp_path_factory.mktemp("fuzzvault")
    write_source(vault, "fuzz-src", "https://example.com/feed.xml", fullText="feed-content")
    snapshot = load_registry(vault)
    assert snapshot.sources
    return snapshot.sources[0]


def _field(tag: str, value: str, mode: str) -> str:
    if mode == "cdata":
        return f"<{tag}><![CDATA[{value}]]></{tag}>"
    if mode == "raw":
        return f"<{tag}>{value}</{tag}>"
    return f"<{tag}>{escape(value)}</{tag}>"


ITEM = st.fixed_dictionaries(
    {
        "title": NASTY,
        "link": URLISH,
        "guid": st.one_of(NASTY, URLISH),
        "description": NASTY,
        "pubDate": st.one_of(
            NASTY, st.sampled_from(["Mon, 03 Mar 2025 10:00:00 +0000", "2025-03-03T10:00:00Z"])
        ),
        "mode": st.sampled_from(["escaped", "escaped", "cdata", "raw"]),
    }
)


def _feed(items: list[dict[str, str]], atom: bool) -> bytes:
    if atom:
        entries = "".join(
            "<entry>"
            + _field("title", i["title"], i["mode"])
            + f'<link href="{escape(i["link"], {chr(34): "&quot;"})}"/>'
            + _field("id", i["guid"], i["mode"])
            + _field("updated", i["pubDate"], i["mode"])
            + _field("summary", i["description"], i["mode"])
            + "</entry>"
            for i in items
        )
        doc = f'<feed xmlns="http://www.w3.org/2005/Atom"><title>f</title>{entries}</feed>'
    else:
        entries = "".join(
            "<item>"
            + "".join(_field(k, i[k], i["mode"]) for k in ("title", "link", "guid", "pubDate"))
            + _field("description", i["description"], i["mode"])
            + "</item>"
            for i in items
        )
        doc = f'<rss version="2.0"><channel><title>f</title>{entries}</channel></rss>'
    return ('<?xml version="1.0" encoding="utf-8"?>' + doc).encode("utf-8", "surrogatepass")


def _roundtrip(record: SourceRecord, body: bytes, folder: Path) -> None:
    """parse_feed, then render every candidate as its Signal and read it back."""
    try:
        parsed = parse_feed(
            "fuzz-src",
            body,
            base_url="https://example.com/feed.xml",
            content_type="application/xml",
            now=NOW,
            window_from=None,
        )
    except ParseError:
        COUNTS["parse-error"] += 1
        return
    fetch = FetchResult(
        "fuzz-src", "https://example.com/feed.xml", "https://example.com/feed.xml", "ok", NOW, 200
    )
    check = SourcePlan("fuzz-src", record, None)
    result = CheckResult(check, fetch, parsed)
    for cand in parsed.candidates:
        COUNTS["signals-read-back"] += 1
        signal_id = make_signal_id(NOW, cand.identity)
        doc = build_document(signal_id, cand, result, record.record_path, None)
        path = folder / f"{signal_id}.md"
        path.write_text(doc.render(), encoding="utf-8")
        fm = read_signal_frontmatter(path)
        for key in ("id", "title", "sourceItemId", "itemUrl", "canonicalUrl", "contentHash"):
            # What was written is the inert form of the value (no line breaks, no live syntax).
            written = inert_property(doc.frontmatter[key])
            assert fm[key] == written, (key, fm[key], written)
        assert re.fullmatch(r"[0-9a-f]{16}", cand.identity)


@pytest.mark.slow
@FUZZ
@given(items=st.lists(ITEM, max_size=4), atom=st.booleans())
# Found by this test: PyYAML wrote U+0085 raw in a quoted scalar and read it back as a space.
@example(
    items=[dict(title="", link="HTTP://0\x85?", guid="", description="", pubDate="", mode="")],
    atom=True,
)
def test_fuzz_feed_items_become_signals_that_read_back(
    record: SourceRecord, items: list[dict[str, str]], atom: bool
) -> None:
    COUNTS["feeds"] += 1
    with tempfile.TemporaryDirectory() as folder:
        _roundtrip(record, _feed(items, atom), Path(folder))


REAL_FEEDS = sorted(CORPUS_REAL.glob("*.xml"))[:8]


@FUZZ
@given(
    feed=st.sampled_from(REAL_FEEDS),
    edits=st.lists(
        st.tuples(st.floats(0, 1), st.sampled_from(["flip", "cut", "insert", "drop"]), NASTY),
        max_size=6,
    ),
)
def test_fuzz_mutated_real_feeds(
    record: SourceRecord, feed: Path, edits: list[tuple[float, str, str]]
) -> None:
    COUNTS["mutated-feeds"] += 1
    body = bytearray(feed.read_bytes()[:60_000])
    for where, kind, text in edits:
        at = int(where * max(len(body) - 1, 0))
        if kind == "flip" and body:
            body[at] ^= 0xFF
        elif kind == "cut":
            del body[at:]
        elif kind == "insert":
            body[at:at] = text.encode("utf-8", "surrogatepass")
        else:
            del body[at : at + 64]
    with tempfile.TemporaryDirectory() as folder:
        _roundtrip(record, bytes(body), Path(folder))


def test_undecodable_encoding_name_is_a_parse_error() -> None:
    """Found by test_fuzz_mutated_real_feeds: feedparser raised UnicodeDecodeError."""
    body = b'<?xml version="1.0" encoding="utf\xff-8"?><rss version="2.0"><channel/></rss>'
    with pytest.raises(ParseError) as caught:
        parse_feed(
            "s", body, base_url="https://e.com/", content_type=None, now=NOW, window_from=None
        )
    assert caught.value.error_class == "invalid-xml"


@FUZZ
@given(url=URLISH, base=st.one_of(st.none(), URLISH), item=st.one_of(NASTY, URLISH))
def test_fuzz_canonical_url_and_identity(url: str, base: str | None, item: str) -> None:
    COUNTS["urls"] += 1
    try:
        canonical = canonicalize_url(url, base)
    except ValueError:
        COUNTS["urls-refused"] += 1
        return
    assert canonical.startswith("https://")
    assert canonicalize_url(canonical) == canonical, "canonical form is not a fixed point"
    assert re.fullmatch(r"[0-9a-f]{16}", identity_hash("src", canonical, item))


SOURCE_KEYS = [
    "entityType",
    "id",
    "name",
    "url",
    "enabled",
    "cadence",
    "legalAssessment",
    "collectionMethod",
    "fullText",
    "minIntervalSeconds",
    "etag",
]


@FUZZ
@given(
    files=st.lists(
        st.one_of(
            NASTY,
            st.dictionaries(st.sampled_from(SOURCE_KEYS), st.one_of(NASTY, st.integers())),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_fuzz_registry_never_raises(files: list[str | dict[str, object]]) -> None:
    COUNTS["registries"] += 1
    with tempfile.TemporaryDirectory() as root:
        vault = Path(root)
        folder = vault / "Radar" / "Sources"
        folder.mkdir(parents=True)
        for n, spec in enumerate(files):
            if isinstance(spec, dict):
                fields: dict[str, object] = {"id": f"s{n}", "url": "https://example.com/f.xml"}
                fields.update(spec)
                text = "---\n" + "".join(f"{k}: {v}\n" for k, v in fields.items()) + "---\n"
            else:
                text = f"---\n{spec}\n---\nbody\n"
            (folder / f"s{n}.md").write_bytes(text.encode("utf-8", "surrogatepass"))
        snapshot = load_registry(vault)
        cited = {r.record_path for r in snapshot.sources} | {i.path for i in snapshot.issues}
        assert cited == {f"Radar/Sources/s{n}.md" for n in range(len(files))}


@FUZZ
@given(
    extra=st.dictionaries(st.sampled_from(["name", "notes", "etag"]), NASTY, max_size=2),
    updates=st.dictionaries(
        st.sampled_from(["etag", "lastModified", "errorState", "httpStatus", "newKey"]),
        st.one_of(st.none(), st.integers(0, 999), NASTY),
        min_size=1,
    ),
)
def test_fuzz_update_frontmatter_keys(
    extra: dict[str, str], updates: dict[str, str | int | None]
) -> None:
    COUNTS["frontmatter-updates"] += 1
    with tempfile.TemporaryDirectory() as root:
        path = Path(root) / "s.md"
        path.write_bytes(
            source_text("s", "https://example.com/f.xml", **extra).encode("utf-8", "surrogatepass")
        )
        before = path.read_bytes()
        try:
            old_fm, old_body = split_frontmatter(before.decode("utf-8"))
        except (RegistryError, UnicodeDecodeError):
            old_fm, old_body = None, None
        try:
            update_frontmatter_keys(path, updates)
        except RegistryError:
            COUNTS["frontmatter-refused"] += 1
            assert path.read_bytes() == before, "a refused update changed the file"
            return
        fm, body = split_frontmatter(path.read_text(encoding="utf-8"))
        assert old_fm is not None and body == old_body
        for key, value in updates.items():
            assert fm[key] == (None if value in (None, "") else value), key
        for key in old_fm.keys() - updates.keys():
            assert fm[key] == old_fm[key], key


def test_markup_that_breaks_feedparser_is_a_parse_error() -> None:
    """Found by test_fuzz_mutated_real_feeds: a stray `</height>` in ill-formed XML made
    feedparser's loose parser raise TypeError."""
    body = (
        b'<rss version="2.0"><channel><title>x</title></height><item><title>a & b</title>'
        b"<link>https://e.com/a</link></item></channel></rss>"
    )
    with pytest.raises(ParseError) as caught:
        parse_feed(
            "s", body, base_url="https://e.com/", content_type=None, now=NOW, window_from=None
        )
    assert caught.value.error_class == "invalid-xml"
    assert "TypeError" in caught.value.message
