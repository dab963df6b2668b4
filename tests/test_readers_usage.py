"""Usage reader: CSV/Parquet, hive folders, metric selection, row numbers and every error."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tenantcost.errors import InputError
from tenantcost.readers.usage import read_usage

HEADER = "window_start,window_end,service,client,requests,cpu_seconds\n"
W0 = "2026-11-07T00:00:00Z,2026-11-07T01:00:00Z"
W1 = "2026-11-07T01:00:00Z,2026-11-07T02:00:00Z"


def ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text).tz_convert("UTC")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def assert_names(error: pytest.ExceptionInfo[InputError], *parts: str) -> None:
    text = str(error.value)
    for part in parts:
        assert part in text, f"{part!r} not in {text!r}"


def assert_usage_dtypes(frame: pd.DataFrame, metrics: list[str]) -> None:
    assert list(frame.columns) == [
        "window_start",
        "window_end",
        "service",
        "client",
        *metrics,
        "origin",
    ]
    for column in ("window_start", "window_end"):
        assert str(frame[column].dtype) == "datetime64[ns, UTC]"
    for column in ("service", "client", "origin"):
        assert frame[column].dtype == "str"
        assert not frame[column].isna().any()
    for column in metrics:
        assert frame[column].dtype == "float64"
    assert list(frame.index) == list(range(len(frame)))


def test_csv_usage_sorted_typed_and_numbered(tmp_path: Path) -> None:
    path = write(
        tmp_path / "usage.csv",
        HEADER
        + f"{W1},api,b,10,1.5\n"
        + "\n"  # blank line: skipped, but still a line
        + f'{W0},api,"b",7,0.25\n'
        + f"{W0},api,,3,0\n"  # empty client: unattributed usage
        + f"{W0},api,a,2e2,12\n"
        + "2026-11-07T02:00:00+02:00,2026-11-07 01:00:00,worker,00123,1,1\n",
    )
    frame = read_usage([path])
    assert_usage_dtypes(frame, ["requests", "cpu_seconds"])
    assert list(frame["service"]) == ["api", "api", "api", "worker", "api"]
    assert list(frame["client"]) == ["", "a", "b", "00123", "b"]
    assert list(frame["requests"]) == [3.0, 200.0, 7.0, 1.0, 10.0]
    assert list(frame["window_start"])[:4] == [ts("2026-11-07T00:00:00Z")] * 4
    assert frame["window_end"].iloc[3] == ts("2026-11-07T01:00:00Z")  # naive = UTC
    assert list(frame["origin"]) == [
        f"{path}:row 5",
        f"{path}:row 6",
        f"{path}:row 4",
        f"{path}:row 7",
        f"{path}:row 2",
    ]


def test_quoted_newlines_keep_line_numbers(tmp_path: Path) -> None:
    path = write(
        tmp_path / "usage.csv",
        "window_start,window_end,service,client,requests\n"
        f'{W0},"multi\nline service",a,1\n'  # a client id may not hold a line break
        f"{W1},api,x,-1\n",
    )
    with pytest.raises(InputError) as error:
        read_usage([path])
    assert_names(error, str(path), "row 4", "column 'requests'")


def test_parquet_file_with_integer_client_ids(tmp_path: Path) -> None:
    path = tmp_path / "usage.parquet"
    table = pa.table(
        {
            "window_start": pa.array(
                [pd.Timestamp("2026-11-07T00:00:00Z")] * 3, pa.timestamp("us", tz="UTC")
            ),
            "window_end": ["2026-11-07T01:00:00Z"] * 3,
            "service": pa.array(["api", "api", "api"]).dictionary_encode(),
            "client": pa.array([42, None, 7], pa.int64()),
            "requests": pa.array([5, 6, 7], pa.int32()),
        }
    )
    pq.write_table(table, path)
    frame = read_usage([path])
    assert_usage_dtypes(frame, ["requests"])
    assert list(frame["client"]) == ["", "42", "7"]
    assert list(frame["requests"]) == [6.0, 5.0, 7.0]
    assert list(frame["origin"]) == [f"{path}:row 2", f"{path}:row 1", f"{path}:row 3"]


def test_hive_partitioned_folder_drops_partition_keys(tmp_path: Path) -> None:
    root = tmp_path / "usage"
    for day, requests in (("2026-11-07", 1.0), ("2026-11-08", 2.0)):
        part = root / f"date={day}" / "part-0.parquet"
        part.parent.mkdir(parents=True)
        frame = pd.DataFrame(
            {
                "window_start": [pd.Timestamp(f"{day}T00:00:00Z")],
                "window_end": [pd.Timestamp(f"{day}T01:00:00Z")],
                "service": ["api"],
                "client": ["a"],
                "requests": [requests],
                # some writers also keep the partition key inside the file
                "date": [day],
            }
        )
        frame.to_parquet(part, index=False)
    usage = read_usage([root])
    assert_usage_dtypes(usage, ["requests"])
    assert list(usage["requests"]) == [1.0, 2.0]
    assert usage["origin"].iloc[1] == f"{root / 'date=2026-11-08' / 'part-0.parquet'}:row 1"


def test_columns_selects_metrics(tmp_path: Path) -> None:
    path = write(tmp_path / "u.csv", HEADER + f"{W0},api,a,1,not-read-so-not-checked\n")
    frame = read_usage([path], columns=["requests"])
    assert_usage_dtypes(frame, ["requests"])
    with pytest.raises(InputError) as error:
        read_usage([path], columns=["cpu_second"])
    assert_names(error, str(path), "column 'cpu_second'", "did you mean 'cpu_seconds'?")


def test_folder_of_csv_files(tmp_path: Path) -> None:
    write(tmp_path / "u" / "b.csv", HEADER + f"{W1},api,a,2,2\n")
    write(
        tmp_path / "u" / "a" / "x.csv",
        "window_start,window_end,service,client,cpu_seconds,requests\n" + f"{W0},api,a,1,1\n",
    )
    frame = read_usage([tmp_path / "u"])
    assert_usage_dtypes(frame, ["cpu_seconds", "requests"])  # first file's column order
    assert list(frame["requests"]) == [1.0, 2.0]


def test_shuffled_rows_give_identical_table(tmp_path: Path) -> None:
    rows = [
        f"{W1},api,b,10,1.5\n",
        f"{W0},api,b,7,0.25\n",
        f"{W0},api,,3,0\n",
        f"{W0},worker,a,2,12\n",
        f"{W0},api,a,2,12\n",
    ]
    first = read_usage([write(tmp_path / "a.csv", HEADER + "".join(rows))])
    second = read_usage([write(tmp_path / "b.csv", HEADER + "".join(reversed(rows)))])
    pd.testing.assert_frame_equal(first.drop(columns="origin"), second.drop(columns="origin"))


# --------------------------------------------------------------------------- errors


def test_non_numeric_usage_names_file_row_column_and_value(tmp_path: Path) -> None:
    path = write(tmp_path / "u.csv", HEADER + f"{W0},api,a,1,2\n{W0},api,b,12 requests,2\n")
    with pytest.raises(InputError) as error:
        read_usage([path])
    assert_names(error, str(path), "row 3", "column 'requests'", "'12 requests'")
    assert error.value.file == str(path)
    assert error.value.where == "row 3"
    assert error.value.column == "requests"


def test_empty_usage_value(tmp_path: Path) -> None:
    path = write(tmp_path / "u.csv", HEADER + f"{W0},api,a,1,2\n{W0},api,b,4,\n")
    with pytest.raises(InputError) as error:
        read_usage([path])
    assert_names(error, str(path), "row 3", "column 'cpu_seconds'", "missing")


def test_nan_usage_value_in_csv_and_parquet(tmp_path: Path) -> None:
    path = write(tmp_path / "u.csv", HEADER + f"{W0},api,a,NaN,2\n")
    with pytest.raises(InputError) as error:
        read_usage([path])
    assert_names(error, str(path), "row 2", "column 'requests'", "'NaN'")
    parquet = tmp_path / "u.parquet"
    pd.DataFrame(
        {
            "window_start": ["2026-11-07T00:00:00Z"] * 2,
            "window_end": ["2026-11-07T01:00:00Z"] * 2,
            "service": ["api", "api"],
            "client": ["a", "b"],
            "requests": [1.0, float("nan")],
        }
    ).to_parquet(parquet, index=False)
    with pytest.raises(InputError) as error:
        read_usage([parquet])
    assert_names(error, str(parquet), "row 2", "column 'requests'", "NaN")


def test_infinite_usage_value(tmp_path: Path) -> None:
    path = write(tmp_path / "u.csv", HEADER + f"{W0},api,a,inf,2\n")
    with pytest.raises(InputError) as error:
        read_usage([path])
    assert_names(error, str(path), "row 2", "column 'requests'", "finite")


def test_negative_usage_value(tmp_path: Path) -> None:
    path = write(tmp_path / "u.csv", HEADER + f"{W0},api,a,1,2\n{W0},api,b,1,-0.5\n")
    with pytest.raises(InputError) as error:
        read_usage([path])
    assert_names(error, str(path), "row 3", "column 'cpu_seconds'", ">= 0", "'-0.5'")


def test_duplicate_usage_rows_name_both(tmp_path: Path) -> None:
    path = write(
        tmp_path / "u.csv",
        HEADER + f"{W0},api,a,1,2\n{W0},api,,1,2\n{W0},api,b,1,2\n{W0},api,,5,5\n",
    )
    with pytest.raises(InputError) as error:
        read_usage([path])
    assert_names(error, str(path), "row 5", f"{path}:row 3", "duplicate", "service 'api'")


def test_duplicate_usage_rows_across_files(tmp_path: Path) -> None:
    first = write(tmp_path / "u" / "1.csv", HEADER + f"{W0},api,a,1,2\n")
    second = write(tmp_path / "u" / "2.csv", HEADER + f"{W1},api,a,1,2\n{W0},api,a,1,2\n")
    with pytest.raises(InputError) as error:
        read_usage([tmp_path / "u"])
    assert_names(error, str(second), "row 3", f"{first}:row 2")


def test_empty_service_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "u.csv", HEADER + f"{W0},api,a,1,2\n{W0}, ,a,1,2\n")
    with pytest.raises(InputError) as error:
        read_usage([path])
    assert_names(error, str(path), "row 3", "column 'service'", "empty")


def test_missing_column_with_suggestion(tmp_path: Path) -> None:
    path = write(
        tmp_path / "u.csv", f"window_start,window_end,servce,client,requests\n{W0},api,a,1\n"
    )
    with pytest.raises(InputError) as error:
        read_usage([path])
    assert_names(error, str(path), "column 'service'", "did you mean 'servce'?")


def test_unparseable_timestamp(tmp_path: Path) -> None:
    path = write(
        tmp_path / "u.csv",
        HEADER + f"{W0},api,a,1,2\nnext tuesday,2026-11-07T01:00:00Z,api,b,1,2\n",
    )
    with pytest.raises(InputError) as error:
        read_usage([path])
    assert_names(error, str(path), "row 3", "column 'window_start'", "'next tuesday'")


def test_window_end_must_follow_start(tmp_path: Path) -> None:
    path = write(tmp_path / "u.csv", HEADER + f"{W1},api,a,1,2\n{W1[21:]},{W1[:20]},api,b,1,2\n")
    with pytest.raises(InputError) as error:
        read_usage([path])
    assert_names(error, str(path), "row 3", "column 'window_end'", "not after")


def test_files_must_share_metrics(tmp_path: Path) -> None:
    write(tmp_path / "u" / "1.csv", HEADER + f"{W0},api,a,1,2\n")
    other = write(
        tmp_path / "u" / "2.csv", f"window_start,window_end,service,client,requests\n{W1},api,a,1\n"
    )
    with pytest.raises(InputError) as error:
        read_usage([tmp_path / "u"])
    assert_names(error, str(other), "column 'cpu_seconds'", "missing")


def test_no_metric_columns_and_missing_file(tmp_path: Path) -> None:
    path = write(tmp_path / "u.csv", "window_start,window_end,service,client\n")
    with pytest.raises(InputError, match="no metric columns"):
        read_usage([path])
    with pytest.raises(InputError) as error:
        read_usage([tmp_path / "missing.csv"])
    assert_names(error, "missing.csv", "not found")


def test_header_only_file_gives_empty_table(tmp_path: Path) -> None:
    frame = read_usage([write(tmp_path / "u.csv", HEADER)])
    assert len(frame) == 0
    assert_usage_dtypes(frame, ["requests", "cpu_seconds"])
