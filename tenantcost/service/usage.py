"""``POST /api/v1/usage`` (JSON records) and ``POST /api/v1/usage.parquet`` (bulk).

Both go through the store's own ingest (:func:`tenantcost.store.ingest.ingest_usage_source`),
so a record the CLI refuses is refused here with the same reason, a batch is atomic, a closed
month is refused (409, naming ``reopen``) and concurrent posters queue on the store's write
lock (each waits up to ``ingest_wait`` seconds; none is lost).

JSON records are validated by the usage reader itself: they are written to a CSV file in a
temporary folder and read back with :func:`tenantcost.readers.usage.read_usage`, whose errors
name ``row N`` of that file; the answer (422) names ``records[N-2]`` and the field instead.
Client ids are checked first, on the parsed JSON strings (:mod:`tenantcost.client_id`): a
lone surrogate (``"\ud800"``) fits in no Arrow column or UTF-8 file, and an oversized id
never reaches a frame. A lone surrogate in any other field is 422 naming it too. What ingest
could not check yet (no rule version stored for those hours) is the answer's ``warnings``.

**Idempotency-Key.** The first answer to a key is stored (table ``idempotency_key``) in the
batch's own transaction: a retry with the same key and body gets that answer and writes
nothing; the same key with another body is 409. Keys are store-wide, not per token: a meter
spools a batch with its key, and when the batch is delivered after its token was rotated
(revoked, a new token issued), the new token's retry must be replayed, not added. The key is
random (a uuid) and the stored answer is given only for the same body, so sharing the key
space tells another token nothing it did not send. Two requests racing with one key are
serialised by the write lock: the second finds the first's row inside the transaction and its
batch rolls back. "The same body" is compared by a digest of its canonical form
(:func:`_canonical_digest`): for JSON, the parsed ``mode`` and ``records`` serialised with
sorted keys and no whitespace, so a retry re-indented or with its keys in another order is
the same batch; for Parquet, the file's bytes (a file written again is another body).

**Size.** Every body is under the service's byte limit (``serve --max-body``, enforced while
it streams in by :mod:`tenantcost.service.body_limit`); a batch is also under ``max_records``
records or Parquet rows. The Parquet body is streamed to a temporary file, never held whole.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy import Connection, insert, select

from tenantcost.errors import InputError
from tenantcost.service import json_body
from tenantcost.service.auth import MayIngest
from tenantcost.service.permissions import Principal
from tenantcost.service.problems import Problem
from tenantcost.store.models import IdempotencyKey, table

router = APIRouter(prefix="/api/v1", tags=["usage"])
MAX_KEY_LENGTH = 200


class Mode(StrEnum):
    REPLACE = "replace"
    SUM = "sum"


class UsageBatch(BaseModel):
    """The JSON body: records are objects with ``window_start``, ``window_end``, ``service``,
    ``client`` and one number per metric (the columns of a usage file)."""

    model_config = ConfigDict(extra="forbid")
    mode: Mode = Mode.REPLACE
    records: list[dict[str, Any]] = Field(min_length=1)


@dataclass(frozen=True)
class Answer:
    """An HTTP answer as stored for an idempotency key."""

    status: int
    body: dict[str, Any]

    def response(self, replayed: bool = False) -> JSONResponse:
        headers = {"Idempotent-Replayed": "true"} if replayed else None
        return JSONResponse(self.body, status_code=self.status, headers=headers)


class _Replay(Exception):
    """Raised inside the batch's transaction when the key was stored meanwhile."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer


def _key_conflict(key: str) -> HTTPException:
    return HTTPException(
        409, f"Idempotency-Key '{key}' was used with another body; use a new key for a new batch"
    )


def _stored_answer(conn: Connection, key: str, digest: str) -> Answer | None:
    """The stored answer to ``key`` from any token (keys are store-wide), ``None`` for a new
    key; 409 for a key stored with another body. Keys stored per token before 0014 may be
    held by several tokens: the one with this body answers."""
    k = table(IdempotencyKey).c
    rows = conn.execute(
        select(k.request_sha256, k.status_code, k.response)
        .where(k.key == key)
        .order_by(k.created_at, k.token_name)
    ).all()
    if not rows:
        return None
    same = next((row for row in rows if row.request_sha256 == digest), None)
    if same is None:
        raise _key_conflict(key)
    return Answer(int(same.status_code), json.loads(same.response))


