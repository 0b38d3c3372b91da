"""Identity and secondary keys of a feed item: canonical URL, identity hash, title/content keys.

Identity = hash(source id, canonical URL, source item id); the title is never part of it, so a
title fix, a tracking parameter or an http/https flip does not make a new Signal.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from urllib.parse import SplitResult, unquote_plus, urljoin, urlsplit, urlunsplit

from url_normalize import url_normalize

from radar_pipeline.core.errors import VaultError

IDENTITY_VERSION: int = 1  # bump when any rule below changes (old identities stay as they are)

TRACKING_PARAMS: frozenset[str] = frozenset(
    {
        "fbclid",
        "gclid",
        "gclsrc",
        "dclid",
        "gbraid",
        "wbraid",
        "msclkid",
        "mc_cid",
        "mc_eid",
        "ref_src",
        "_hsenc",
        "_hsmi",
        "__hssc",
        "__hstc",
        "__hsfp",
        "hsctatracking",
        "igshid",
        "yclid",
        "twclid",
        "ttclid",
        "li_fat_id",
        "mkt_tok",
        "oly_anon_id",
        "oly_enc_id",
        "vero_id",
        "_ga",
        "_gl",
        "spm",
    }
)
TRACKING_PREFIXES: tuple[str, ...] = ("utm_",)

_HTTP_SCHEMES = frozenset({"http", "https"})
# After http folds into https, both schemes' default ports mean "no port".
_DEFAULT_PORTS = frozenset({"80", "443"})
_WORD = re.compile(r"\w+")
_NON_WORD = re.compile(r"[\W_]+")


def canonicalize_url(url: str, base: str | None = None) -> str:
    """Return the canonical form of `url` (resolved against `base`) used as identity input.

    Scheme and host lower-cased, http folded into https, default ports, fragment, credentials
    and tracking parameters dropped, other parameters kept in order, empty path "/", dot
    segments resolved and percent-encoding normalised. Raises ValueError unless the result is an
    absolute http(s) URL with a host.
    """
    raw = url.strip()
    if base:
        raw = urljoin(base.strip(), raw)
    parts = urlsplit(raw)
    if parts.scheme.lower() not in _HTTP_SCHEMES or not parts.hostname:
        raise ValueError(f"not an absolute http(s) URL: {url[:200]!r}")
    try:
        normalized = url_normalize(raw)
    except Exception as exc:  # the library raises assorted errors on odd hosts/ports
        raise ValueError(f"cannot normalise URL {url[:200]!r}: {exc}") from exc
    if not normalized:
        raise ValueError(f"empty URL: {url[:200]!r}")
    return _fold(urlsplit(normalized), url)


def _fold(parts: SplitResult, original: str) -> str:
    """Apply the Radar's own rules on top of generic normalisation."""
    host_port = parts.netloc.rpartition("@")[2]  # credentials never become identity (or appear)
    host, _, port = _split_port(host_port)
    if not host:
        raise ValueError(f"URL has no host: {original[:200]!r}")
    netloc = host if port in _DEFAULT_PORTS or not port else f"{host}:{port}"
    return urlunsplit(
        ("https", netloc.lower(), parts.path or "/", _strip_tracking(parts.query), "")
    )


def _split_port(host_port: str) -> tuple[str, str, str]:
    if host_port.startswith("["):  # IPv6 literal
        host, _, rest = host_port.partition("]")
        return host + "]", ":", rest.removeprefix(":")
    return host_port.partition(":")


def _strip_tracking(query: str) -> str:
    kept = [p for p in query.split("&") if p and not _is_tracking(p.partition("=")[0])]
    return "&".join(kept)


def _is_tracking(key: str) -> bool:
    name = unquote_plus(key).strip().lower()
    return name in TRACKING_PARAMS or name.startswith(TRACKING_PREFIXES)


