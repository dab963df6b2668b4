"""One amount's exact decimal string (tenantcost.money.micros_to_decimal_string) is the one
the vectorised column function writes, for any 64-bit amount."""

from __future__ import annotations

import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from tenantcost.money import micros_to_decimal_string, micros_to_decimal_strings


@given(st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1))
def test_one_amount_reads_as_its_column_does(micros: int) -> None:
    column = micros_to_decimal_strings(pd.Series([micros], dtype="int64"))
    assert micros_to_decimal_string(micros) == column.iloc[0]


def test_known_amounts() -> None:
    assert [micros_to_decimal_string(m) for m in (0, 5, -5, 123_456_789, -12_000_345)] == [
        "0.000000", "0.000005", "-0.000005", "123.456789", "-12.000345"
    ]  # fmt: skip
