"""Classify cost rows: each row gets the first workload entry of its rule version that matches.

Matching runs over the *distinct* property combinations, not over every row, so a month of
pod-level rows costs no more than its number of distinct workloads. Patterns are shell globs
(``tenant-*``) or lists of globs; a missing property matches as the empty string.

The result is a nullable ``Int64`` entry index: ``<NA>`` says "no entry matched". A missing
value cannot be mistaken for an index, while a ``-1`` sentinel would be a valid position from
the end of a Python list and joins silently with anything else keyed ``-1``.
"""

from __future__ import annotations

import fnmatch
import re

import numpy as np
import pandas as pd

from tenantcost.config.rules import MATCH_PROPERTIES, RuleSet
from tenantcost.errors import InputError


def _pattern_mask(values: pd.Series, pattern: str | list[str]) -> pd.Series:
    patterns = pattern if isinstance(pattern, list) else [pattern]
    literal = [p for p in patterns if not any(ch in p for ch in "*?[")]
    globs = [p for p in patterns if p not in literal]
    mask = values.isin(literal) if literal else pd.Series(False, index=values.index)
    if globs:
        regex = re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs))
        mask = mask | values.str.match(regex).fillna(False).astype(bool)
    return mask


def match_properties(ruleset: RuleSet) -> list[str]:
    """Every property any rule matches on or takes a client from."""
    props: dict[str, None] = {p: None for p in MATCH_PROPERTIES}
    for version in ruleset.rules:
        for w in version.workloads:
            for prop in w.match:
                props.setdefault(prop, None)
            if w.client_from:
                props.setdefault(w.client_from, None)
    return list(props)


def classify(costs: pd.DataFrame, ruleset: RuleSet) -> pd.Series:
    """The matching entry index for every cost row: nullable ``Int64``, ``<NA>`` when no
    entry matches.

    ``costs`` must carry a ``version`` column (the rule version index of each row).
    """
    props = [p for p in match_properties(ruleset) if p in costs.columns]
    keys = ["version", *props]
    combos = costs[keys].drop_duplicates().reset_index(drop=True)
    entry = np.zeros(len(combos), dtype="int64")
    matched = np.zeros(len(combos), dtype="bool")
    for v, version in enumerate(ruleset.rules):
        in_version = (combos["version"] == v).to_numpy()
        for j, w in enumerate(version.workloads):
            mask = in_version & ~matched
            if not mask.any():
                break
            for prop, pattern in w.match.items():
                values = (
                    combos[prop].fillna("").astype(str)
                    if prop in combos
                    else pd.Series("", index=combos.index, dtype="str")
                )
                mask &= _pattern_mask(values, pattern).to_numpy()
            entry[mask] = j
            matched |= mask
    combos["entry"] = pd.arrays.IntegerArray(entry, mask=~matched)  # unmatched: <NA>
    merged = costs[keys].merge(combos, on=keys, how="left", validate="many_to_one")
    return pd.Series(merged["entry"].array, index=costs.index, name="entry", dtype="Int64")


def workload_label(costs: pd.DataFrame) -> pd.Series:
    """A readable identity for each cost row: ``namespace/controller``, or the OpenCost name.

    Special OpenCost names (``__idle__``, ``__unallocated__``, ``__unmounted__``) and rows
    without namespace keep their name.
    """
    name = costs["name"].fillna("").astype(str)
    ns = costs["namespace"].fillna("").astype(str)
    ctrl = costs["controller"].fillna("").astype(str)
    label = np.where(
        name.str.startswith("__") | (ns == ""),
        name,
        np.where(ctrl != "", ns + "/" + ctrl, ns),
    )
    return pd.Series(label, index=costs.index, dtype="str")


def raise_unmatched(costs: pd.DataFrame, unmatched: pd.Series, ruleset: RuleSet) -> None:
    """Error for the first cost row no entry matches (``unmatched: error``)."""
    row = costs[unmatched].iloc[0]
    version = ruleset.rules[int(row["version"])]
    described = ", ".join(
        f"{p} '{row[p]}'" for p in MATCH_PROPERTIES if p in costs.columns and str(row[p]) != ""
    )
    raise InputError(
        f"cost row ({described}) matches no workload entry of rule '{version.id}'; add an "
        f"entry for it or set 'unmatched: unattributed' ({int(unmatched.sum())} row(s) unmatched)",
        file=str(row["origin"]),
    )
