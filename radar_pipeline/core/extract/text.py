"""Main-text extraction behind one function, so the library can change without the page pass.

trafilatura was measured against readability-lxml on pages built from real articles
(docs/performance.md, "Page extraction"): the same recall, no page chrome kept, faster, and
its pins agree with the rest of the lock; readability-lxml pins cssselect below 1.4.
"""

from __future__ import annotations

from importlib.metadata import version

import trafilatura

EXTRACTOR = f"trafilatura {version('trafilatura')}"


def extract_main_text(html: bytes, url: str) -> str | None:
    """The article's main text as plain paragraphs, or None when the page holds none.

    No comments, and no date or metadata guessed: only the text the page shows as its article
    (the Signal keeps the feed's own date; `publishedAt` needs first-party evidence).
    """
    text = trafilatura.extract(
        html,
        url=url,
        include_comments=False,
        include_tables=True,
        favor_recall=True,
        with_metadata=False,
        deduplicate=False,
    )
    if not isinstance(text, str) or not text.strip():
        return None
    return text.strip()