def identity_hash(
    source_id: str,
    canonical_url: str,
    source_item_id: str,
    *,
    canonicalize: Callable[[str], str] = canonicalize_url,
) -> str:
    """Return the 16-hex identity of an item: sha256 over versioned, separated inputs.

    A source item id that is itself an http(s) URL (RSS guid = link) enters in canonical form,
    so tracking parameters or an http/https flip in the guid do not change the identity either;
    its fragment is kept, because publishers tell changelog entries apart by it.
    `canonicalize`: `canonicalize_url` or a cache of it (the same results, the same ValueError).
    """
    item_key = _item_key(source_item_id.strip(), canonicalize)
    payload = "\x1f".join(
        (f"radar-identity-v{IDENTITY_VERSION}", source_id, canonical_url, item_key)
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


def _item_key(source_item_id: str, canonicalize: Callable[[str], str]) -> str:
    before, hash_sign, fragment = source_item_id.partition("#")
    try:
        return canonicalize(before) + hash_sign + fragment
    except ValueError:
        return source_item_id  # not a URL (Atom tag:/urn: ids, opaque guids): used as given


def distinguishing_fragment(link: str, source_item_id: str) -> str:
    """The fragment that tells an item apart from others on the same page: its link's, else
    that of an http(s) id (a link-standing RSS guid). The canonical URL drops it, so the
    secondary key "same canonical URL in the Source" compares it as well: two items whose links
    differ only by fragment are two items (docs/architecture.md, "Fragments")."""
    fragment = urlsplit(link.strip()).fragment
    if fragment:
        return fragment
    item_id = source_item_id.strip()
    if urlsplit(item_id).scheme.lower() in _HTTP_SCHEMES:
        return urlsplit(item_id).fragment
    return ""


def normalize_title(title: str) -> str:
    """Return the title key: NFKC, case-folded, punctuation/whitespace runs as one space."""
    folded = unicodedata.normalize("NFKC", title).casefold()
    return _NON_WORD.sub(" ", folded).strip()


def content_hash(text: str) -> str:
    """Return the sha256 hex of `text` after NFC normalisation and whitespace collapsing."""
    normalized = " ".join(unicodedata.normalize("NFC", text).split())
    return hashlib.sha256(normalized.encode("utf-8")).hexdigest()


# The fewest words a text needs before its content hash is evidence of a re-publication. Measured
# on radar_pipeline_tests/corpus (docs/architecture.md, "Substantive text"): every one of the 95
# items of the nine real feeds has at least 12 words (OpenAI's teasers 20-26, Google Cloud's
# 12-22), while boilerplate ("Read more…", "Continue reading →", a one-word summary) has 1-3;
# of the feedparser suite's 100 items, 76 have no text and 14 fewer than 10 words.
MIN_SUBSTANTIVE_WORDS = 10


def word_count(text: str) -> int:
    """The number of words of `text` after NFKC normalisation (what `MIN_SUBSTANTIVE_WORDS`
    counts)."""
    return len(_WORD.findall(unicodedata.normalize("NFKC", text)))


def is_substantive(text: str | None) -> bool:
    """Whether `text` is long enough for its content hash to prove a re-publication:
    `word_count(text) >= MIN_SUBSTANTIVE_WORDS`, counting only as far as that (a body of a few
    thousand words is decided by its first ten, not by finding every word)."""
    if not text:
        return False
    # NFKC never composes or reorders across an ASCII space, so a prefix cut before one holds
    # exactly the words the whole text starts with: enough of them answer without
    # normalising the rest; too few, and a longer prefix (at the end, the whole text) decides.
    size = _SUBSTANTIVE_PREFIX
    while True:
        cut = text.find(" ", size)
        prefix = text if cut < 0 else text[:cut]
        words = _WORD.finditer(unicodedata.normalize("NFKC", prefix))
        if sum(1 for _ in itertools.islice(words, MIN_SUBSTANTIVE_WORDS)) >= MIN_SUBSTANTIVE_WORDS:
            return True
        if cut < 0:
            return False
        size *= 4


_SUBSTANTIVE_PREFIX = 400  # characters: ten words of prose fit several times


def simhash64(text: str) -> int:
    """Return a 64-bit simhash over word bigram shingles of the normalised text (0 for no words).

    Bit b is set when the shingles whose blake2b-64 digest has bit b outweigh (by count) those
    that do not.
    """
    words = _WORD.findall(unicodedata.normalize("NFKC", text).casefold())
    if not words:
        return 0
    shingles = [" ".join(pair) for pair in itertools.pairwise(words)] or words
    total = len(shingles)
    if total >= 1 << (_LANE - 1):  # lanes could overflow (not reachable from a feed item)
        return _simhash_by_bit(Counter(shingles))
    # All 64 per-bit sums at once: each digest byte is spread into eight _LANE-bit lanes of one
    # big integer (table look-up), so one addition counts a shingle on every bit; a bit wins
    # when the shingles having it outweigh the others (2 x its sum > all shingles).
    tables = _SPREAD
    lanes = 0
    for shingle, count in Counter(shingles).items():
        digest = hashlib.blake2b(shingle.encode("utf-8"), digest_size=8).digest()
        spread = (
            tables[0][digest[7]]
            | tables[1][digest[6]]
            | tables[2][digest[5]]
            | tables[3][digest[4]]
            | tables[4][digest[3]]
            | tables[5][digest[2]]
            | tables[6][digest[1]]
            | tables[7][digest[0]]
        )
        lanes += spread * count
    mask = (1 << _LANE) - 1
    result = 0
    for bit in range(64):
        if 2 * (lanes >> (bit * _LANE) & mask) > total:
            result |= 1 << bit
    return result


def _simhash_by_bit(counts: Counter[str]) -> int:
    """The definition of `simhash64`, bit by bit (for inputs too large for the lanes)."""
    weights = [0] * 64
    for shingle, count in counts.items():
        digest = hashlib.blake2b(shingle.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "big")
        for bit in range(64):
            weights[bit] += count if value >> bit & 1 else -count
    return sum(1 << bit for bit in range(64) if weights[bit] > 0)


_LANE = 40  # bits per lane: a lane holds a count sum up to 2**39 without reaching the next


def _spread_tables() -> tuple[tuple[int, ...], ...]:
    """_SPREAD[k][byte]: the byte's 8 bits, as bits 8k..8k+7, each in its own lane (value 1)."""
    return tuple(
        tuple(
            sum(1 << ((8 * k + i) * _LANE) for i in range(8) if byte >> i & 1)
            for byte in range(256)
        )
        for k in range(8)
    )


_SPREAD = _spread_tables()


def hamming64(a: int, b: int) -> int:
    """Return the number of differing bits between two 64-bit simhashes."""
    return ((a ^ b) & 0xFFFFFFFFFFFFFFFF).bit_count()


def make_signal_id(first_seen_at: datetime, identity: str) -> str:
    """`<first observation, UTC, YYYYMMDDTHHMMSSZ>-<identity>`; the identity part is what counts."""
    if not re.fullmatch(r"[0-9a-f]{16}", identity):
        raise VaultError(f"identity {identity!r} is not 16 lowercase hex digits")
    return f"{first_seen_at.strftime('%Y%m%dT%H%M%SZ')}-{identity}"


def identity_of(signal_id: str) -> str:
    return signal_id.rsplit("-", 1)[-1]
