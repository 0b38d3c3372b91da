"""Is this answer a bot challenge rather than the content? One rule for feeds and pages.

A challenge page (Cloudflare's "Just a moment...", its `cf-chl` scripts, a captcha wall) means
the publisher does not want this client here now: the fetch stage classes it `challenge`, and
page extraction stops for the Source (docs/operations.md, "Page extraction").
"""

from __future__ import annotations

# Any of these in a 403/429/503 body marks a challenge.
CHALLENGE_MARKERS = (b"just a moment...", b"cf-chl", b"challenge-platform", b"captcha")
# A 2xx body is an article that may well mention captchas or Cloudflare's challenges: only
# the interstitial's own title and script machinery count there.
INTERSTITIAL_MARKERS = (
    b"<title>just a moment...</title>",
    b"/cdn-cgi/challenge-platform/",
    b"window._cf_chl_opt",
)
CHALLENGE_STATUSES = frozenset({403, 429, 503})


def is_challenge(status: int, cf_mitigated: str | None, head: bytes) -> bool:
    """True when the answer (its status, `cf-mitigated` header and the head of its body) is a
    challenge page. The header decides at any status; otherwise a 403/429/503 with any known
    marker, or a 2xx with a marker only an interstitial carries."""
    if (cf_mitigated or "").strip().lower() == "challenge":
        return True
    lowered = head.lower()
    if status in CHALLENGE_STATUSES:
        return any(marker in lowered for marker in CHALLENGE_MARKERS)
    if 200 <= status < 300:
        return any(marker in lowered for marker in INTERSTITIAL_MARKERS)
    return False