def _check_key(key: str | None) -> str | None:
    if key is None:
        return None
    if not key.strip() or len(key) > MAX_KEY_LENGTH:
        raise HTTPException(422, f"Idempotency-Key: 1 to {MAX_KEY_LENGTH} characters")
    return key


@dataclass(frozen=True)
class _Upload:
    """A validated upload on disk, and how to name its rows in errors."""

    path: Path
    label: str
    """What errors call the upload (``records`` or ``usage.parquet``)."""
    first_row: int
    """The reader's row number of the first record (CSV: 2, after the header; Parquet: 1)."""


def _public(exc: InputError, upload: _Upload) -> Problem:
    """The reader's one line about a temporary file, as the client sent it: JSON records as
    ``records[i].field`` (with ``record`` and ``field`` in the body), Parquet rows as
    ``usage.parquet, row N``."""
    temp = str(upload.path)
    if upload.label != "records":
        return Problem(422, exc.one_line().replace(temp, upload.label))
    message = re.sub(
        rf"{re.escape(temp)}(?::|, )row (\d+)",
        lambda m: f"records[{int(m[1]) - upload.first_row}]",
        exc.message,
    ).replace(temp, "records")
    row = re.fullmatch(r"row (\d+)", exc.where or "")
    if row is None and exc.where != "header":
        return Problem(
            422, message if exc.file == temp else exc.one_line().replace(temp, "records")
        )
    index = int(row[1]) - upload.first_row if row is not None else 0  # header: every record
    place = f"records[{index}]" + (f".{exc.column}" if exc.column else "")
    return Problem(422, f"{place}: {message}", record=index, field=exc.column)


def _records_csv(batch: UsageBatch, folder: Path) -> _Upload:
    """The records as a CSV file for the usage reader (columns: the union of the keys). The
    file is the reader's input, never shown to anyone, so its cells are written exactly: the
    spreadsheet rule of :mod:`tenantcost.csv_cells` is for the CSV files people open."""
    import pandas as pd

    _check_clients(batch.records)
    path = folder / "records.csv"
    try:  # pandas' text columns are Arrow strings: UTF-8, as the file is
        frame = pd.DataFrame.from_records(batch.records)
        for column in frame.columns:  # nested values (lists, objects) are not numbers or text
            frame[column] = frame[column].map(_cell, na_action="ignore")
        frame.to_csv(path, index=False)
    except UnicodeEncodeError:
        raise _not_utf8(batch.records) from None
    return _Upload(path, "records", 2)


def _check_clients(records: list[dict[str, Any]]) -> None:
    """The first record whose ``client`` :mod:`tenantcost.client_id` refuses is 422, checked
    on the JSON strings themselves, before any frame or file holds them."""
    import pandas as pd

    from tenantcost.client_id import bad_client_ids, client_id_problem

    clients = pd.Series([r.get("client") for r in records], dtype=object)  # numbers: no check
    bad = bad_client_ids(clients).to_numpy()
    if bad.any():
        index = int(bad.argmax())
        problem = client_id_problem(str(clients.iloc[index])) or "client id refused"
        raise Problem(422, f"records[{index}].client: {problem}", record=index, field="client")


_SURROGATE = re.compile(r"[\ud800-\udfff]")


def _not_utf8(records: list[dict[str, Any]]) -> Problem:
    """422 naming the first field (name or text) holding a lone surrogate: the reason a
    record could not be written as UTF-8 (looked for only once writing failed)."""
    for index, record in enumerate(records):
        for name, value in record.items():
            found = _SURROGATE.search(name) or (
                _SURROGATE.search(value) if isinstance(value, str) else None
            )
            if found is not None:
                code = f"U+{ord(found.group(0)):04X}"
                shown = name.encode("utf-8", "backslashreplace").decode("utf-8")  # answerable
                return Problem(422, f"records[{index}].{shown}: holds a lone surrogate {code} "
                               "(not valid UTF-8)", record=index, field=shown)  # fmt: skip
    return Problem(422, "records: text that is not valid UTF-8")


def _cell(value: Any) -> Any:
    return json.dumps(value) if isinstance(value, dict | list) else value


@contextmanager
def _ingest_errors(upload: _Upload) -> Iterator[None]:
    from tenantcost.store.cycle import MonthClosed
    from tenantcost.store.lock import StoreLocked

    try:
        yield
    except MonthClosed as exc:
        raise HTTPException(409, exc.one_line()) from None
    except InputError as exc:
        raise _public(exc, upload) from None
    except StoreLocked as exc:
        raise HTTPException(503, str(exc), headers={"Retry-After": "5"}) from None


