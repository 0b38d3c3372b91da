"""A Source's `include` / `exclude` rules: what a person keeps or drops of its items.

A rule is a case-insensitive word or phrase (matched on word boundaries: `ai` does not match
"maintain"), or `/regex/`. Rules are matched against an item's title, summary and categories,
each field on its own. With `include`, an item is kept only if one of its rules matches; an item
matching an `exclude` rule is dropped. A dropped item is counted `filtered` with the rule that
dropped it (docs/architecture.md, invariant 16), never silently.

Feed text is hostile input and a regex runs on it in every check, so `/regex/` rules run on
RE2 (google-re2): an automaton whose matching time is linear in the text, whatever the
pattern. A classic catastrophic pattern such as `(a+)+$` costs the same as `a+$` there. RE2
refuses what would need backtracking (backreferences, lookaround); such a rule, an empty one,
one longer than MAX_RULE_CHARS or a list longer than MAX_RULES is a registry issue naming the
file, and the Source is not active until it is fixed. The registry compiles every rule and
runs it once over HOSTILE_PROBE, so the bound is checked where the rule is accepted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import re2

MAX_RULES = 50  # per list: a filter is a few words, not a program
MAX_RULE_CHARS = 200
# Rules run on RE2 with this memory bound for the compiled program (RE2 refuses bigger ones).
RE2_MAX_MEM = 1 << 20
# What every `/regex/` rule is run over once at registry load: the kind of text that makes a
# backtracking engine take exponential time on nested quantifiers (`(a+)+$`, `(x+x+)+y`).
HOSTILE_PROBE = "a" * 20_000 + "!" + "x" * 20_000
FILTER_KEYS = ("include", "exclude")

RuleList = Literal["include", "exclude"]


def _re2_options() -> Any:
    options = re2.Options()
    options.case_sensitive = False
    options.max_mem = RE2_MAX_MEM
    options.log_errors = False  # a bad rule is a registry issue, not a line on stderr
    return options


@dataclass(frozen=True)
class Rule:
    """One rule as written, with its compiled matcher (a phrase becomes an escaped pattern)."""

    text: str
    matcher: Any  # re2._Regexp: `search(text)` in time linear in the text

    def matches(self, value: str) -> bool:
        return bool(value) and self.matcher.search(value) is not None


def compile_rule(text: str) -> Rule:
    """The Rule for `text`; ValueError says what is wrong with it."""
    if not isinstance(text, str):
        raise ValueError("must be text (a word, a phrase or /regex/)")
    rule = text.strip()
    if not rule:
        raise ValueError("is empty")
    if len(rule) > MAX_RULE_CHARS:
        raise ValueError(f"is longer than {MAX_RULE_CHARS} characters")
    if len(rule) >= 2 and rule.startswith("/") and rule.endswith("/"):
        pattern = rule[1:-1]
        if not pattern:
            raise ValueError("is an empty /regex/")
    else:
        # Words on word boundaries, any run of spaces between them; lookaround (which RE2 has
        # not) is not needed: `\b` fails beside a non-word end such as `C++`, so the edges are
        # "start, end or a non-word character".
        words = r"\s+".join(re2.escape(w) for w in rule.split())
        pattern = rf"(?:^|\W){words}(?:\W|$)"
    try:
        matcher = re2.compile(pattern, _re2_options())
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ValueError(f"is not a regex RE2 can run ({reason})") from exc
    compiled = Rule(rule, matcher)
    compiled.matches(HOSTILE_PROBE)  # linear by construction; run once so a bug shows here
    return compiled


def compile_rules(values: Any) -> tuple[Rule, ...]:
    """Every rule of one list; ValueError names the first bad one."""
    if values is None:
        return ()
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list):
        raise ValueError("must be a list of rules (words, phrases or /regex/)")
    if len(values) > MAX_RULES:
        raise ValueError(f"holds {len(values)} rules; at most {MAX_RULES}")
    rules: list[Rule] = []
    for value in values:
        try:
            rules.append(compile_rule(value))
        except ValueError as exc:
            raise ValueError(f"rule {_shown(value)} {exc}") from exc
    return tuple(rules)


def filter_issues(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(code, message) for each `include` / `exclude` key that cannot be compiled."""
    problems: list[tuple[str, str]] = []
    for key in FILTER_KEYS:
        try:
            compile_rules(data.get(key))
        except ValueError as exc:
            problems.append(
                (
                    "invalid-filter",
                    f"`{key}` {exc}: use a list of words, phrases or /regex/ (RE2 syntax: no "
                    "backreferences or lookaround)",
                )
            )
    return problems


@dataclass(frozen=True)
class ItemFilter:
    """A Source's compiled rules; `verdict` says which rule drops an item, or None."""

    include: tuple[Rule, ...] = ()
    exclude: tuple[Rule, ...] = ()

    @classmethod
    def of(cls, include: Iterable[str], exclude: Iterable[str]) -> ItemFilter:
        """The filter of rules the registry already accepted."""
        return cls(compile_rules(list(include)), compile_rules(list(exclude)))

    @property
    def active(self) -> bool:
        return bool(self.include or self.exclude)

    def verdict(self, fields: Iterable[str]) -> str | None:
        """Why an item with these texts (title, summary, categories) is dropped: the
        `exclude` rule it matches, or that no `include` rule matched; None keeps it."""
        texts = [t for t in fields if t]
        for rule in self.exclude:
            if any(rule.matches(t) for t in texts):
                return f"exclude: {rule.text}"
        if self.include and not any(r.matches(t) for r in self.include for t in texts):
            return "include: no rule matched"
        return None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
