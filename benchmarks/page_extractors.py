"""Measure the two candidate main-text extractors (trafilatura, readability-lxml) on article
pages built from real feed bodies (radar_pipeline_tests/corpus/articles/, see its README).

Run: `.venv/bin/python benchmarks/page_extractors.py [--build]` (`--build` rewrites the pages
from the real feeds first). Needs both libraries installed; only the chosen one is pinned, so
install the other by hand for a re-measurement (docs/performance.md has the figures).
"""

from __future__ import annotations

import argparse
import html
import json
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import feedparser
import lxml.html

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "radar_pipeline_tests" / "corpus" / "real"
PAGES = ROOT / "radar_pipeline_tests" / "corpus" / "articles"
PICKS = {"cloudflare-1.xml": 4, "go-blog-1.xml": 2, "rust-blog-1.xml": 3, "research-rsc-1.xml": 3}
# Phrases of the page chrome: an extractor that keeps any of them kept boilerplate.
CHROME = (
    "Subscribe to our newsletter for weekly product updates",
    "We use cookies to personalise content and analyse our traffic",
    "Accept all cookies",
    "Related posts you might enjoy reading next",
    "Copyright 2024 Example Publisher Inc. All rights reserved",
    "Careers Press Privacy Terms Trademark",
    "Products Solutions Developers Pricing Sign in",
    "Share this post on social media",
)
TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title} | Example Blog</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<script>window.dataLayer = window.dataLayer || [];
function gtag(){{dataLayer.push(arguments);}}</script>
<link rel="stylesheet" href="/assets/site.css"></head>
<body>
<div id="cookie-banner" class="cookie-consent"><p>{c1}.</p><button>{c2}</button></div>
<header class="site-header"><a href="/" class="logo">Example Blog</a>
<nav class="main-nav"><ul><li><a href="/products">Products</a></li>
<li><a href="/solutions">Solutions</a></li><li><a href="/developers">Developers</a></li>
<li><a href="/pricing">Pricing</a></li><li><a href="/login">Sign in</a></li></ul></nav>
<p class="visually-hidden">{c6}</p></header>
<main><article class="post">
<h1 class="post-title">{title}</h1>
<div class="post-meta"><span class="author">Example Author</span> <time>{date}</time></div>
<div class="post-content">{body}</div>
<div class="share"><p>{c7}</p><a href="https://twitter.com/share">Twitter</a> <a href="https://www.linkedin.com/share">LinkedIn</a></div>
</article>
<aside class="related"><h2>{c4}</h2><ul>
<li><a href="/blog/a">How we rebuilt our edge network in a weekend</a></li>
<li><a href="/blog/b">Five lessons from a year of incident reviews</a></li>
<li><a href="/blog/c">Announcing the developer week schedule</a></li></ul></aside>
<section class="newsletter"><h3>{c0}</h3>
<form><input type="email" placeholder="you@example.com"><button>Subscribe</button></form></section>
</main>
<footer class="site-footer"><p>{c5}.</p><p>{c3}</p></footer>
</body></html>
"""


def build() -> None:
    """Each picked feed item's full body wrapped in realistic page chrome; the article text
    (the body's text) beside it as the expected extraction."""
    for name, count in PICKS.items():
        parsed = feedparser.parse((REAL / name).read_bytes())
        for n, entry in enumerate(parsed.entries[:count]):
            content = entry.get("content") or []
            body = content[0].value if content else entry.get("summary", "")
            stem = f"{name.removesuffix('.xml')}-{n}"
            chrome = {f"c{i}": html.escape(p) for i, p in enumerate(CHROME)}
            page = TEMPLATE.format(
                title=html.escape(entry.title), date=entry.get("published", ""), body=body, **chrome
            )
            (PAGES / f"{stem}.html").write_text(page, encoding="utf-8")
            text = lxml.html.fromstring(f"<div>{body}</div>").text_content()
            (PAGES / f"{stem}.txt").write_text(text, encoding="utf-8")


def _words(text: str) -> Counter[str]:
    return Counter(re.findall(r"\w+", text.lower()))


def _trafilatura(page: str) -> str:
    import trafilatura

    return trafilatura.extract(page, include_comments=False, favor_recall=True) or ""


def _readability(page: str) -> str:
    from readability import Document

    summary = Document(page).summary(html_partial=True)
    return str(lxml.html.fromstring(summary).text_content())


def measure(extract: Callable[[str], str]) -> dict[str, float]:
    recalls, kept, times = [], 0, []
    for page_path in sorted(PAGES.glob("*.html")):
        page = page_path.read_text(encoding="utf-8")
        expected = _words(page_path.with_suffix(".txt").read_text(encoding="utf-8"))
        started = time.perf_counter()
        out = extract(page)
        times.append((time.perf_counter() - started) * 1000)
        got = _words(out)
        recalls.append(sum((expected & got).values()) / max(1, sum(expected.values())))
        flat = " ".join(out.split()).lower()
        kept += sum(1 for phrase in CHROME if phrase.lower() in flat)
    return {
        "pages": len(recalls),
        "recall_median": round(statistics.median(recalls), 4),
        "recall_min": round(min(recalls), 4),
        "chrome_phrases_kept": kept,
        "ms_median": round(statistics.median(times), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--build", action="store_true")
    if parser.parse_args().build:
        build()
    for name, fn in (("trafilatura", _trafilatura), ("readability-lxml", _readability)):
        try:
            fn(PAGES.joinpath("go-blog-1-0.html").read_text(encoding="utf-8"))  # warm imports
        except ImportError as exc:
            print(name, f"not installed ({exc.name}); install it to measure it")
            continue
        print(name, json.dumps(measure(fn)))


if __name__ == "__main__":
    main()
