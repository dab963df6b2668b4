"""Top movers of a month: which clients' figures moved most since the previous month, and why.

Finance opens a month and asks "who moved?"; the answer must be the same whoever computes it
and whatever order the rows came in, so the ordering and the "main part" are decided here, by
a pure function of two frames:

* ``change = amount - previous_amount``, exact integers of micro-units; a client missing
  from one side has 0 there;
* **increases** (change > 0) and **decreases** (change < 0), each ordered by the absolute
  change, descending, ties by client id (binary order); a client whose amount did not move
  is in neither; ``limit`` items of each;
* ``change_pct``: the change over the previous amount, a fraction rounded to 9 decimals
  (``unit-economics``' ratios); ``None`` when the previous amount is 0;
* **main part**: a client new this month (no figure in the previous month) has
  ``{part: "new_client", source: None, amount: change}``; an ended client (no figure this
  month) ``{part: "ended_client", source: None, amount: change}``; any other client the
  bridge's part (``explain``'s, summed per effect and source as the API's ``bridge`` shows
  them) with the largest absolute amount, ties by the bridge's canonical order (the order of
  the parts given); ``None`` when the bridge has no part for it.

Vectorised: one sort of every client, then the parts of the chosen clients only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

RATIO_PLACES = 9
NEW_CLIENT = "new_client"
ENDED_CLIENT = "ended_client"
AMOUNT_COLUMNS = ["client", "previous_amount", "amount"]
"""The amounts frame: one row per client; a side missing is NaN (no figure that month)."""
PART_COLUMNS = ["client", "part", "source", "amount"]
"""The parts frame: the bridge's parts in canonical order."""


@dataclass(frozen=True)
class Movers:
    """The chosen clients, each frame with ``client, previous_amount, amount, change,
    change_pct, main_part, main_source, main_amount`` in order."""

    increases: pd.DataFrame
    decreases: pd.DataFrame


def rank(amounts: pd.DataFrame, limit: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``limit`` largest increases and decreases (see the module), before main parts:
    ``client, previous_amount, amount, change, change_pct, new, ended``."""
    frame = amounts[AMOUNT_COLUMNS].copy()
    frame["new"] = frame["previous_amount"].isna().to_numpy()
    frame["ended"] = frame["amount"].isna().to_numpy()
    for column in ("previous_amount", "amount"):
        frame[column] = frame[column].fillna(0).astype("int64")
    frame["client"] = frame["client"].astype(str)
    frame["change"] = frame["amount"] - frame["previous_amount"]
    previous = frame["previous_amount"].to_numpy("float64")
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.round(frame["change"].to_numpy("float64") / previous, RATIO_PLACES)
    frame["change_pct"] = pd.Series(pct, index=frame.index, dtype="float64").where(previous != 0)
    frame["size"] = frame["change"].abs()
    ordered = frame.sort_values(["size", "client"], ascending=[False, True], kind="stable")
    ordered = ordered.drop(columns="size").reset_index(drop=True)
    up = ordered.loc[ordered["change"] > 0].head(limit).reset_index(drop=True)
    down = ordered.loc[ordered["change"] < 0].head(limit).reset_index(drop=True)
    return up, down


def main_parts(chosen: pd.DataFrame, parts: pd.DataFrame) -> pd.DataFrame:
    """``chosen`` (from :func:`rank`) with ``main_part, main_source, main_amount``."""
    grouped = parts[PART_COLUMNS].copy()
    grouped["position"] = np.arange(len(grouped))
    grouped = grouped.groupby(["client", "part", "source"], sort=False, as_index=False).agg(
        amount=("amount", "sum"), position=("position", "min")
    )
    grouped["amount"] = grouped["amount"].astype("Int64")  # exact: never through floats
    grouped = grouped.loc[grouped["amount"] != 0]
    grouped["size"] = grouped["amount"].abs()
    best = (
        grouped.sort_values(
            ["client", "size", "position"], ascending=[True, False, True], kind="stable"
        )
        .drop_duplicates("client")
        .set_index("client")
    )
    out = chosen.copy()
    found = best.reindex(out["client"])
    out["main_part"] = found["part"].to_numpy(dtype=object)
    out["main_source"] = found["source"].to_numpy(dtype=object)
    out["main_amount"] = found["amount"].astype("Int64").array
    for flag, name in (("new", NEW_CLIENT), ("ended", ENDED_CLIENT)):
        mask = out[flag].to_numpy(dtype=bool)
        out.loc[mask, "main_part"] = name
        out.loc[mask, "main_source"] = None
        out.loc[mask, "main_amount"] = out.loc[mask, "change"]
    return out.drop(columns=["new", "ended"])


def movers(amounts: pd.DataFrame, parts: pd.DataFrame, limit: int) -> Movers:
    """The month's movers (see the module)."""
    up, down = rank(amounts, limit)
    return Movers(main_parts(up, parts), main_parts(down, parts))


__all__ = ["ENDED_CLIENT", "NEW_CLIENT", "Movers", "main_parts", "movers", "rank"]
