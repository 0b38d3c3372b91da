"""Canonical URLs, identity hashes and the secondary keys (title, content, simhash)."""

from __future__ import annotations

import hashlib
import itertools
import re
import unicodedata
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radar_pipeline.core.identity.keys import (
    IDENTITY_VERSION,
    TRACKING_PARAMS,
    canonicalize_url,
    content_hash,
    hamming64,
    identity_hash,
    normalize_title,
    simhash64,
)

CANON_TABLE = [
    # (url, base, expected)
    ("https://ex.com/a?utm_source=rss&utm_medium=feed", None, "https://ex.com/a"),
    ("https://ex.com/a?b=2&fbclid=X&a=1&gclid=Y", None, "https://ex.com/a?b=2&a=1"),
    ("https://ex.com/a?z=1&UTM_Campaign=x&m=2&y=3", None, "https://ex.com/a?z=1&m=2&y=3"),
    ("http://ex.com/a", None, "https://ex.com/a"),
    ("https://ex.com:443/a", None, "https://ex.com/a"),
    ("http://ex.com:80/a", None, "https://ex.com/a"),
    ("https://ex.com:8443/a", None, "https://ex.com:8443/a"),
    ("https://ex.com/a#section-2", None, "https://ex.com/a"),
    ("HTTPS://WWW.Ex.COM/Path/Case", None, "https://www.ex.com/Path/Case"),
    ("https://ex.com", None, "https://ex.com/"),
    ("https://ex.com?", None, "https://ex.com/"),
    ("https://ex.com/a/./b/../c", None, "https://ex.com/a/c"),
    ("https://ex.com/%7euser/a%2fb", None, "https://ex.com/~user/a%2Fb"),
    ("https://ex.com/caf\u00e9 x", None, "https://ex.com/caf%C3%A9%20x"),
    ("https://user:secret@ex.com/a", None, "https://ex.com/a"),
    ("/blog/post", "https://go.dev/blog/feed.atom", "https://go.dev/blog/post"),
    ("post", "https://blog.rust-lang.org/2024/", "https://blog.rust-lang.org/2024/post"),
    ("../x?q=1#f", "https://ex.com/a/b/c", "https://ex.com/a/x?q=1"),
    ("//cdn.ex.com/p", "http://ex.com/", "https://cdn.ex.com/p"),
    ("  https://ex.com/a  ", None, "https://ex.com/a"),
]


@pytest.mark.parametrize(("url", "base", "expected"), CANON_TABLE)
def test_canonicalize_url_table(url: str, base: str | None, expected: str) -> None:
    assert canonicalize_url(url, base) == expected


@pytest.mark.parametrize(
    "url",
    ["javascript:alert(1)", "mailto:a@ex.com", "ftp://ex.com/f", "/relative", "http://", "data:,x"],
)
def test_canonicalize_url_refuses_non_http(url: str) -> None:
    with pytest.raises(ValueError):
        canonicalize_url(url)


def test_tracking_params_cover_the_usual_suspects() -> None:
    for name in ("fbclid", "gclid", "dclid", "msclkid", "mc_cid", "mc_eid", "_hsenc", "igshid"):
        assert name in TRACKING_PARAMS
    assert canonicalize_url("https://ex.com/?utm_anything_new=1&q=2") == "https://ex.com/?q=2"


hosts = st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z]{2,5}){1,2}", fullmatch=True)
segments = st.lists(st.from_regex(r"[A-Za-z0-9._~%-]{0,8}", fullmatch=True), max_size=4)
params = st.lists(
    st.tuples(
        st.from_regex(r"[a-z][a-z0-9]{0,5}", fullmatch=True),
        st.from_regex(r"[A-Za-z0-9._~-]{0,6}", fullmatch=True),
    ),
    max_size=4,
)


@st.composite
def urls(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "HtTpS"]))
    port = draw(st.sampled_from(["", ":80", ":443", ":8080"]))
    path = "/".join(draw(segments))
    query = "&".join(f"{k}={v}" for k, v in draw(params))
    fragment = draw(st.sampled_from(["", "#top", "#a/b"]))
    return f"{scheme}://{draw(hosts)}{port}/{path}{'?' + query if query else ''}{fragment}"


@settings(max_examples=150, deadline=None)
@given(urls())
def test_canonicalize_is_idempotent(url: str) -> None:
    once = canonicalize_url(url)
    assert canonicalize_url(once) == once
    assert once.startswith("https://")


