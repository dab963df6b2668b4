"""Keep other clients off a client's sheet.

A sheet goes to one client. The figures on it are that client's own or aggregates of the
cluster, but free text comes from the rule file and the cost data (rule descriptions, workload
and source names, match patterns, input paths) and may name another client: a rule that says
"since acme moved its batch jobs", a load test called ``acme-k6``. Every such string passes
through :class:`Redactor` before it reaches a sheet template.

An id matches where it is not glued to other letters or digits: ``acme`` matches in
``acme-k6`` and ``acme.`` but not in ``acmecorp``. The reader's own id is matched first (the
longest id wins), so a reader ``team-a-eu`` keeps its name even when ``team-a`` is another
client.

Figures can give another client away too: an aggregate of few clients minus the reader's own
figure is the others' figure. :func:`withheld_pools` and :func:`too_few_clients` decide which
pool and cluster aggregates a client-facing page must withhold (``privacy.min_pool_clients``
of the rule file); they take an allocation result, not a report pack, so every client-facing
output (sheets today, an API or web page for account managers later) applies the same rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from tenantcost.kinds import LineKind
from tenantcost.plan import NO_CLIENT

if TYPE_CHECKING:
    from tenantcost.result import AllocationResult

POOL = ["kind", "source", "key"]

REDACTED = "[another client]"
_BEFORE = r"(?<![A-Za-z0-9])"
_AFTER = r"(?![A-Za-z0-9])"


def token_pattern(ids: Iterable[str]) -> re.Pattern[str] | None:
    """A regex matching any of ``ids`` as a token (longest first), or None if no ids."""
    ordered = sorted({i for i in ids if i}, key=lambda s: (-len(s), s))
    if not ordered:
        return None
    return re.compile(f"{_BEFORE}(?:{'|'.join(re.escape(i) for i in ordered)}){_AFTER}")


def find_ids(text: str, others: Iterable[str], me: str = "") -> list[str]:
    """The ids of ``others`` that occur in ``text`` (``me`` is matched first and ignored)."""
    others = set(others)
    pattern = token_pattern(others | {me})
    if pattern is None:
        return []
    return sorted({m for m in pattern.findall(text) if m in others and m != me})


class Redactor:
    """Replaces occurrences of the ``others`` ids with :data:`REDACTED`, keeping ``me``."""

    def __init__(self, others: Iterable[str], me: str = "") -> None:
        self._others = {o for o in others if o and o != me}
        self._pattern = token_pattern(self._others | {me}) if self._others else None

    def _sub(self, match: re.Match[str]) -> str:
        return REDACTED if match.group(0) in self._others else match.group(0)

    def __call__(self, text: str) -> str:
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(self._sub, text)


class Redaction:
    """A pack's ids compiled once, for every reader's :class:`Redactor`-equivalent.

    A pack of 10,000 sheets cannot compile a pattern of 10,000 ids per sheet, nor scan the
    same rule texts and paths once per sheet. The pattern over every known id is the same for
    each reader who is one of them (``Redactor(known, me)`` matches ``others | {me}``, which is
    ``known``); only what is replaced differs (every match but ``me``). So each distinct text
    is scanned once and its matches kept; a reader then replaces the matches that are not
    itself. Texts are redacted exactly as :class:`Redactor` does.
    """

    def __init__(self, known: Iterable[str]) -> None:
        self._known = {k for k in known if k}
        self._pattern = token_pattern(self._known)
        self._matches: dict[str, list[tuple[int, int, str]]] = {}

    def matches(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, id) of each id in ``text``, as ``re.sub`` would find them; cached."""
        found = self._matches.get(text)
        if found is None:
            assert self._pattern is not None
            found = [(m.start(), m.end(), m.group(0)) for m in self._pattern.finditer(text)]
            self._matches[text] = found
        return found

    def reader(self, me: str) -> Callable[[str], str]:
        """What :class:`Redactor` ``(known, me=me)`` does, from the shared scans."""
        if me and me not in self._known:  # the reader's own id would change the pattern
            return Redactor(self._known, me=me)
        if len(self._known) == (me in self._known):  # nobody else to redact
            return lambda text: text

        def redact(text: str) -> str:
            if not text:
                return text
            parts: list[str] = []
            last = 0
            for start, end, found in self.matches(text):
                if found != me:
                    parts += [text[last:start], REDACTED]
                    last = end
            return "".join([*parts, text[last:]]) if parts else text

        return redact


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
