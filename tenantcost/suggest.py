"""One "did you mean" for every error that names an unknown word.

Typos in column names, rule keys and placeholders are the most common input mistake; each
error that rejects a word offers the closest valid one, worded the same everywhere, so one
function builds that hint.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable

CUTOFF = 0.6
"""difflib's similarity threshold: below it a candidate is more confusing than helpful."""


def did_you_mean(
    word: str,
    choices: Iterable[str],
    *,
    ignore_case: bool = False,
    render: Callable[[str], str] | None = None,
) -> str:
    """`` (did you mean 'x'?)`` for the choice closest to ``word``, or ``""`` if none is close.

    ``ignore_case`` compares lower-cased names (column headers are often capitalised
    differently) and still shows the choice as written. ``render`` shows the choice in the
    form the user writes it (for example ``{cluster}`` for a placeholder).
    """
    options = list(choices)
    if ignore_case:
        by_lower = {c.lower(): c for c in options}
        close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=CUTOFF)
        close = [by_lower[c] for c in close]
    else:
        close = difflib.get_close_matches(word, options, n=1, cutoff=CUTOFF)
    if not close:
        return ""
    shown = render(close[0]) if render is not None else close[0]
    return f" (did you mean '{shown}'?)"
