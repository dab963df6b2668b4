"""The store's data directory: raw inputs as Parquet, one file per batch and day.

Layout (hive-partitioned by source and day of ``window_start``, UTC)::

    <data>/usage/date=2026-11-07/<batch uid>.parquet
    <data>/costs/date=2026-11-07/<batch uid>.parquet
    <data>/billing/date=2026-11-01/<batch uid>.parquet   (date: the billing period's start)
    <data>/billing_split/date=2026-11-01/<batch uid>.parquet   (its CUR 2.0 EKS split rows)

Each file is written under a temporary name (``.<uid>.parquet.tmp`` in the same folder) and
renamed when complete, so no reader ever opens half a file. The SQL catalog is the commit
point: a file is live only once the ``batch`` row of its uid is committed, and readers open
only the files committed batches name. A file no committed batch names (an interrupted or
failed batch) is ignored, and removed by :meth:`DataDir.clean` at the start of the next
ingest writing to its day, under the store's write lock (so no batch in progress can lose its
files). A usage compaction's file (:mod:`tenantcost.store.compaction`) lies beside the day's
batch files, named by the compaction's uid.

The directory is a local folder or any fsspec URL (``s3://bucket/tc/``): files are built in a
local temporary folder, then uploaded under the temporary name and moved, since object stores
have no atomic rename (the catalog keeps that safe).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tenantcost.errors import InputError

if TYPE_CHECKING:
    from sqlalchemy import Engine

KINDS = ("costs", "usage", "billing", "billing_split")
UID_PATTERN = re.compile(r"^\.?([0-9a-f]{32})\.parquet(\.tmp)?$")
"""A batch file's name: ``<uid>.parquet``, or its temporary ``.<uid>.parquet.tmp``."""
UID_SQL = r"regexp_extract(filename, '([0-9a-f]{32})\.parquet$', 1)"
"""DuckDB: the batch uid of a scanned row, from its ``filename``."""


def partition(kind: str, day: str, uid: str) -> str:
    """A batch file's path relative to the data directory."""
    return f"{kind}/date={day}/{uid}.parquet"


@dataclass(frozen=True)
class Store:
    """An opened store: its database engine and its data directory."""

    engine: Engine
    data: DataDir


class DataDir:
    """The data directory of a store (a folder or an fsspec URL)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.local = "://" not in url or url.startswith("file://")
        self.fs: Any
        if self.local:
            self.fs = _LocalFiles()
            root = str(Path(url.removeprefix("file://")).absolute())
        else:
            self.fs, root = _fsspec(url)
        self.root = root.rstrip("/") or "/"
        self.protocol = "" if self.local else url.split("://", 1)[0]

    def path(self, relative: str) -> str:
        """The filesystem path of ``relative`` (for fsspec)."""
        return f"{self.root}/{relative}"

    def reader_path(self, relative: str) -> str:
        """What DuckDB opens: a local path, or a URL served through fsspec."""
        return self.path(relative) if self.local else f"{self.protocol}://{self.path(relative)}"

    @contextmanager
    def staging(self) -> Iterator[Path]:
        """A local folder for files being built (inside the data directory when it is local,
        so the final rename stays on one filesystem)."""
        if self.local:
            self.fs.makedirs(self.root, exist_ok=True)
        folder = tempfile.mkdtemp(prefix=".staging-", dir=self.root if self.local else None)
        try:
            yield Path(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def publish(self, built: Path, relative: str) -> str:
        """Move a complete local file to ``relative`` through a temporary name; returns the
        file's sha256."""
        sha = file_sha256(built)
        final = self.path(relative)
        folder, name = final.rsplit("/", 1)
        temporary = f"{folder}/.{name}.tmp"
        try:
            self.fs.makedirs(folder, exist_ok=True)
            if self.local:
                os.replace(built, temporary)
                os.replace(temporary, final)
            else:
                self.fs.put_file(str(built), temporary)
                self.fs.mv(temporary, final)
        except OSError as exc:
            raise InputError(f"cannot write: {exc.strerror or exc}", file=final) from None
        return sha

    def clean(self, keep: set[str], days: Sequence[str] | None = None) -> int:
        """Remove the batch files whose uid is not in ``keep`` (the committed batches, and the
        batch being written); returns how many were removed. Run under the write lock.

        With ``days`` (``YYYY-MM-DD``, what ``ingest`` passes: the days its batch writes to),
        only those days' folders are listed, so the cost of an ingest does not grow with the
        whole store (350,000 meter files a month); ``keep`` then needs only the uids of those
        days. A leftover on another day is removed by the next batch on that day (a retried
        batch writes the same days); no reader ever opens it meanwhile."""
        removed = 0
        if self.local and Path(self.root).is_dir():  # staging folders of killed processes
            for folder in Path(self.root).glob(".staging-*"):
                removed += sum(1 for p in folder.rglob("*") if p.is_file())
                shutil.rmtree(folder, ignore_errors=True)
        for kind in KINDS:
            base = self.path(kind)
            if not self.fs.exists(base):
                continue
            within = [f"{base}/date={d}" for d in days] if days is not None else [base]
            for found in (f for folder in within if self.fs.exists(folder)
                          for f in self.fs.find(folder)):  # fmt: skip
                match = UID_PATTERN.match(found.rsplit("/", 1)[-1])
                if match is not None and match.group(1) not in keep:
                    self.fs.rm(found)
                    removed += 1
            if self.local:
                _remove_empty_folders(Path(base))
        return removed

    def remove_batch(self, uid: str) -> None:
        """Best effort: remove every file of batch ``uid`` (a batch that failed)."""
        for kind in KINDS:
            base = self.path(kind)
            if not self.fs.exists(base):
                continue
            for found in self.fs.glob(f"{base}/date=*/*{uid}.parquet*"):
                with contextlib.suppress(OSError):  # else the next ingest's clean() does
                    self.fs.rm(found)
            if self.local:
                _remove_empty_folders(Path(base))


def _fsspec(url: str) -> tuple[Any, str]:
    """The fsspec filesystem of a data directory URL (s3fs for s3://, gcsfs for gs://...)."""
    try:
        import fsspec

        fs, root = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise InputError(
            f"cannot use the data directory: {exc}; install fsspec and the package for its "
            "protocol (for example s3fs for s3://)",
            file=url,
        ) from None
    return fs, str(root)


class _LocalFiles:
    """The few filesystem operations the data directory needs, on a local folder (the
    fsspec names, so a folder needs no fsspec)."""

    def makedirs(self, path: str, exist_ok: bool = True) -> None:
        Path(path).mkdir(parents=True, exist_ok=exist_ok)

    def exists(self, path: str) -> bool:
        return Path(path).exists()

    def find(self, path: str) -> list[str]:
        return sorted(str(p) for p in Path(path).rglob("*") if p.is_file())

    def glob(self, pattern: str) -> list[str]:
        return sorted(str(p) for p in Path("/").glob(pattern.lstrip("/")))

    def rm(self, path: str) -> None:
        Path(path).unlink(missing_ok=True)


def _remove_empty_folders(base: Path) -> None:
    for folder in sorted((p for p in base.glob("date=*") if p.is_dir()), reverse=True):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only if empty


def file_sha256(path: Path) -> str:
    """The hex sha256 of a local file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
