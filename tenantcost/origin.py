"""Where an input value came from: the ``origin`` string every reader attaches to its rows.

Readers write ``<file>:row <n>`` (tabular files) or ``<file>:data[0]['x']`` (JSON paths) into
each row's ``origin`` column, so a later check anywhere (money sums, ingest checks, the cost
model) can name the file and the place of the offending value without knowing which reader
produced it. The format is read back here, in a base module, because money and every layer
above it need it and none of them may depend on a reader.
"""

from __future__ import annotations

import re

_ORIGIN = re.compile(r"^(?P<file>.*):(?P<where>row \d+|(?:data)?\[\d+\]\[.*\])$", re.DOTALL)


def split_origin(origin: str) -> tuple[str | None, str]:
    """Split ``file:row 7`` / ``file:data[0]['x']`` back into file and place for messages."""
    match = _ORIGIN.match(origin)
    if match:
        return match.group("file"), match.group("where")
    return None, origin
