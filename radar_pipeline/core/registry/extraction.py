"""The registry's check of an html or json Source's selectors and paths.

Each problem is one issue with its own code, and a Source with any of them never becomes
active: a selector the parser could not run would fail every check of the Source, so it is
refused where a person reads the issue (`radar sources validate`), not at collection time.

    missing-selector  an html Source lacks itemSelector, titleSelector or linkSelector
    invalid-selector  a selector is not text, or not CSS that lxml/cssselect can run
    missing-path      a json Source lacks itemsPath, titlePath or linkPath
    invalid-path      a path is not text, or not a JMESPath expression (or calls no such function)
    misplaced-key     a selector on a Source that is not html, or a path on one that is not json
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from radar_pipeline.core.parse.spec import compile_path, compile_selector

HTML_KEYS = ("itemSelector", "titleSelector", "linkSelector", "dateSelector", "summarySelector")
HTML_REQUIRED = frozenset({"itemSelector", "titleSelector", "linkSelector"})
JSON_KEYS = ("itemsPath", "titlePath", "linkPath", "idPath", "datePath", "summaryPath")
JSON_REQUIRED = frozenset({"itemsPath", "titlePath", "linkPath"})
EXTRACTION_KEYS = frozenset(HTML_KEYS + JSON_KEYS)


def extraction_issues(data: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(code, message) of every problem with the selector and path keys of one frontmatter."""
    method = data.get("collectionMethod")
    issues: list[tuple[str, str]] = []
    for keys, owner in ((HTML_KEYS, "html"), (JSON_KEYS, "json")):
        if method == owner:
            continue
        for key in keys:
            if _present(data.get(key)):
                issues.append(
                    (
                        "misplaced-key",
                        f"`{key}` is only read for `collectionMethod: {owner}` (this Source is "
                        f"{method!r}): remove it or change collectionMethod",
                    )
                )
    if method == "html":
        issues += _check(data, HTML_KEYS, HTML_REQUIRED, "selector", compile_selector)
    elif method == "json":
        issues += _check(data, JSON_KEYS, JSON_REQUIRED, "path", compile_path)
    return issues


def _check(
    data: Mapping[str, Any],
    keys: tuple[str, ...],
    required: frozenset[str],
    noun: str,
    compile_one: Callable[[str], Any],
) -> list[tuple[str, str]]:
    example = "a CSS selector such as `article h2`" if noun == "selector" else "a JMESPath path"
    issues: list[tuple[str, str]] = []
    for key in keys:
        value = data.get(key)
        if not _present(value):
            if key in required:
                issues.append(
                    (f"missing-{noun}", f"`{key}` is missing: add `{key}:` with {example}")
                )
            continue
        if not isinstance(value, str):
            issues.append(
                (
                    f"invalid-{noun}",
                    f"`{key}` is {type(value).__name__}, not text: put the {noun} in quotes",
                )
            )
            continue
        try:
            compile_one(value)
        except ValueError as exc:
            issues.append((f"invalid-{noun}", f"`{key}` {value[:80]!r} {exc}: fix the {noun}"))
    return issues


def _present(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip())
