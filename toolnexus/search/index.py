"""Ranking tools for a query: BM25F over names, descriptions and parameters, and a regex mode.

Why BM25F rather than plain BM25 over one text: a word in a tool's *name* says far more about
what the tool does than the same word deep in a long description, and GitHub-sized tool sets
have descriptions of very different lengths. Each field gets its own weight and its own length
normalisation (Robertson and Zaragoza's BM25F). Names are split into words first (`getRepo`,
`repos_list-for_org`, `repos/get` all become words), and words are reduced to a light stem
(plurals, `-ing`, `-ed`) so that "starring repositories" finds `star-repo...`. The benchmark
(`benchmarks/tool_search.py`) measures this against plain BM25 on the same queries.

The index is built once per set of tools (a generation's deferred tools) and is read-only
afterwards, so concurrent searches need no lock.
"""

from __future__ import annotations

import functools
import heapq
import importlib
import math
import re
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..base import Tool
from ..errors import ConfigError

__all__ = [
    "FIELD_WEIGHTS",
    "MAX_PATTERN",
    "SearchIndex",
    "check_pattern",
    "short_description",
    "stem",
    "words",
]

FIELD_WEIGHTS: Mapping[str, float] = {
    "name": 3.0,
    "summary": 2.0,
    "description": 0.5,
    "parameters": 0.3,
}
"""How much a word found in each field counts, relative to the description. `summary` is the
description's first sentence (an OpenAPI operation's `summary`), which says what the tool does;
the rest is often boilerplate shared by many tools."""

SYNONYM_WEIGHT = 0.5
"""How much a query word's synonym counts, relative to the word itself."""

_CANONICAL = {
    "repository": "repo",
    "organization": "org",
    "organisation": "org",
    "configuration": "config",
    "information": "info",
    "directory": "dir",
    "environment": "env",
    "application": "app",
    "authenticat": "auth",
    "authentication": "auth",
    "authorization": "auth",
}
"""Long words and the abbreviations API names use for them, both indexed as the short one."""

_VERBS = {
    "create": ("new", "make", "add", "open", "publish", "post", "write", "start"),
    "delete": ("remove", "erase", "destroy", "drop", "revoke", "unset"),
    "update": ("change", "edit", "modify", "rename", "set", "close"),
    "get": ("fetch", "retrieve", "read", "show", "view", "look", "find", "check"),
    "list": ("all", "show", "enumerate", "who", "find"),
    "add": ("give", "put", "invite", "attach", "grant"),
    "cancel": ("stop", "abort", "halt"),
    "authenticated": ("login", "logged", "signed", "am"),
}
"""The verbs of API operation names and words people use for them: a query word on the right
also searches the verb on the left (at `SYNONYM_WEIGHT`). Plain words, stemmed as the index
is (below), so each one meets the query words that stem the same way."""

MAX_PATTERN = 200
"""Longest regex accepted (Anthropic's regex tool search has the same limit)."""

MAX_REPEATS = 3
"""Most open-ended repeats (`*`, `+`, `{n,}`, or a range such as `{0,50}`) a regex may have."""

MAX_CHOICES = 256
"""Most ways a regex's optional parts (`?`, alternatives) may combine: each `?` doubles the
paths one failed match retries, on any text (`.?` 22 times took 31 s over GitHub's tools)."""

REGEX_BUDGET = 0.25
"""Seconds a regex search may take; past it, the tools searched so far are answered."""

_K1 = 1.2
_B = {"name": 0.75, "summary": 0.5, "description": 0.75, "parameters": 0.5}
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_STOP = frozenset(
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "for",
        "from",
        "how",
        "i",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "please",
        "that",
        "the",
        "their",
        "them",
        "this",
        "to",
        "up",
        "use",
        "using",
        "want",
        "we",
        "what",
        "when",
        "which",
        "with",
        "you",
        "your",
    )
)


def words(text: str) -> list[str]:
    """Lower-case words of `text`, camelCase and snake/kebab/slash names split, stop words
    dropped: `listReposForOrg` -> `list repos org`."""
    return [w for w in map(str.lower, _WORD.findall(text)) if w not in _STOP]