@dataclass
class _Recorder:
    """Called inside the batch's write transaction (``in_transaction``): makes the answer
    and stores it under the idempotency key, or finds the key stored meanwhile (the batch
    then rolls back and the stored answer is returned)."""

    principal: Principal
    key: str | None
    digest: str
    answer: Answer | None = None

    def __call__(self, conn: Connection, done: Any) -> None:
        self.answer = Answer(200, _ingested_document(done))
        if self.key is None:
            return
        stored = _stored_answer(conn, self.key, self.digest)
        if stored is not None:
            raise _Replay(stored)
        row = {
            "token_name": self.principal.name,
            "key": self.key,
            "status_code": 200,
            "request_sha256": self.digest,
            "response": json.dumps(self.answer.body),
            "batch_uid": done.uid,
        }
        conn.execute(insert(table(IdempotencyKey)).values(**row))


def _ingest(
    request: Request,
    principal: Principal,
    upload: _Upload,
    mode: Mode,
    key: str | None,
    digest: str,
) -> JSONResponse:
    """Ingest the upload as one batch, storing the answer under ``key`` atomically."""
    from tenantcost.readers.samples import is_samples_file
    from tenantcost.readers.usage import read_usage
    from tenantcost.split import connect
    from tenantcost.store.ingest import ingest_usage_source
    from tenantcost.store.samples import ingest_samples
    from tenantcost.usage_source import FrameUsage, ParquetUsage

    settings, store = request.app.state.settings, request.app.state.store
    if store is None:
        raise HTTPException(503, "the service has no data directory: start it with --data DIR")
    origin = f"POST {request.url.path} ({principal.actor})"
    recorder = _Recorder(principal, key, digest)
    con = connect()
    with _ingest_errors(upload):
        if is_samples_file(upload.path):  # records with a time: gauge samples
            if mode is Mode.SUM:
                raise Problem(422, "mode: sum is refused for gauge samples (records with "
                              "a time): a level re-sent for an instant replaces it")  # fmt: skip
            try:
                done = ingest_samples(store, [upload.path], period=None, actor=principal.actor,
                                      wait=settings.ingest_wait, in_transaction=recorder,
                                      origin=origin)  # fmt: skip
            except _Replay as replay:
                return replay.answer.response(replayed=True)
            assert recorder.answer is not None
            return recorder.answer.response()
        if upload.label == "records":
            source: Any = FrameUsage(read_usage([upload.path]), origin=origin)
        else:
            source = ParquetUsage([upload.path], con)
            source.origin = origin
        try:
            done = ingest_usage_source(
                store,
                source,
                con,
                period=None,
                mode=mode.value,
                actor=principal.actor,
                wait=settings.ingest_wait,
                in_transaction=recorder,
            )
        except _Replay as replay:
            return replay.answer.response(replayed=True)
    if done.unchanged:  # the same rows into a closed month: nothing written, not even the key
        return Answer(200, _ingested_document(done)).response()
    assert recorder.answer is not None
    return recorder.answer.response()


def _ingested_document(done: Any) -> dict[str, Any]:
    from tenantcost.timefmt import iso_z

    return {
        "batch": done.uid,
        "mode": done.mode,
        "records": done.rows,
        "cells": done.cells,
        "replaced_cells": done.replaced,
        "window_from": iso_z(done.window_from),
        "window_to": iso_z(done.window_to),
        "sha256": done.sha256,
        "unchanged": done.unchanged,
        "warnings": list(done.warnings),
    }


def _replayed(
    request: Request, principal: Principal, key: str | None, digest: str
) -> JSONResponse | None:
    """The stored answer of a retried key (before the batch is read into a frame), or None."""
    if key is None:
        return None
    with request.app.state.engine.connect() as conn:
        stored = _stored_answer(conn, key, digest)
    return stored.response(replayed=True) if stored is not None else None


def _too_large(count: int, limit: int) -> HTTPException:
    return HTTPException(
        413,
        f"{count} records is over this service's limit of {limit} per "
        "batch: split the batch, or use POST /api/v1/usage.parquet",
    )


def _parse_batch(raw: bytes, limit: int) -> UsageBatch:
    document = json_body.loads(raw)  # 422 for bytes that are no JSON document
    records = document.get("records") if isinstance(document, dict) else None
    if isinstance(records, list) and len(records) > limit:
        raise _too_large(len(records), limit)
    try:
        return UsageBatch.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first["loc"]
        place = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        text = f"{place or 'body'}: {first['msg']}"
        if len(loc) >= 2 and loc[0] == "records" and isinstance(loc[1], int):
            raise Problem(422, text, record=loc[1], field=None) from None
        raise Problem(422, text) from None