@settings(max_examples=100, deadline=None)
@given(
    urls(), st.lists(st.sampled_from(["utm_source", "utm_medium", "fbclid", "gclid"]), min_size=1)
)
def test_tracking_params_and_scheme_flip_never_change_canonical(url: str, extra: list[str]) -> None:
    base = url.partition("#")[0]
    joiner = "&" if "?" in base else "?"
    tracked = base + joiner + "&".join(f"{name}=x1" for name in extra)
    flipped = re.sub(r"^[hH][tT][tT][pP][sS]?", "http", url)
    assert canonicalize_url(tracked) == canonicalize_url(url)
    assert canonicalize_url(flipped) == canonicalize_url(url)
    assert canonicalize_url(flipped.replace("http://", "https://", 1)) == canonicalize_url(url)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40), urls(), st.text(max_size=60))
def test_identity_hash_is_stable_16_hex(source_id: str, url: str, item_id: str) -> None:
    canonical = canonicalize_url(url)
    first = identity_hash(source_id, canonical, item_id)
    assert re.fullmatch(r"[0-9a-f]{16}", first)
    assert identity_hash(source_id, canonical, item_id) == first


def test_identity_hash_known_value_and_inputs_matter() -> None:
    assert IDENTITY_VERSION == 1
    # Pinned: a change here changes every Signal id, so it must come with a version bump.
    assert identity_hash("openai-news", "https://openai.com/index/x", "tag:1") == "b68b0ac61c38dd38"
    base = identity_hash("a", "https://ex.com/", "1")
    assert identity_hash("b", "https://ex.com/", "1") != base
    assert identity_hash("a", "https://ex.com/x", "1") != base
    assert identity_hash("a", "https://ex.com/", "2") != base
    # The documented formula: sha256 over "radar-identity-v1", source, URL, item id, 0x1F-joined.
    payload = "\x1f".join(("radar-identity-v1", "a", "https://ex.com/", "1")).encode()
    assert base == hashlib.sha256(payload).hexdigest()[:16]
    # Field boundaries are separated: ("ab", "c") is not ("a", "bc").
    assert identity_hash("ab", "https://ex.com/", "c") != identity_hash(
        "a", "https://ex.com/", "bc"
    )


def test_identity_hash_folds_url_guids_but_keeps_their_fragment() -> None:
    url = "https://ex.com/post"
    same = identity_hash("s", url, "https://ex.com/post")
    assert identity_hash("s", url, "http://ex.com/post?utm_source=rss") == same
    assert identity_hash("s", url, "https://ex.com/post#v2") != same
    assert identity_hash("s", url, "urn:uuid:1") != identity_hash("s", url, "urn:uuid:2")


def test_normalize_title() -> None:
    assert normalize_title("  Hello,   WORLD!! ") == "hello world"
    assert normalize_title("Go 1.22 \u2014 what\u2019s new?") == "go 1 22 what s new"
    assert normalize_title("\ufb01le Stra\u00dfe") == "file strasse"  # NFKC + casefold
    assert normalize_title("Hello World") == normalize_title("hello-world")


def test_content_hash_is_whitespace_insensitive() -> None:
    a = content_hash("one two\nthree")
    assert a == content_hash("  one   two three \n")
    assert a != content_hash("one two three four")
    assert re.fullmatch(r"[0-9a-f]{64}", a)


def test_simhash_near_and_far() -> None:
    text = "Go 1.22 is released with range over integers and a new math rand v2 package today"
    near = text.replace("today", "this week")
    far = "Cloudflare explains how a BGP leak took down a region of its network for an hour"
    assert 0 <= simhash64(text) < 2**64
    assert simhash64(text) == simhash64(text)
    assert hamming64(simhash64(text), simhash64(near)) < hamming64(simhash64(text), simhash64(far))
    assert hamming64(simhash64(text), simhash64(near)) <= 12
    assert simhash64("") == 0
    assert hamming64(0, 2**64 - 1) == 64


def _simhash_reference(text: str) -> int:
    """simhash64 as first defined: a +count/-count weight per bit, one bit at a time."""
    words = re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold())
    if not words:
        return 0
    shingles = [" ".join(pair) for pair in itertools.pairwise(words)] or words
    weights = [0] * 64
    for shingle, count in Counter(shingles).items():
        digest = hashlib.blake2b(shingle.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "big")
        for bit in range(64):
            weights[bit] += count if value >> bit & 1 else -count
    return sum(1 << bit for bit in range(64) if weights[bit] > 0)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["go", "rust", "Go", "ﬁle", "ä", "1.22", "x_y", "-", " "]), max_size=60
    )
    | st.text(max_size=400)
)
def test_simhash_equals_its_bitwise_definition(parts: list[str] | str) -> None:
    # Stored Signals carry their simhash: a faster computation must give the same bits,
    # ties (equal weight both ways) included.
    text = parts if isinstance(parts, str) else " ".join(parts)
    assert simhash64(text) == _simhash_reference(text)
