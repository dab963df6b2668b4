"""The one CSV writer of the web app's tables (:mod:`tenantcost.service.csv_table`)."""

from __future__ import annotations

import pandas as pd

from tenantcost.service.csv_table import csv_response, csv_text


def test_amounts_are_exact_decimals_and_text_is_neutralised() -> None:
    frame = pd.DataFrame(
        {
            "client": ["=cmd|' /C calc'!A0", "-1", "client-a"],
            "amount": pd.array([123458, -5_000_001, None], dtype="Int64"),
            "change_pct": [0.0671, None, -1.0],
        }
    )
    lines = csv_text(frame, amounts=["amount"]).splitlines()
    assert lines == [
        "client,amount,change_pct",
        "'=cmd|' /C calc'!A0,0.123458,0.0671",
        "'-1,-5.000001,",
        "client-a,,-1.0",
    ]


def test_the_response_is_a_named_utf8_attachment() -> None:
    answer = csv_response(pd.DataFrame({"client": ["客户"]}), "clients-2026-11.csv")
    assert answer.media_type == "text/csv; charset=utf-8"
    assert answer.headers["content-disposition"] == 'attachment; filename="clients-2026-11.csv"'
    assert answer.body.decode("utf-8") == "client\n客户\n"