@functools.lru_cache(maxsize=1 << 16)
def stem(word: str) -> str:
    """A light English stem: enough to meet `repositories`/`repository`, `starring`/`star`,
    `deleted`/`delete` on the same token, cheap enough for every word of 1,200 tools."""
    if len(word) <= 3:
        return word
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + keep
            break
    else:
        if word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        word = word[:-1]  # starr -> star, committ -> commit
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]  # delete -> delet, meets deleted -> delet
    return _derivational(word)


def _derivational(word: str) -> str:
    """The nouns API descriptions make of verbs, back to the verb's stem: `invitation` and
    `invite` -> `invit`, `protection` -> `protect`, `contributor` -> `contribut`, `reviewer`
    -> `review`. Agent nouns only when at least five letters remain, so `runner` stays apart
    from `run`, and `member`, `user`, `owner` stay whole."""
    if word.endswith("ation") and len(word) >= 9:
        return word[:-5]
    if word.endswith("ion") and len(word) >= 6:
        return word[:-3]
    if word.endswith(("or", "er")) and len(word) >= 7:
        return word[:-2]
    return word


def terms(text: str, *, stemming: bool = True) -> list[str]:
    """The index terms of `text`: its words, stemmed and abbreviated as API names are
    (`repositories` -> `repo`), unless `stemming` is off (exact words only)."""
    found = words(text)
    return [_term(w) for w in found] if stemming else found


@functools.lru_cache(maxsize=1 << 16)
def _term(word: str) -> str:
    stemmed = stem(word)
    return _CANONICAL_STEMS.get(stemmed, stemmed)


_CANONICAL_STEMS = {stem(long): short for long, short in _CANONICAL.items()}


_EXPANSIONS: dict[str, tuple[str, ...]] = {}
for _verb, _synonyms in _VERBS.items():
    for _synonym in _synonyms:
        _key = _term(_synonym)
        _EXPANSIONS[_key] = (*_EXPANSIONS.get(_key, ()), _term(_verb))


def short_description(text: str, limit: int = 160) -> str:
    """The first sentence (or line) of a description, at most `limit` characters: what a
    search result shows, and what regex mode searches (short texts keep a regex bounded)."""
    text = text.strip()
    cut = re.search(r"(?<=[.!?])\s|\n", text)
    first = text[: cut.start()] if cut else text
    return first if len(first) <= limit else first[: limit - 3].rstrip() + "..."


def parameter_text(schema: Mapping[str, Any]) -> str:
    """The parameter names of an object schema (one level), for the `parameters` field."""
    props = schema.get("properties")
    return " ".join(props) if isinstance(props, Mapping) else ""


@dataclass(frozen=True, kw_only=True)
class Hit:
    name: str
    score: float


