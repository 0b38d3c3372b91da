"""What an html or json Source tells the parser to read: its selectors or paths, checked once.

The registry validates a Source's keys with the same compile functions the parsers use, so a
selector that would fail at parse time never reaches it: it is an issue, and the Source is not
active. The specs are frozen and picklable: a parse job carries one to a spawned worker.

CSS selectors go through cssselect (the library lxml.cssselect uses) to XPath; JSON paths are
JMESPath (jmespath.compile, plus a check that every function named exists, which JMESPath
itself only finds out when the expression runs).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import jmespath
from cssselect import HTMLTranslator, SelectorError
from jmespath.exceptions import JMESPathError
from jmespath.functions import Functions
from lxml import etree

MAX_EXPRESSION = 500  # a selector or path is a line, not a program


@dataclass(frozen=True)
class HtmlSpec:
    """An html Source's selectors: items on the page, then fields relative to each item."""

    item_selector: str
    title_selector: str
    link_selector: str
    date_selector: str | None = None
    summary_selector: str | None = None


@dataclass(frozen=True)
class JsonSpec:
    """A json Source's JMESPath expressions: the item list, then fields of each item."""

    items_path: str
    title_path: str
    link_path: str
    id_path: str | None = None
    date_path: str | None = None
    summary_path: str | None = None


ExtractionSpec = HtmlSpec | JsonSpec


def compile_selector(selector: str) -> etree.XPath:
    """The XPath that finds what the CSS `selector` matches (the element itself included, so a
    field selector may name the item). Raises ValueError saying what is wrong."""
    if len(selector) > MAX_EXPRESSION:
        raise ValueError(f"is longer than {MAX_EXPRESSION} characters")
    try:
        xpath = HTMLTranslator().css_to_xpath(selector)
    except SelectorError as exc:
        raise ValueError(f"is not a CSS selector lxml can run ({exc})") from exc
    try:
        return etree.XPath(xpath)
    except etree.XPathError as exc:  # pragma: no cover - cssselect emits valid XPath
        raise ValueError(f"does not translate to a usable XPath ({exc})") from exc


def compile_path(path: str) -> Any:
    """The compiled JMESPath expression (its `search` runs it). Raises ValueError saying what
    is wrong, including a function JMESPath does not have."""
    if len(path) > MAX_EXPRESSION:
        raise ValueError(f"is longer than {MAX_EXPRESSION} characters")
    try:
        compiled = jmespath.compile(path)
    except (JMESPathError, ValueError) as exc:
        raise ValueError(f"is not a JMESPath expression ({' '.join(str(exc).split())})") from exc
    known = set(Functions.FUNCTION_TABLE)
    for name in _function_names(compiled.parsed):
        if name not in known:
            raise ValueError(f"calls {name}(), which is not a JMESPath function")
    return compiled


def _function_names(node: Any) -> Iterator[str]:
    """Every function a parsed JMESPath AST calls."""
    if not isinstance(node, dict):
        return
    if node.get("type") == "function_expression":
        yield str(node.get("value"))
    for child in node.get("children", []):
        yield from _function_names(child)
