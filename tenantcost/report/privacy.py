"""Keep other clients off everything a client's reader sees.

A sheet, and every page or document an account manager reads, goes to one client. Its
figures are that client's own or aggregates of the cluster, but free text comes from the rule
file, the cost data and people (rule descriptions, workload and source names, match
patterns, input paths, the reason a month was restated) and may name another client: a rule
that says "since Acme moved its batch jobs", a load test called ``acme-k6``, a reason
"bravo disputed: ACME paid 0.66". Every such string passes through one function before it
reaches a client's reader: :meth:`Redaction.reader` (:class:`Redactor` is the same for one
reader), which replaces each other client's id with :data:`REDACTED`.

**The rule** (one, for every surface). Text and ids are compared case-insensitively: each
character is compared by its lower case (``str.lower`` of that one character, when it is one
character; :func:`fold`), so ``Acme``, ``ACME`` and ``acme`` are one name. A *word* here is a
run of letters and digits (``str.isalnum``); ``_``, ``'``, ``-``, ``.``, spaces and every other
character separate words.

* An id of at least :data:`LONG_ID` (4) characters matches wherever its characters appear,
  inside a word too: ``acme`` matches in ``acme``, ``Acme's`` (a word and a suffix),
  ``acme_eu`` (the start of a longer name), ``xacme`` (the end of a word) and
  ``myacmecorp`` (inside one).
* A shorter id matches only as whole words: it must not cut a word in two, so the character
  before it must not be a letter or digit when its own first character is one, and the
  same for the character after it and its last character. ``eu`` matches in ``eu``,
  ``acme_eu``, ``EU.`` and ``eu's``, not in ``europe`` or ``neutral``; ``a`` matches in
  ``team-a`` and ``a b``, not in ``data``. So short ids do not redact ordinary text. One
  exception keeps a short id from hiding behind a long one: a letter or digit of a long id's
  occurrence does not glue a short id that touches that occurrence without overlapping any
  long id's (``eu`` in ``acmeeu`` when ``acme`` is a client: two names run together).
* Where occurrences overlap (``team-a`` inside ``team-a-eu``), they form one *span*, the
  union of the overlapping occurrences. The reader keeps a span only when every occurrence in
  it is the reader's own id or lies inside an occurrence of it: so a reader ``team-a-eu``
  keeps its name although ``team-a`` is another client (the longest id wins, and only the
  reader's own), while a reader ``team-a`` sees ``team-a-eu`` redacted. Any other span is
  replaced, whole, by one :data:`REDACTED` (touching spans by one), so no part of another
  client's id is left standing. When another client's id overlaps the reader's own without
  lying inside it (``acme`` and ``meta`` in ``acmeta``), nobody can tell whose name it is and
  the span is redacted for both. Ids that differ only in case are one name: a span of them
  is redacted for either reader.

**Catalog names** count as ids of their clients. A client's reader knows "Bolt Imports" as
well as ``bolt-imports``: a reason that says "Bolt Imports' batch" gives the other client away
as surely as its id does. So :class:`Redaction` also takes each client's catalog name (its
whitespace runs as one space) and matches it by the same rule, case-insensitively: a name of
at least :data:`LONG_ID` characters as a phrase wherever it appears (whole, or at the start or
end of a word: ``Bolt Imports'``, ``bolt imports``), a shorter one as a whole word only. A
name's span belongs to its client, so a reader keeps its own name as written. The names
go into the one trie with the ids, so 10,000 clients cost one compile, not one per name.

What the rule guarantees (tests/test_redaction_shared.py checks it on generated ids and
texts): read with each :data:`REDACTED` as a separator, the redacted text contains no other
client's id by the same rule, except inside an occurrence of the reader's own id; and an
occurrence of the reader's own id that no other id overlaps stays as written.

**Fast.** A report pack of 10,000 sheets cannot compile a pattern of 10,000 ids per sheet,
nor scan the same rule texts and paths once per sheet. :class:`Redaction` compiles the pack's
ids once, as a trie (so a scan tests a character against one branch, not 10,000 ids), scans
each distinct text once and keeps its spans and, for each, the one reader who may keep it;
a reader then only replaces the spans that are not its own.

**Reasons.** A reopen's reason is written for finance and may hold another client's figures
that no redaction can recognise ("the 0.66 was theirs"), so a client's reader never sees it:
:func:`client_note` gives the reason finance wrote for clients (``reopen --client-reason``),
redacted, or the fixed :data:`RESTATED_NOTE`.

Figures can give another client away too: an aggregate of few clients minus the reader's own
figure is the others' figure. :func:`withheld_pools` and :func:`too_few_clients` decide which
pool and cluster aggregates a client-facing page must withhold (``privacy.min_pool_clients``
of the rule file); they take an allocation result, not a report pack, so every client-facing
output (sheets today, an API or web page for account managers later) applies the same rule.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from tenantcost.kinds import LineKind
from tenantcost.plan import NO_CLIENT

if TYPE_CHECKING:
    from tenantcost.result import AllocationResult

POOL = ["kind", "source", "key"]

REDACTED = "[another client]"
RESTATED_NOTE = "restated by finance"
"""What a client's reader reads of a restatement's reason when finance gave none for clients."""
LONG_ID = 4
"""Ids of at least this many characters match inside words too; shorter ones as words only."""
_ALNUM = r"[^\W_]"  # a letter or digit: what str.isalnum() accepts (\w less the underscore)
_TRIE_LEAF = 8
"""A branch of the compiled trie with at most this many ids lists them (fewer groups to
compile; measured for 10,000 ids: 0.5 to 1 s to compile, 20 ms to scan 20,000 characters)."""


class _Lower(dict[int, str]):
    """``str.translate`` table: each character to its lower case when that is one character
    (``'İ'.lower()`` is two), filled as characters are met."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        lower = char.lower()
        self[code] = found = lower if len(lower) == 1 else char
        return found


