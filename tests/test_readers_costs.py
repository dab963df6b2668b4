"""Cost readers: real OpenCost samples, multi-step responses, folders and every error path."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tenantcost.errors import InputError
from tenantcost.readers.canonical import read_canonical_costs
from tenantcost.readers.costs import read_costs
from tenantcost.readers.opencost_csv import read_opencost_csv
from tenantcost.readers.opencost_json import parse_allocation_response, read_opencost_json
from tenantcost.tables import COST_REQUIRED_COLUMNS

# Byte-for-byte copies of OpenCost's published samples (provenance: tests/data/opencost/SOURCES.md).
REFERENCE = Path(__file__).parent / "data" / "opencost"
ALLOCATION_EXAMPLE = REFERENCE / "opencost-website_allocation-example-output.json"
EXPORT_SAMPLE = REFERENCE / "opencost-website_export-sample.csv"
SWAGGER = REFERENCE / "opencost_docs_swagger.json"



def ts(text: str) -> pd.Timestamp:
    return pd.Timestamp(text).tz_convert("UTC")


def allocation(
    name: str,
    total: Any,
    *,
    start: str = "2026-11-07T00:00:00Z",
    end: str = "2026-11-07T01:00:00Z",
    **properties: Any,
) -> dict[str, Any]:
    """A minimal OpenCost allocation object."""
    return {
        "name": name,
        "properties": properties,
        "window": {"start": start, "end": end},
        "start": start,
        "end": end,
        "cpuCost": 0.5,
        "cpuCostAdjustment": 0.0,
        "ramCost": 0.25,
        "ramCostAdjustment": 0.0,
        "totalCost": total,
    }


def envelope(*steps: Any) -> dict[str, Any]:
    return {"code": 200, "status": "success", "data": list(steps)}


def write_json(path: Path, payload: Any) -> Path:
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def assert_names(error: pytest.ExceptionInfo[InputError], *parts: str) -> None:
    text = str(error.value)
    for part in parts:
        assert part in text, f"{part!r} not in {text!r}"


def assert_cost_dtypes(frame: pd.DataFrame) -> None:
    assert list(frame.columns[: len(COST_REQUIRED_COLUMNS)]) == COST_REQUIRED_COLUMNS
    for column in ("window_start", "window_end"):
        assert str(frame[column].dtype) == "datetime64[ns, UTC]"
    for column in ("name", "cluster", "node", "namespace", "controller_kind", "controller"):
        assert frame[column].dtype == "str"
        assert not frame[column].isna().any()
    assert frame["total_cost"].dtype == "float64"
    assert list(frame.index) == list(range(len(frame)))


# --------------------------------------------------------------------------- real samples


def test_allocation_example_output() -> None:
    frame = read_costs([ALLOCATION_EXAMPLE])
    assert_cost_dtypes(frame)
    assert list(frame["name"]) == ["kube-system", "opencost", "prometheus"]
    row = frame.set_index("name").loc["kube-system"]
    assert row["total_cost"] == 1.52743
    assert row["cpu_cost"] == 1.43086
    assert row["ram_cost"] == 0.09657
    assert row["window_start"] == ts("2023-07-12T11:02:46Z")
    # window.end, not the top-level "end" (11:02:00) which is the last data point
    assert row["window_end"] == ts("2023-07-19T11:02:46Z")
    assert row["cluster"] == "default-cluster"
    assert row["namespace"] == "kube-system"
    assert row["node"] == ""
    assert row["origin"] == f"{ALLOCATION_EXAMPLE}:data[0]['kube-system']"
    opencost = frame.set_index("name").loc["opencost"]
    assert opencost["node"] == "ip-192-168-20-42.ap-southeast-2.compute.internal"
    assert opencost["controller_kind"] == "deployment"
    assert opencost["controller"] == "opencost"
    assert opencost["total_cost"] == 0.10937
    assert frame["total_cost"].sum() == pytest.approx(1.52743 + 0.10937 + 0.14136)


def test_swagger_embedded_example() -> None:
    swagger = json.loads(SWAGGER.read_text(encoding="utf-8"))
    example = swagger["paths"]["/allocation/compute"]["get"]["responses"]["200"]["content"][
        "application/json"
    ]["examples"]["0"]["value"]
    assert isinstance(example, str)
    frame = parse_allocation_response(json.loads(example), "swagger.json")
    assert_cost_dtypes(frame)
    by_name = frame.set_index("name")
    assert set(by_name.index) == {"kube-system", "opencost", "prometheus"}
    assert by_name.loc["kube-system", "total_cost"] == 0.425469
    assert by_name.loc["kube-system", "cpu_cost"] == 0.408822
    assert by_name.loc["opencost", "total_cost"] == 0.030644
    assert by_name.loc["opencost", "pod"] == "opencost-75dc7dcc49-xdx5t"
    assert by_name.loc["opencost", "cluster"] == "cluster-one"
    assert (frame["window_start"] == ts("2023-01-18T11:38:45Z")).all()
    assert (frame["window_end"] == ts("2023-01-20T11:38:45Z")).all()
    assert by_name.loc["opencost", "origin"] == "swagger.json:data[0]['opencost']"


def test_export_sample_csv() -> None:
    frame = read_costs([EXPORT_SAMPLE])
    assert_cost_dtypes(frame)
    assert len(frame) == 2
    first = frame.iloc[0]
    assert first["window_start"] == ts("2023-01-01T00:00:00Z")
    assert first["window_end"] == ts("2023-01-02T00:00:00Z")
    assert frame.iloc[1]["window_start"] == ts("2023-01-02T00:00:00Z")
    assert first["name"] == "opencost/opencost-8fd7f8778-s7flr/opencost"
    assert first["cluster"] == ""
    assert first["namespace"] == "opencost"
    assert first["controller_kind"] == "deployment"
    assert first["controller"] == "opencost"
    assert first["pod"] == "opencost-8fd7f8778-s7flr"
    assert first["total_cost"] == 0.010493746736011505
    assert first["cpu_cost"] == 0.00838296
    assert first["ram_cost"] == 0.002110786736011505
    assert first["label:app"] == "opencost"
    assert first["label:team"] == "my-team"
    assert first["origin"] == f"{EXPORT_SAMPLE}:row 2"
    assert frame.iloc[1]["origin"] == f"{EXPORT_SAMPLE}:row 3"


# --------------------------------------------------------------------------- JSON shapes


def test_multi_step_response_with_empty_steps(tmp_path: Path) -> None:
    step1 = {
        "saas/deployment:api": allocation(
            "saas/deployment:api",
            1.5,
            namespace="saas",
            controllerKind="deployment",
            controller="api",
            cluster="c1",
            labels={"app_kubernetes_io_name": "api", "team": "core"},
        ),
        "__idle__": allocation("__idle__", 2.0, cluster="c1"),
    }
    step2 = {
        "saas/deployment:api": allocation(
            "saas/deployment:api",
            1.25,
            start="2026-11-07T01:00:00Z",
            end="2026-11-07T02:00:00Z",
            namespace="saas",
            controllerKind="deployment",
            controller="api",
            cluster="c1",
        ),
    }
    path = write_json(tmp_path / "alloc.json", envelope(step1, None, {}, step2))
    frame = read_opencost_json(path)
    assert_cost_dtypes(frame)
    assert len(frame) == 3
    api = frame[frame["name"] == "saas/deployment:api"]
    assert list(api["controller"]) == ["api", "api"]  # plain name from properties
    assert list(api["controller_kind"]) == ["deployment", "deployment"]
    assert list(api["total_cost"]) == [1.5, 1.25]
    assert list(api["window_start"]) == [ts("2026-11-07T00:00Z"), ts("2026-11-07T01:00Z")]
    assert list(api["origin"]) == [
        f"{path}:data[0]['saas/deployment:api']",
        f"{path}:data[3]['saas/deployment:api']",
    ]
    assert list(api["label:app_kubernetes_io_name"]) == ["api", ""]
    assert list(api["label:team"]) == ["core", ""]
    idle = frame[frame["name"] == "__idle__"].iloc[0]
    assert idle["namespace"] == "" and idle["label:team"] == ""


def test_components_include_adjustments_and_fallback_window(tmp_path: Path) -> None:
    item = allocation("a", 1.0, namespace="a")
    item["cpuCostAdjustment"] = -0.125
    item["gpuCost"] = 0.1
    item["gpuCostAdjustment"] = 0.05
    item["someFieldFromTheFuture"] = {"x": [1, 2]}
    del item["window"]
    item["start"], item["end"] = "2026-11-07T00:00:00+01:00", "2026-11-07T01:00:00+01:00"
    frame = parse_allocation_response([{"a": item}], "bare.json")
    row = frame.iloc[0]
    assert row["cpu_cost"] == 0.375
    assert row["gpu_cost"] == pytest.approx(0.15)
    assert row["window_start"] == ts("2026-11-06T23:00:00Z")
    assert row["window_end"] == ts("2026-11-07T00:00:00Z")
    assert pd.isna(row["pv_cost"])  # not reported -> NaN, total_cost is authoritative
    assert row["origin"] == "bare.json:[0]['a']"  # a bare list has no "data" key


def test_pod_level_rows(tmp_path: Path) -> None:
    pods = {
        f"saas/api-{i}": allocation(
            f"saas/api-{i}",
            0.1 * (i + 1),
            namespace="saas",
            controllerKind="deployment",
            controller="api",
            pod=f"api-{i}",
            node=f"node-{i % 2}",
        )
        for i in range(3)
    }
    frame = parse_allocation_response(envelope(pods), "pods.json")
    assert list(frame["pod"]) == ["api-0", "api-1", "api-2"]
    assert list(frame["node"]) == ["node-0", "node-1", "node-0"]
    assert frame["total_cost"].tolist() == pytest.approx([0.1, 0.2, 0.3])


def test_empty_response_gives_empty_table() -> None:
    frame = parse_allocation_response(envelope(None, {}), "empty.json")
    assert len(frame) == 0
    assert_cost_dtypes(frame)


# --------------------------------------------------------------------------- folders


def test_folder_mixes_formats_recursively(tmp_path: Path) -> None:
    folder = tmp_path / "costs"
    (folder / "sub").mkdir(parents=True)
    write_json(
        folder / "a.json",
        envelope({"ns1": allocation("ns1", 3.0, namespace="ns1", cluster="c1")}),
    )
    (folder / "b.csv").write_text(
        "Date,Namespace,ControllerKind,ControllerName,Pod,Container,CPUCost,TotalCost,Label_app\n"
        "2026-11-07,ns2,deployment,web,web-1,main,0.5,1.0,web\n",
        encoding="utf-8",
    )
    (folder / "sub" / "c.csv").write_text(
        "window_start,window_end,cluster,namespace,controller_kind,controller,total_cost\n"
        "2026-11-07T00:00:00Z,2026-11-07T01:00:00Z,c1,ns3,statefulset,db,2.5\n",
        encoding="utf-8",
    )
    pd.DataFrame(
        {
            "window_start": [pd.Timestamp("2026-11-07T00:00:00Z")],
            "window_end": [pd.Timestamp("2026-11-07T01:00:00Z")],
            "cluster": ["c1"],
            "namespace": ["ns4"],
            "controller_kind": ["daemonset"],
            "controller": ["agent"],
            "total_cost": [0.75],
        }
    ).to_parquet(folder / "sub" / "d.parquet")
    (folder / "notes.txt").write_text("ignored", encoding="utf-8")
    (folder / ".hidden.csv").write_text("garbage", encoding="utf-8")

    frame = read_costs([folder])
    assert_cost_dtypes(frame)
    by_ns = frame.set_index("namespace")
    assert sorted(by_ns.index) == ["ns1", "ns2", "ns3", "ns4"]
    assert by_ns.loc["ns1", "total_cost"] == 3.0
    assert by_ns.loc["ns2", "name"] == "ns2/web-1/main"
    assert by_ns.loc["ns3", "name"] == "ns3/db"  # derived: namespace/controller
    assert by_ns.loc["ns4", "origin"] == f"{folder / 'sub' / 'd.parquet'}:row 1"
    assert by_ns.loc["ns2", "label:app"] == "web"
    assert by_ns.loc["ns3", "label:app"] == ""
    assert by_ns.loc["ns2", "cpu_cost"] == 0.5
    assert pd.isna(by_ns.loc["ns3", "cpu_cost"])
    # the same file named twice (directly and via its folder) is read once
    again = read_costs([folder, folder / "a.json"])
    pd.testing.assert_frame_equal(again, frame)


def test_canonical_csv_optional_columns_and_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "canon.csv"
    path.write_text(
        "window_start,window_end,cluster,namespace,controller_kind,controller,total_cost,"
        "label:team,cpu_cost\n"
        "2026-11-07T02:00:00+02:00,2026-11-07 01:00:00,c1,ns,deployment,api,1.0,core,0.4\n"
        "2026-11-07T00:00:00Z,2026-11-07T01:00:00Z,c1,ns,,,2.0,,\n"
        "2026-11-07T00:00:00Z,2026-11-07T01:00:00Z,c1,,,,0.5,,\n",
        encoding="utf-8",
    )
    frame = read_canonical_costs(path)
    assert_cost_dtypes(frame)
    assert list(frame["window_start"]) == [ts("2026-11-07T00:00:00Z")] * 3
    assert list(frame["window_end"]) == [ts("2026-11-07T01:00:00Z")] * 3
    assert list(frame["name"]) == ["ns/api", "ns", ""]
    assert list(frame["node"]) == ["", "", ""]
    assert list(frame["label:team"]) == ["core", "", ""]
    assert frame["cpu_cost"].tolist()[0] == 0.4
    assert pd.isna(frame["cpu_cost"].tolist()[1])


# --------------------------------------------------------------------------- order independence


CANONICAL_HEADER = (
    "window_start,window_end,cluster,namespace,controller_kind,controller,pod,total_cost\n"
)
CANONICAL_ROWS = [
    "2026-11-07T01:00:00Z,2026-11-07T02:00:00Z,c1,saas,deployment,api,api-1,1.0\n",
    "2026-11-07T00:00:00Z,2026-11-07T01:00:00Z,c1,saas,deployment,api,api-2,2.0\n",
    "2026-11-07T00:00:00Z,2026-11-07T01:00:00Z,c1,saas,deployment,api,api-1,3.0\n",
    "2026-11-07T00:00:00Z,2026-11-07T01:00:00Z,c1,saas,deployment,api,api-1,4.0\n",
    "2026-11-07T00:00:00Z,2026-11-07T01:00:00Z,c0,kube-system,,,,5.0\n",
    "2026-11-07T00:00:00Z,2026-11-07T01:00:00Z,c1,saas,deployment,worker,w-1,6.0\n",
]


def test_shuffled_rows_give_identical_table(tmp_path: Path) -> None:
    ordered = tmp_path / "a.csv"
    shuffled = tmp_path / "b.csv"
    ordered.write_text(CANONICAL_HEADER + "".join(CANONICAL_ROWS), encoding="utf-8")
    permutation = [3, 5, 0, 2, 4, 1]
    shuffled.write_text(
        CANONICAL_HEADER + "".join(CANONICAL_ROWS[i] for i in permutation), encoding="utf-8"
    )
    first = read_costs([ordered]).drop(columns="origin")
    second = read_costs([shuffled]).drop(columns="origin")
    pd.testing.assert_frame_equal(first, second)
    assert list(first["total_cost"]) == [5.0, 3.0, 4.0, 2.0, 6.0, 1.0]


def test_shuffled_json_allocations_give_identical_table(tmp_path: Path) -> None:
    items = {
        n: allocation(n, float(i), namespace=n, cluster="c1") for i, n in enumerate(["b", "a", "c"])
    }
    forward = write_json(tmp_path / "x.json", envelope(items))
    frame1 = read_costs([forward])
    backward = write_json(tmp_path / "x.json", envelope(dict(reversed(list(items.items())))))
    frame2 = read_costs([backward])
    pd.testing.assert_frame_equal(frame1, frame2)  # JSON origins do not depend on order


# --------------------------------------------------------------------------- errors


def test_malformed_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"code": 200,\n  "data": [\n    {"a": }\n  ]\n}\n', encoding="utf-8")
    with pytest.raises(InputError) as error:
        read_costs([path])
    assert_names(error, str(path), "line 3, column 11", "invalid JSON")
    assert error.value.file == str(path)
    assert error.value.where == "line 3, column 11"


def test_error_envelope_quotes_code_and_message(tmp_path: Path) -> None:
    path = write_json(
        tmp_path / "err.json",
        {"code": 400, "status": "", "message": "Error: invalid 'window' parameter"},
    )
    with pytest.raises(InputError) as error:
        read_costs([path])
    assert_names(error, str(path), "code 400", "Error: invalid 'window' parameter")


def test_message_without_data_is_an_error() -> None:
    with pytest.raises(InputError) as error:
        parse_allocation_response({"message": "Error: boom"}, "resp.json")
    assert_names(error, "resp.json", "Error: boom")


@pytest.mark.parametrize(
    ("total", "problem"),
    [(None, "null"), (-0.5, "negative"), (float("nan"), "not finite"), ("1.0", "number")],
)
def test_bad_total_cost_names_json_path(tmp_path: Path, total: Any, problem: str) -> None:
    payload = envelope({"saas/deployment:api": allocation("saas/deployment:api", total)})
    path = write_json(tmp_path / "alloc.json", payload)
    with pytest.raises(InputError) as error:
        read_costs([path])
    assert_names(error, str(path), "data[0]['saas/deployment:api'].totalCost", problem)
    assert error.value.where == "data[0]['saas/deployment:api'].totalCost"


def test_missing_total_cost_names_json_path() -> None:
    item = allocation("api", 1.0)
    del item["totalCost"]
    with pytest.raises(InputError) as error:
        parse_allocation_response(envelope({}, {"api": item}), "a.json")
    assert_names(error, "a.json", "data[1]['api'].totalCost", "missing")


def test_unparseable_json_window_names_path() -> None:
    item = allocation("api", 1.0, start="yesterday")
    with pytest.raises(InputError) as error:
        parse_allocation_response(envelope({"api": item}), "a.json")
    assert_names(error, "a.json", "data[0]['api'].window.start", "'yesterday'")


def test_negative_cost_in_canonical_csv_names_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "canon.csv"
    path.write_text(
        CANONICAL_HEADER
        + CANONICAL_ROWS[0]
        + "\n"  # a blank line still counts as a line
        + "2026-11-07T00:00:00Z,2026-11-07T01:00:00Z,c1,saas,deployment,api,api-1,-2.5\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as error:
        read_costs([path])
    assert_names(error, str(path), "row 4", "column 'total_cost'", "-2.5")


def test_negative_cost_in_export_csv_names_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text(
        "Date,Namespace,ControllerKind,ControllerName,Pod,Container,TotalCost\n"
        "2026-11-07,ns,deployment,web,web-1,main,1.0\n"
        "2026-11-07,ns,deployment,web,web-2,main,-1.0\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as error:
        read_opencost_csv(path)
    assert_names(error, str(path), "row 3", "column 'TotalCost'")


def test_non_numeric_cost_names_value(tmp_path: Path) -> None:
    path = tmp_path / "canon.csv"
    path.write_text(
        CANONICAL_HEADER
        + "2026-11-07T00:00:00Z,2026-11-07T01:00:00Z,c1,saas,deployment,api,api-1,1,5\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError):  # one field too many: pandas' parser reports it
        read_costs([path])
    path.write_text(
        CANONICAL_HEADER
        + "2026-11-07T00:00:00Z,2026-11-07T01:00:00Z,c1,saas,deployment,api,api-1,1€\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as error:
        read_costs([path])
    assert_names(error, str(path), "row 2", "column 'total_cost'", "'1€'")


def test_missing_column_suggests_canonical(tmp_path: Path) -> None:
    path = tmp_path / "canon.csv"
    path.write_text(
        "windw_start,window_end,cluster,namespace,controller_kind,controller,total_cost\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as error:
        read_costs([path])
    assert_names(error, str(path), "column 'window_start'", "did you mean 'windw_start'?")


def test_missing_column_suggests_export(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text(
        "Date,Namespace,ControllerKind,ControllerName,Pod,Containr,TotalCost\n"
        "2026-11-07,ns,deployment,web,web-1,main,1.0\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as error:
        read_costs([path])
    assert_names(error, str(path), "column 'Container'", "did you mean 'Containr'?")


def test_unparseable_timestamp_names_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "canon.csv"
    path.write_text(
        CANONICAL_HEADER
        + CANONICAL_ROWS[0]
        + "2026-11-07T00:00:00Z,07/11/2026 1pm,c1,saas,deployment,api,api-1,1.0\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as error:
        read_costs([path])
    assert_names(error, str(path), "row 3", "column 'window_end'", "'07/11/2026 1pm'")


def test_window_end_must_follow_start(tmp_path: Path) -> None:
    path = tmp_path / "canon.csv"
    path.write_text(
        CANONICAL_HEADER
        + "2026-11-07T01:00:00Z,2026-11-07T01:00:00Z,c1,saas,deployment,api,api-1,1.0\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as error:
        read_costs([path])
    assert_names(error, str(path), "row 2", "column 'window_end'", "not after")


def test_window_end_must_follow_start_in_json() -> None:
    item = allocation("x:y", 1.0, start="2026-11-07T01:00:00Z", end="2026-11-07T00:00:00Z")
    with pytest.raises(InputError) as error:
        parse_allocation_response(envelope({"x:y": item}), "a.json")
    assert error.value.file == "a.json"
    assert error.value.where == "data[0]['x:y']"


def test_missing_file_and_unsupported_type(tmp_path: Path) -> None:
    with pytest.raises(InputError) as error:
        read_costs([tmp_path / "nope.json"])
    assert_names(error, "nope.json", "not found")
    other = tmp_path / "costs.xlsx"
    other.write_bytes(b"x")
    with pytest.raises(InputError, match=re.escape("unsupported cost file type '.xlsx'")):
        read_costs([other])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="folder has no cost files"):
        read_costs([empty])
