"""Input files in object storage (``s3://``, ``gs://``, ``az://``...), read through fsspec.

Why copies: the billing readers check each file's header, decompress, and let DuckDB scan
and re-scan it (the duplicate check, the error diagnosis, the batch's Parquet files), which
is what local files do well. So a URL is listed once, its files are copied into a temporary
folder (their relative paths kept), read as local files, and the folder is removed when the
ingest ends. Only the files the reader takes are fetched (by suffix; hidden names skipped,
as in a local folder).

Nothing of the copy shows: the batch's source and every message name the URL, never the
temporary path (:meth:`Fetched.restore`). Credentials come from the environment as each
cloud's SDK reads them (an IRSA role, GKE Workload Identity, Azure's managed identity), never
from tenantcost's settings. The protocols need their fsspec package: the extras
``tenantcost[s3]``, ``[gcs]`` and ``[azure]``.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from tenantcost.errors import InputError

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure",
          "abfss": "azure"}  # fmt: skip
"""A protocol's extra of the tenantcost package (``pip install 'tenantcost[s3]'``)."""


def is_url(entry: str | Path) -> bool:
    """Whether ``entry`` names object storage (a ``scheme://`` other than ``file://``)."""
    text = str(entry)
    return _URL.match(text) is not None and not text.startswith("file://")


@dataclass
class Fetched:
    """The local paths to read, and how a temporary path maps back to its URL."""

    paths: list[str]
    copies: dict[str, str] = field(default_factory=dict)
    """Temporary folder or file -> the URL it was copied from."""

    def url_of(self, text: str) -> str:
        """``text`` with every temporary path replaced by its URL."""
        for local, url in sorted(self.copies.items(), key=lambda kv: -len(kv[0])):
            text = text.replace(local, url)
        return text

    def restore(self, exc: InputError) -> InputError:
        """The same error (its class kept), naming URLs instead of temporary paths."""
        if self.copies:
            exc.message = self.url_of(exc.message)
            exc.file = self.url_of(exc.file) if exc.file else None
            exc.args = (exc.one_line(),)
        return exc


@contextmanager
def fetched(entries: Sequence[str | Path], suffixes: tuple[str, ...]) -> Iterator[Fetched]:
    """``entries`` with each URL's files copied locally (module docstring); local entries
    pass through unchanged. The copies are removed when the block ends."""
    if not any(is_url(e) for e in entries):
        yield Fetched([str(e) for e in entries])
        return
    folder = Path(tempfile.mkdtemp(prefix="tenantcost-fetch-"))
    try:
        result = Fetched([])
        for index, entry in enumerate(entries):
            if not is_url(entry):
                result.paths.append(str(entry))
                continue
            copy = _copy(str(entry), folder / str(index), suffixes)
            result.paths.append(copy)
            result.copies[copy] = str(entry).rstrip("/")
        yield result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _copy(url: str, local: Path, suffixes: tuple[str, ...]) -> str:
    """Copy the object ``url`` names (a file, or every file under a prefix) into the new
    folder ``local``; the copy's path (a file keeps its name: the reader goes by suffix)."""
    fs, root = _filesystem(url)
    try:
        if fs.isfile(root):
            target = local / PurePosixPath(root).name
            local.mkdir(parents=True)
            fs.get_file(root, str(target))
            return str(target)
        names = [n for n in fs.find(root) if _wanted(PurePosixPath(n).relative_to(root), suffixes)]
        if not fs.isdir(root) and not names:
            raise InputError("file or folder not found", file=url)
        local.mkdir(parents=True)
        for name in sorted(names):
            target = local / PurePosixPath(name).relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(name, str(target))
    except InputError:
        raise
    except Exception as exc:  # the SDK's own errors: credentials, access, network
        raise InputError(f"cannot read from object storage: {_first_line(exc)}", file=url) from None
    return str(local)


def _wanted(relative: PurePosixPath, suffixes: tuple[str, ...]) -> bool:
    hidden = any(part.startswith(".") for part in relative.parts)
    return not hidden and relative.name.lower().endswith(suffixes)


def _filesystem(url: str) -> tuple[Any, str]:
    protocol = url.split("://", 1)[0].lower()
    try:
        import fsspec

        fs, root = fsspec.core.url_to_fs(url)
    except ImportError:
        extra = EXTRAS.get(protocol)
        hint = f"pip install 'tenantcost[{extra}]'" if extra else "install its fsspec package"
        raise InputError(f"no file system for {protocol}:// here: {hint}", file=url) from None
    except ValueError as exc:
        raise InputError(f"cannot read from object storage: {exc}", file=url) from None
    return fs, str(root).rstrip("/")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
