"""An API error with fields beside ``detail`` (the record index and field of a bad record).

FastAPI nests a dict ``detail`` as ``{"detail": {...}}``; a :class:`Problem` is answered flat,
``{"detail": "records[3], column 'requests': ...", "record": 3, "field": "requests"}``, so
clients read the same ``detail`` string from every error.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import HTTPException, Request
from fastapi.responses import JSONResponse, Response


class Problem(HTTPException):
    """An HTTP error whose body is ``{"detail": detail, **fields}``."""

    def __init__(self, status: int, detail: str, **fields: Any) -> None:
        super().__init__(status, detail)
        self.fields = fields


async def problem_response(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, Problem)
    return JSONResponse({"detail": exc.detail, **exc.fields}, status_code=exc.status_code)


async def invalid_request_response(_request: Request, exc: Exception) -> Response:
    """FastAPI's 422 for a body, path or query that fails validation, as FastAPI writes it,
    except that a non-finite number in the echoed input (JSON's ``Infinity``, ``NaN`` or
    ``1e999``, which Python's parser accepts) is echoed as its text: FastAPI's own answer
    cannot be serialized as JSON and became a 500."""
    from fastapi.encoders import jsonable_encoder
    from fastapi.exceptions import RequestValidationError

    assert isinstance(exc, RequestValidationError)
    return JSONResponse({"detail": _finite(jsonable_encoder(exc.errors()))}, status_code=422)


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by its JSON spelling."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return value