@dataclass(kw_only=True)
class SearchIndex:
    """BM25F over the given tools (see the module docstring)."""

    tools: Sequence[Tool]
    weights: Mapping[str, float] = field(default_factory=lambda: dict(FIELD_WEIGHTS))
    split_names: bool = True
    """Split names into words (False: a name is one token, as plain BM25 would see it)."""
    stemming: bool = True
    """Reduce words to their stems (False: exact words only; the benchmark's baseline)."""
    _postings: dict[str, list[tuple[int, float]]] = field(default_factory=dict, init=False)
    _texts: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        fields = [self._fields(t) for t in self.tools]
        averages = (
            {f: (sum(len(doc[f]) for doc in fields) / len(fields)) or 1.0 for f in FIELD_WEIGHTS}
            if fields
            else {}
        )
        frequency: dict[str, list[tuple[int, float]]] = {}
        for i, doc in enumerate(fields):
            weighted: dict[str, float] = {}
            for f, toks in doc.items():
                weight = self.weights.get(f, 0.0)
                if not weight or not toks:
                    continue
                factor = weight / (1.0 - _B[f] + _B[f] * len(toks) / averages[f])
                get = weighted.get
                for term, count in Counter(toks).items():
                    weighted[term] = get(term, 0.0) + count * factor
            for term, tf in weighted.items():
                frequency.setdefault(term, []).append((i, tf))
        n = len(fields)
        for term, posting in frequency.items():
            idf = math.log(1.0 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            self._postings[term] = [(i, idf * tf / (_K1 + tf)) for i, tf in posting]
        self._texts = [f"{t.name}\n{short_description(t.description)}" for t in self.tools]

    def _fields(self, t: Tool) -> dict[str, list[str]]:
        stemming = self.stemming
        name = terms(t.name, stemming=stemming) if self.split_names else [t.name.lower()]
        return {
            "name": name,
            "summary": terms(short_description(t.description), stemming=stemming),
            "description": terms(t.description, stemming=stemming),
            "parameters": terms(parameter_text(t.parameters), stemming=stemming),
        }

    def search(self, query: str, limit: int = 5) -> list[Hit]:
        """The best `limit` tools for the keywords in `query`, best first; ties by name."""
        return [Hit(name=self.tools[i].name, score=s) for i, s in self.ranked(query, limit)]

    def ranked(
        self, query: str, limit: int = 5, *, within: Collection[int] | None = None
    ) -> list[tuple[int, float]]:
        """The best `limit` tools (positions in `tools`) and their scores, best first, ties by
        name; only those in `within` when given (a search narrowed to a namespace)."""
        scores: dict[int, float] = {}
        asked = list(dict.fromkeys(terms(query, stemming=self.stemming)))
        get = scores.get
        for term in asked:
            synonyms = _EXPANSIONS.get(term, ()) if self.stemming else ()
            if not synonyms:
                for i, score in self._postings.get(term, ()):
                    scores[i] = get(i, 0.0) + score
                continue
            found = dict(self._postings.get(term, ()))
            for verb in synonyms:
                for i, score in self._postings.get(verb, ()):
                    score *= SYNONYM_WEIGHT
                    if score > found.get(i, 0.0):
                        found[i] = score  # a word counts once: as itself or its best synonym
            for i, score in found.items():
                scores[i] = get(i, 0.0) + score
        if within is not None:
            scores = {i: s for i, s in scores.items() if i in within}
        best = heapq.nlargest(limit, scores, key=scores.__getitem__)  # C-level key: fast
        best.sort(key=lambda i: (-scores[i], self.tools[i].name))
        return [(i, scores[i]) for i in best]

    def search_regex(
        self, pattern: str, limit: int = 5, *, budget: float = REGEX_BUDGET
    ) -> tuple[list[Hit], bool]:
        """Tools whose name or short description matches `pattern` (case-insensitive), names
        first; and whether every tool was searched (False: `budget` seconds ran out first).

        Raises:
            ConfigError: the pattern is invalid or refused (see `check_pattern`).
        """
        compiled = check_pattern(pattern)
        named: list[Hit] = []
        described: list[Hit] = []
        deadline = time.monotonic() + budget
        for t, text in zip(self.tools, self._texts, strict=True):
            if compiled.search(t.name):
                named.append(Hit(name=t.name, score=2.0))
            elif compiled.search(text):
                described.append(Hit(name=t.name, score=1.0))
            if len(named) >= limit or time.monotonic() > deadline:
                return [*named, *described][:limit], len(named) >= limit
        return [*named, *described][:limit], True


def check_pattern(pattern: str) -> re.Pattern[str]:
    """`pattern` compiled, case-insensitive.

    Python's `re` has no time limit, so a pattern that can backtrack exponentially (a repeat
    or alternatives inside a repeat, `(a+)+`, `(a|aa)+`, or a backreference) is refused before
    it runs. What remains is at worst polynomial in the text, and regex mode searches only
    names and first sentences (at most 160 characters): a search stays bounded, though a
    pattern such as `.*.*.*x` can still make one slow.

    Raises:
        ConfigError: invalid, too long, or of a kind that can take exponential time.
    """
    if len(pattern) > MAX_PATTERN:
        raise ConfigError(f"the pattern is {len(pattern)} characters; at most {MAX_PATTERN}")
    try:
        compiled = re.compile(pattern, re.IGNORECASE)
    except (re.error, OverflowError, RecursionError) as exc:  # `a{4294967296}`, deep nesting
        raise ConfigError(f"not a valid regular expression: {exc}") from None
    # The parsed form (private to `re`, stable since 3.11) is the one reliable view of nesting.
    parser: Any = importlib.import_module("re._parser")
    items = parser.parse(pattern).data
    repeats = _unbounded_repeats(items)
    if repeats > MAX_REPEATS:
        raise ConfigError(
            f"the pattern has {repeats} open-ended repeats (*, +, {{n,}} or a range {{n,m}}); "
            f"at most {MAX_REPEATS}, "
            "since each one multiplies the time a search can take"
        )
    choices = _choices(items)
    if choices > MAX_CHOICES:
        raise ConfigError(
            f"the pattern's optional parts (?, alternatives) combine in {choices:,} ways; at most "
            f"{MAX_CHOICES}, since a failed match retries every one of them"
        )
    if _risky(items, inside_repeat=False):
        raise ConfigError(
            "a repeat inside a repeat (such as (a+)+), alternatives inside a repeat (such as "
            "(a|aa)+), two open repeats in a row (.*.*) or a backreference can take exponential "
            "time; write the pattern without them, e.g. a+ instead of (a+)+"
        )
    return compiled


def _unbounded_repeats(items: Iterable[Any]) -> int:
    c: Any = importlib.import_module("re._constants")
    count = 0
    for op, value in items:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            count += _ranged(value, c) + _unbounded_repeats(value[2])
        elif op is c.SUBPATTERN:
            count += _unbounded_repeats(value[-1])
        elif op is c.BRANCH:
            count += sum(_unbounded_repeats(branch) for branch in value[1])
    return count


def _choices(items: Iterable[Any]) -> int:
    """How many ways the pattern's optional repeats (`?`) and alternatives combine: the paths a
    failed match backtracks through at one place (open repeats are bounded by MAX_REPEATS)."""
    c: Any = importlib.import_module("re._constants")
    total = 1
    for op, value in items:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            low, high, body = value
            total *= (2 if high is not c.MAXREPEAT and high - low == 1 else 1) * _choices(body)
        elif op is c.SUBPATTERN:
            total *= _choices(value[-1])
        elif op is c.BRANCH:
            total *= sum(_choices(branch) for branch in value[1])
        elif op in (c.ASSERT, c.ASSERT_NOT):
            total *= _choices(value[1])
        if total > MAX_CHOICES:
            return total  # enough to refuse; stop before the number grows huge
    return total


def _ranged(repeat: Any, c: Any) -> bool:
    """Whether a repeat's `(low, high, body)` lets it take many lengths: open-ended (`*`, `+`,
    `{n,}`) or a range wider than `?` (`{0,50}`), which backtracks as an open one does."""
    low, high, _body = repeat
    return high is c.MAXREPEAT or high - low > 1


def _risky(items: Iterable[Any], *, inside_repeat: bool) -> bool:
    c: Any = importlib.import_module("re._constants")

    previous_open = False
    for op, value in items:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            low, high, body = value
            unbounded = high is c.MAXREPEAT or high > 1
            if low != high and inside_repeat and op is not c.POSSESSIVE_REPEAT:
                return True  # (a+)+, and (a?){100}: any choice of length inside a repeat
            ranged = _ranged(value, c)
            if ranged and previous_open and op is not c.POSSESSIVE_REPEAT:
                return True  # .*.*, a+a+, a{0,50}a{0,50}: repeats competing for the same text
            previous_open = ranged
            if _risky(body, inside_repeat=inside_repeat or unbounded):
                return True
            continue
        previous_open = False
        if op in (c.GROUPREF, c.GROUPREF_EXISTS):
            return True
        elif op is c.SUBPATTERN:
            if _risky(value[-1], inside_repeat=inside_repeat):
                return True
        elif op is c.BRANCH:
            if inside_repeat:
                return True  # overlapping branches, (a|aa)+, backtrack like nested repeats
            if any(_risky(branch, inside_repeat=inside_repeat) for branch in value[1]):
                return True
        elif op in (c.ASSERT, c.ASSERT_NOT):
            if _risky(value[1], inside_repeat=inside_repeat):
                return True
        elif op is c.ATOMIC_GROUP and _risky(value, inside_repeat=False):
            return True
    return False