IdempotencyHeader = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="A retry with the same key and body returns "
        "the first answer and changes nothing; another body is 409. Keys are store-wide: "
        "a retry from another token (after a rotation) is replayed too.",
    ),
]


@router.post(
    "/usage",
    summary="Ingest usage records (one atomic batch)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": UsageBatch.model_json_schema()}},
        }
    },
)
async def post_usage(
    request: Request,
    principal: MayIngest,
    idempotency_key: IdempotencyHeader = None,
) -> JSONResponse:
    from starlette.concurrency import run_in_threadpool

    limit = request.app.state.settings.max_records
    key = _check_key(idempotency_key)
    raw = await request.body()  # under the byte limit (BodyLimit), so it may be held
    return await run_in_threadpool(_post_records, request, principal, raw, key, limit)


def _canonical_digest(batch: UsageBatch) -> str:
    """The idempotency digest of a JSON batch: of what it says, not of how it is spelled.

    Whitespace, the order of keys and a left-out default ``mode`` do not change it; the order
    of the records and the spelling of a number (``10`` and ``10.0`` are different JSON
    values) do. One C-level ``json.dumps`` over the records, no Python loop per record; ASCII
    escapes keep a lone surrogate (``"\\ud800"``) encodable."""
    canonical = json.dumps(
        {"mode": batch.mode.value, "records": batch.records},
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(b"json-canonical\n" + canonical.encode()).hexdigest()


def _post_records(
    request: Request, principal: Principal, raw: bytes, key: str | None, limit: int
) -> JSONResponse:
    batch = _parse_batch(raw, limit)
    digest = _canonical_digest(batch)
    replay = _replayed(request, principal, key, digest)
    if replay is not None:
        return replay
    with tempfile.TemporaryDirectory(prefix="tenantcost-api-") as tmp:
        upload = _records_csv(batch, Path(tmp))
        return _ingest(request, principal, upload, batch.mode, key, digest)


@router.post(
    "/usage.parquet",
    summary="Ingest a Parquet file of usage (bulk, one batch)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/vnd.apache.parquet": {"schema": {"type": "string", "format": "binary"}}
            },
        }
    },
)
async def post_usage_parquet(
    request: Request,
    principal: MayIngest,
    mode: Annotated[Mode, Query(description="replace or sum")] = Mode.REPLACE,
    idempotency_key: IdempotencyHeader = None,
) -> JSONResponse:
    """The body is the Parquet file itself (columns as a usage file's)."""
    from starlette.concurrency import run_in_threadpool

    limit = request.app.state.settings.max_records
    key = _check_key(idempotency_key)
    with tempfile.TemporaryDirectory(prefix="tenantcost-api-") as tmp:
        path = Path(tmp) / "usage.parquet"
        digest = await _stream_to_file(request, path, f"parquet {mode.value}\n".encode())
        return await run_in_threadpool(
            _post_parquet, request, principal, path, mode, key, digest, limit
        )


async def _stream_to_file(request: Request, path: Path, salt: bytes) -> str:
    """Write the body to ``path`` chunk by chunk (it is under the byte limit, but never held
    whole); its sha256 (after ``salt``) as it goes. A full disk is 503, not a 500."""
    digest = hashlib.sha256(salt)
    try:
        with path.open("wb") as sink:
            async for chunk in request.stream():
                sink.write(chunk)
                digest.update(chunk)
    except OSError as exc:
        raise HTTPException(
            503,
            f"no room for the upload's temporary file ({exc.strerror})",
            headers={"Retry-After": "30"},
        ) from None
    return digest.hexdigest()


def _post_parquet(
    request: Request,
    principal: Principal,
    path: Path,
    mode: Mode,
    key: str | None,
    digest: str,
    limit: int,
) -> JSONResponse:
    import pyarrow as pa
    import pyarrow.parquet as pq

    replay = _replayed(request, principal, key, digest)
    if replay is not None:
        return replay
    try:
        rows = pq.ParquetFile(path).metadata.num_rows
    except (pa.ArrowInvalid, OSError) as exc:
        raise HTTPException(422, f"usage.parquet: not a Parquet file ({exc})") from None
    if rows > limit:
        raise _too_large(rows, limit)
    return _ingest(request, principal, _Upload(path, "usage.parquet", 1), mode, key, digest)
