"""Object storage through fsspec against a real S3-compatible server (moto's server mode on
127.0.0.1), as the Helm chart's jobs use it (issue 38): `ingest billing --billing s3://...`
reads a FOCUS export from a bucket, and a store keeps its data directory in a bucket.

Credentials and the endpoint come from the environment, as the AWS SDK reads them in a pod
(`AWS_ENDPOINT_URL` here, an IRSA role in EKS): nothing in tenantcost's settings.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .postgres_fixture import free_port
from .service_server import EXAMPLE as THREE_CLIENTS
from .service_server import MONTH, invoke, tenantcost

INVOICE = Path(__file__).resolve().parents[1] / "examples" / "invoice-close"
BUCKET = "tenantcost-exports"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A moto S3 server with one bucket holding the invoice example's FOCUS export, a file
    the reader does not take and a hidden one; the environment pointing the SDK at it."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    patch = pytest.MonkeyPatch()
    for name, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                        "AWS_DEFAULT_REGION": "us-east-1",
                        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
                        "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}.items():  # fmt: skip
        patch.setenv(name, value)
    import fsspec

    fs = fsspec.filesystem("s3", skip_instance_cache=True)
    fs.mkdir(BUCKET)
    for file in sorted((INVOICE / "billing").rglob("*")):
        if file.is_file():
            relative = file.relative_to(INVOICE / "billing").as_posix()
            fs.pipe(f"{BUCKET}/focus/{relative}", file.read_bytes())
    fs.pipe(f"{BUCKET}/focus/manifest.json", b"{}")
    fs.pipe(f"{BUCKET}/focus/.staging/partial.csv", b"not,a,focus,file\n")
    try:
        yield fs
    finally:
        patch.undo()
        server.stop()


def store(folder: Path, data: str | None = None) -> tuple[str, ...]:
    return ("--db", f"sqlite:///{folder / 'tc.db'}", "--data", data or str(folder / "data"))


def test_billing_from_a_bucket_is_the_billing_from_the_folder(s3, tmp_path):
    local, remote = store(tmp_path / "local"), store(tmp_path / "remote")
    for args in (local, remote):
        (tmp_path / args[1].split("///")[1]).parent.mkdir(parents=True, exist_ok=True)
        tenantcost("db", "upgrade", *args)
        tenantcost("rules", "load", str(INVOICE / "rules.yaml"), *args)
    from_folder = tenantcost("ingest", "billing", "--billing", str(INVOICE / "billing"), *local)
    url = f"s3://{BUCKET}/focus/"
    from_bucket = tenantcost("ingest", "billing", "--billing", url, *remote)

    # the same rows, cells and periods; the stored rows name the bucket's file, not a copy
    def what(line: str) -> str:
        return line.split("committed", 1)[1].rsplit(", sha256", 1)[0]

    assert what(from_bucket) == what(from_folder) and "9 rows" in what(from_bucket)
    import duckdb

    stored = str(tmp_path / "remote" / "data" / "billing" / "**" / "*.parquet")
    names = duckdb.sql(f"SELECT DISTINCT x_file FROM read_parquet('{stored}')").fetchall()
    assert names == [(f"{url}2026-11/focus.csv",)]
    batches = tenantcost("batch", "list", "--format", "json", *remote)
    assert url.rstrip("/") in batches and "tenantcost-fetch" not in batches
    assert not list(Path(tempfile.gettempdir()).glob("tenantcost-fetch-*"))  # copies removed


def test_one_object_is_read_by_its_name(s3, tmp_path):
    """A URL naming one export file (not a prefix) is read as that file, named by its URL."""
    args = store(tmp_path)
    tenantcost("db", "upgrade", *args)
    tenantcost("rules", "load", str(INVOICE / "rules.yaml"), *args)
    url = f"s3://{BUCKET}/focus/2026-11/focus.csv"
    done = tenantcost("ingest", "billing", "--billing", url, *args)
    assert "9 rows" in done
    assert url in tenantcost("batch", "list", "--format", "json", *args)


def test_object_storage_mistakes_name_the_url(s3, tmp_path):
    args = store(tmp_path)
    tenantcost("db", "upgrade", *args)
    tenantcost("rules", "load", str(INVOICE / "rules.yaml"), *args)
    missing = invoke("ingest", "billing", "--billing", f"s3://{BUCKET}/nothing-here/", *args)
    assert missing.exit_code == 2
    assert missing.stderr == f"error: s3://{BUCKET}/nothing-here/: file or folder not found\n"
    s3.pipe(f"{BUCKET}/broken/2026-11.csv", b"BillingAccountId,BilledCost\n1,2\n")
    broken = invoke("ingest", "billing", "--billing", f"s3://{BUCKET}/broken/", *args)
    assert broken.exit_code == 2 and broken.stderr.count("\n") == 1, broken.output
    assert f"s3://{BUCKET}/broken/2026-11.csv" in broken.stderr and "tenantcost-fetch" not in (
        broken.stderr
    )  # fmt: skip
    nobucket = invoke("ingest", "billing", "--billing", "s3://no-such-bucket/x.csv", *args)
    assert nobucket.exit_code == 2 and nobucket.stderr.startswith(
        "error: s3://no-such-bucket/x.csv: "
    ), nobucket.output  # fmt: skip


def test_a_store_keeps_its_data_directory_in_a_bucket(s3, tmp_path):
    """The chart's shared data directory: `--data s3://...`, the same figures as a folder."""
    folder_args = store(tmp_path / "folder")
    bucket_args = store(tmp_path / "bucket", f"s3://{BUCKET}/store/")
    totals = []
    for args in (folder_args, bucket_args):
        Path(args[1].split("///")[1]).parent.mkdir(parents=True, exist_ok=True)
        tenantcost("db", "upgrade", *args)
        tenantcost("rules", "load", str(THREE_CLIENTS / "rules.yaml"), *args)
        tenantcost("ingest", "usage", "--usage", str(THREE_CLIENTS / "usage.csv"), *args)
        tenantcost("ingest", "costs", "--costs", str(THREE_CLIENTS / "costs.json"), *args)
        totals.append(tenantcost("run", "--month", MONTH, "--format", "json", *args))
    assert s3.find(f"{BUCKET}/store/usage") and s3.find(f"{BUCKET}/store/costs")
    strip = [t.split('"run_id"')[0] for t in totals]  # the run ids differ, nothing else
    assert '"clients"' in totals[0] and strip[0] == strip[1]
    shutil.rmtree(tmp_path / "folder")
