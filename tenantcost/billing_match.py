"""A billed ``match:`` as a SQL predicate over the canonical billing view.

Billing data runs to tens of millions of lines, so lines are classified where they are read,
in DuckDB: each rule version's ``billed:`` list (and ``billing.clusters``) becomes one
``CASE WHEN ... THEN entry ... END`` over whole columns, first match wins as for
``workloads:``. The grammar is the rule file's (``tenantcost.config.billing``):

* a FOCUS column holds when its text matches the pattern, ``*`` standing for any run of
  characters (nothing else is special: a ``[`` or ``%`` in a resource id is itself);
* a list of patterns holds when any of them does;
* a ``tags:`` pattern needs the tag to be present *and non-empty* (``{tenant: "*"}`` selects
  the lines that carry a ``tenant`` tag, not every line);
* all keys of one ``match`` must hold; an empty ``match`` holds for every line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tenantcost.config.billing import TAGS


def literal(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


TAG_VALUES = "x_tags"
"""The column that holds every tag a rule set reads, parsed once per line (:func:`tag_values`)."""


def _path(tag: str) -> str:
    return literal('$."' + tag.replace("\\", "\\\\").replace('"', '\\"') + '"')


def tag_values(tags: Sequence[str]) -> str:
    """The values of ``tags`` as one list, from one parse of each line's ``Tags`` JSON: the
    classification reads several tags of every line, and parsing the JSON once per tag would
    cost a parse per tag and line."""
    if not tags:
        return "[]::VARCHAR[]"
    return f"json_extract_string(Tags, [{', '.join(_path(t) for t in tags)}])"


def tag_expression(tag: str, tags: Sequence[str] | None = None) -> str:
    """The text value of one tag (NULL when absent): from :data:`TAG_VALUES` when ``tags``
    (the list :func:`tag_values` parsed) holds it, else parsed on its own."""
    if tags is not None and tag in tags:
        return f"{TAG_VALUES}[{list(tags).index(tag) + 1}]"
    return f"json_extract_string(Tags, {_path(tag)})"


def match_tags(matches: Sequence[dict[str, Any]]) -> list[str]:
    """Every tag key the ``matches`` read, in first-use order."""
    seen: dict[str, None] = {}
    for m in matches:
        for tag in m.get(TAGS, {}) or {}:
            seen.setdefault(tag, None)
    return list(seen)


def _like(pattern: str) -> str:
    """``pattern`` with ``*`` as the only wildcard, as a LIKE pattern with ``\\`` escapes."""
    escaped = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%")


def _pattern_sql(value: str, pattern: str | list[str]) -> str:
    patterns = pattern if isinstance(pattern, list) else [pattern]
    parts = [
        f"{value} = {literal(p)}"
        if "*" not in p
        else f"{value} LIKE {literal(_like(p))} ESCAPE '\\'"
        for p in patterns
    ]
    return "(" + " OR ".join(parts) + ")"


def match_sql(match: dict[str, Any], tags: Sequence[str] | None = None) -> str:
    """The predicate of one ``match:`` (``TRUE`` for an empty one); ``tags`` as in
    :func:`tag_expression`."""
    parts: list[str] = []
    for column, pattern in match.items():
        if column == TAGS:
            for tag, tag_pattern in pattern.items():
                value = tag_expression(tag, tags)
                parts.append(
                    f"(coalesce({value}, '') <> '' AND {_pattern_sql(value, tag_pattern)})"
                )
        else:
            parts.append(_pattern_sql('"' + column + '"', pattern))
    return " AND ".join(parts) if parts else "TRUE"


def first_match_sql(matches: Sequence[dict[str, Any]], tags: Sequence[str] | None = None) -> str:
    """The index of the first match that holds, NULL when none does."""
    if not matches:
        return "NULL::INTEGER"
    whens = " ".join(f"WHEN {match_sql(m, tags)} THEN {i}" for i, m in enumerate(matches))
    return f"(CASE {whens} ELSE NULL END)::INTEGER"