_LOWER = _Lower()


def fold(text: str) -> str:
    """``text`` with each character in lower case, one character for one (positions kept):
    what the rule compares. ``str.lower`` alone is not that: it changes lengths (``İ``) and
    lowers a Greek capital sigma by its place in the word."""
    return text.lower() if text.isascii() else text.translate(_LOWER)


def _trie(ids: Collection[str], words: bool) -> str:
    """A regex matching, where it is tried, the longest of ``ids`` (folded) that starts
    there; with ``words``, only where it cuts no word in two (the short ids' rule). A radix
    tree: one branch per next character, common runs as one literal, small branches as a
    list of their ids' remaining characters (longest first)."""

    def start(first: str) -> str:
        return f"(?<!{_ALNUM})" if words and first.isalnum() else ""

    def end(whole: str) -> str:
        return f"(?!{_ALNUM})" if words and whole[-1].isalnum() else ""

    def node(prefix: str, rests: set[str]) -> str:
        top = not prefix  # each alternative here starts an id
        if len(rests) <= _TRIE_LEAF:
            ordered = sorted(rests, key=lambda r: (-len(r), r))
            return "|".join(
                (start(r[0]) if top else "") + re.escape(r) + end(prefix + r) for r in ordered
            )
        branches: dict[str, set[str]] = {}
        for rest in rests:
            if rest:
                branches.setdefault(rest[0], set()).add(rest[1:])
        alternatives = []
        for char, sub in sorted(branches.items()):
            run = char + _common_start(sub)
            below = {r[len(run) - 1 :] for r in sub}
            head = (start(char) if top else "") + re.escape(run)
            tail = end(prefix + run) if below == {""} else f"(?:{node(prefix + run, below)})"
            alternatives.append(head + tail)
        if "" in rests:  # the id that ends here, tried after every longer one
            alternatives.append(end(prefix))
        return "|".join(alternatives)

    return node("", set(ids))


def _common_start(texts: Collection[str]) -> str:
    """The characters every one of ``texts`` starts with."""
    first, last = min(texts), max(texts)  # the others lie between them
    n = 0
    while n < len(first) and first[n] == last[n]:
        n += 1
    return first[:n]


class Span(NamedTuple):
    """Characters ``start:end`` of a text hold other clients' ids (or a reader's own)."""

    start: int
    end: int
    owner: str | None
    """The one reader who keeps this span as written (its own id); ``None``: nobody."""


def _merge(occurrences: Iterable[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Occurrences grouped into runs of overlapping ones, in order (touching ones apart)."""
    groups: list[list[tuple[int, int]]] = []
    reach = -1
    for found in sorted(set(occurrences)):
        if groups and found[0] < reach:
            groups[-1].append(found)
            reach = max(reach, found[1])
        else:
            groups.append([found])
            reach = found[1]
    return groups


def phrase(name: str) -> str:
    """A catalog name as the rule matches it: its runs of whitespace as one space."""
    return " ".join(name.split())


class Redaction:
    """The rule of this module over a set of known client ids and their catalog names
    (``names``: client id to name), compiled once; each distinct text is scanned once and its
    spans kept, for every reader (:meth:`reader`)."""

    def __init__(self, known: Iterable[str], names: Mapping[str, str] | None = None) -> None:
        self._names = {str(c): phrase(str(n)) for c, n in (names or {}).items() if c}
        self._known = frozenset(k for k in known if k) | frozenset(self._names)
        owners: dict[str, set[str]] = {}
        for client in self._known:
            owners.setdefault(fold(client), set()).add(client)
        for client, name in self._names.items():
            if name:
                owners.setdefault(fold(name), set()).add(client)
        self._ids = owners
        self._owners = {f: next(iter(ids)) if len(ids) == 1 else None for f, ids in owners.items()}
        long = [f for f in owners if len(f) >= LONG_ID]
        self._short = {f for f in owners if len(f) < LONG_ID}
        self._long_re = re.compile(f"(?=({_trie(long, False)}))") if long else None
        self._short_re = re.compile(f"(?=({_trie(self._short, True)}))") if self._short else None
        self._spans: dict[str, list[Span]] = {}

    def spans(self, text: str) -> list[Span]:
        """The spans of ``text`` (see the module's rule), in order; cached per text."""
        found = self._spans.get(text)
        if found is None:
            found = self._scan(fold(text))
            self._spans[text] = found
        return found

    def _scan(self, folded: str) -> list[Span]:
        return [self._span(folded, group) for group in self._groups(folded)]

    def _groups(self, folded: str) -> list[list[tuple[int, int]]]:
        """Every occurrence of a known id in ``folded``, grouped into runs of overlapping
        ones: the longest long id and the longest short id at each position (a shorter one
        starting there lies inside it), and the short ids beside the long ones."""
        longs = [] if self._long_re is None else _found(self._long_re, folded)
        runs = [(g[0][0], max(e for _, e in g)) for g in _merge(longs)]
        shorts = [] if self._short_re is None else _found(self._short_re, folded)
        return _merge(longs + shorts + self._beside(folded, runs))

    def _beside(self, folded: str, runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Short ids touching a run of long ids' occurrences without overlapping any, glued to
        it only (the rule's exception): checked where a run starts or ends, a few places."""
        starts = [s for s, _ in runs]

        def inside(i: int) -> bool:  # in a run of long occurrences
            at = bisect_right(starts, i) - 1
            return at >= 0 and i < runs[at][1]

        def free(i: int) -> bool:  # the text's edge, no letter or digit, or one of a long id
            return i < 0 or i >= len(folded) or not folded[i].isalnum() or inside(i)

        def short(s: int, e: int) -> bool:  # a short id, outside the runs, no glue but them
            word = folded[s:e]
            return (
                s >= 0 and e <= len(folded) and word in self._short
                and not inside(s) and not inside(e - 1)
                and (not word[0].isalnum() or free(s - 1))
                and (not word[-1].isalnum() or free(e))
            )  # fmt: skip

        return [
            found
            for run_start, run_end in runs
            for n in range(1, LONG_ID)
            for found in ((run_start - n, run_start), (run_end, run_end + n))
            if short(*found)
        ]

    def _span(self, folded: str, group: list[tuple[int, int]]) -> Span:
        """A run of overlapping occurrences, and the reader (if any) who may keep it: every
        occurrence is that reader's id or inside one."""
        start, end = group[0][0], max(e for _, e in group)
        owners = {(s, e): self._owners.get(folded[s:e]) for s, e in group}
        for owner in {o for o in owners.values() if o is not None}:
            own = [(s, e) for (s, e), o in owners.items() if o == owner]
            if all(any(a <= s and e <= b for a, b in own) for s, e in group):
                return Span(start, end, owner)
        return Span(start, end, None)

    def reader(self, me: str) -> Callable[[str], str]:
        """The redaction one reader sees: every span but its own replaced by one
        :data:`REDACTED` (touching ones by one)."""
        if me and me not in self._known:  # the reader's own id would change the spans
            return Redaction(self._known | {me}, self._names).reader(me)
        if len(self._known) == (me in self._known):  # nobody else to redact
            return lambda text: text

        cache, scan = self._spans, self.spans  # a sheet calls this for each of its texts

        def redact(text: str) -> str:
            spans = cache.get(text)
            if spans is None:
                spans = scan(text)
            if not spans:
                return text
            parts: list[str] = []
            last = 0
            for start, end, owner in spans:
                if owner != me:
                    if start > last or not parts:
                        parts += [text[last:start], REDACTED]
                    last = end
            return "".join([*parts, text[last:]]) if parts else text

        return redact

    def others_in(self, text: str, me: str = "") -> list[str]:
        """The other clients' ids whose occurrences in ``text`` the reader ``me`` would not see
        (those :meth:`reader` replaces), sorted."""
        if me and me not in self._known:
            return Redaction(self._known | {me}, self._names).others_in(text, me)
        folded = fold(text)
        hidden: set[str] = set()
        for group in self._groups(folded):
            if self._span(folded, group).owner != me:
                hidden.update(*(self._ids[folded[s:e]] for s, e in group))
        return sorted(hidden - {me})


def _found(pattern: re.Pattern[str], folded: str) -> list[tuple[int, int]]:
    """``(start, end)`` of the longest match of ``pattern`` (a lookahead) at each position."""
    return [(m.start(), m.start() + len(m.group(1))) for m in pattern.finditer(folded)]


class Redactor:
    """:class:`Redaction` for one reader ``me`` (``others``: the ids to redact)."""

    def __init__(self, others: Iterable[str], me: str = "") -> None:
        self._redact = Redaction({*others, me}).reader(me)

    def __call__(self, text: str) -> str:
        return self._redact(text)


def find_ids(text: str, others: Iterable[str], me: str = "") -> list[str]:
    """The ids of ``others`` the reader ``me`` must not read in ``text``, by the rule."""
    return Redaction({*others, me}).others_in(text, me)


def client_note(client_reason: str | None, redact: Callable[[str], str]) -> str:
    """What a client's reader is told about why a month was restated: the reason finance
    wrote for clients (``reopen --client-reason``), redacted for that reader, else
    :data:`RESTATED_NOTE`; never the internal reason (the caller does not pass it)."""
    text = " ".join((client_reason or "").split())
    return redact(text) if text else RESTATED_NOTE


def withheld_pools(result: AllocationResult, threshold: int) -> set[tuple[str, str, str]]:
    """The (kind, source, key) pools of ``result``'s lines whose figures (total measure, cost,
    a client's share, unattributed part) a client must not see: some window of the period
    split the pool among fewer than ``threshold`` clients (``result.pool_clients``, the
    minimum over the rule versions that split it), or it has no count at all."""
    lines = result.lines
    pools = lines.loc[lines["kind"] != LineKind.DIRECT, POOL].astype(str).drop_duplicates()
    counts = result.pool_clients
    if counts.empty:
        return set(zip(pools["kind"], pools["source"], pools["key"], strict=True))
    least = counts.astype(dict.fromkeys(POOL, str)).groupby(POOL)["min_clients"].min()
    merged = pools.merge(least.reset_index(), on=POOL, how="left")
    few = merged[merged["min_clients"].fillna(0) < threshold]
    return set(zip(few["kind"], few["source"], few["key"], strict=True))


def too_few_clients(result: AllocationResult, threshold: int) -> bool:
    """Whether the period had fewer than ``threshold`` clients: then a sum over every client
    (the cost meant for clients) minus the reader's total is too few others' sum to show."""
    clients = result.lines.loc[result.lines["client"] != NO_CLIENT, "client"]
    return bool(clients.nunique() < threshold)
